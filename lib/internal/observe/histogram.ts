/**
 * A fixed-bucket duration histogram, the way Prometheus keeps one: cumulative counts per upper
 * bound, a count and a sum. O(buckets) per observation, no allocation.
 */
import type { DurationHistogram } from '../../metrics';

/** Bucket upper bounds (seconds) for handler and commit durations. */
export const LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

/** Bucket upper bounds (seconds) for rebalance phase durations. */
export const REBALANCE_BUCKETS_SECONDS: readonly number[] = [
  0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

export class Histogram {
  /** Per bucket (not cumulative) counts; a value above the last bound is only in `count`. */
  private readonly counts: number[];
  /** The bounds in ms, so that an observation needs no division. */
  private readonly boundsMs: number[];
  private count = 0;
  private sumMs = 0;
  private maxMs = 0;

  constructor(readonly bucketsSeconds: readonly number[]) {
    this.counts = bucketsSeconds.map(() => 0);
    this.boundsMs = bucketsSeconds.map((le) => le * 1000);
  }

  observe(ms: number): void {
    this.count += 1;
    this.sumMs += ms;
    if (ms > this.maxMs) this.maxMs = ms;
    const b = this.boundsMs;
    for (let i = 0; i < b.length; i++) {
      if (ms <= b[i]!) {
        this.counts[i]! += 1;
        return;
      }
    }
  }

  snapshot(): DurationHistogram {
    let cumulative = 0;
    return {
      count: this.count,
      sumMs: this.sumMs,
      maxMs: this.maxMs,
      buckets: this.bucketsSeconds.map((le, i) => {
        cumulative += this.counts[i]!;
        return { leMs: le * 1000, count: cumulative };
      }),
    };
  }
}
