/**
 * What the rebalance events add up to: counts of assignments, revokes and losses, a histogram per
 * revoke phase (drain, commit, release, total), the last revoke described phase by phase, and when
 * the member last had nothing to wait for. Fed by `rebalances$`; read by the metrics snapshot and
 * health.
 */
import type { LastRevoke, RebalanceMetrics } from '../../metrics';
import type { RebalanceEvent } from '../../types';
import { Histogram, REBALANCE_BUCKETS_SECONDS } from './histogram';

/** The rebalance phases timed as histograms. */
export type RebalancePhase = 'drain' | 'commit' | 'release' | 'total';

/** What a revoke in progress has reported so far (keyed by its generation). */
interface PendingRevoke {
  inFlight: number;
  drainMs: number;
  commitMs: number;
  timedOut: boolean;
}

export class RebalanceTally {
  private readonly phases = {
    drain: new Histogram(REBALANCE_BUCKETS_SECONDS),
    commit: new Histogram(REBALANCE_BUCKETS_SECONDS),
    release: new Histogram(REBALANCE_BUCKETS_SECONDS),
    total: new Histogram(REBALANCE_BUCKETS_SECONDS),
  };
  private readonly counts = {
    assignments: 0,
    revokes: 0,
    losses: 0,
    drainTimeouts: 0,
    partitionsAssigned: 0,
    partitionsRevoked: 0,
    partitionsLost: 0,
  };
  private readonly pending = new Map<number, PendingRevoke>();
  private last: LastRevoke | undefined;
  private waitingSince_ = 0;

  /** `phaseTimed` hears each phase duration as it is recorded (for adapters' own histograms). */
  constructor(private readonly phaseTimed: (phase: RebalancePhase, ms: number) => void) {}

  /** When the member last had no partitions and no rebalance to wait for (ms since the epoch). */
  get waitingSince(): number {
    return this.waitingSince_;
  }

  observe(e: RebalanceEvent): void {
    const r = this.counts;
    switch (e.type) {
      case 'assigned':
        r.assignments += 1;
        r.partitionsAssigned += e.partitions.length;
        break;
      case 'revoking':
        this.pending.set(e.generation, { inFlight: 0, drainMs: 0, commitMs: 0, timedOut: false });
        break;
      case 'drained': {
        const p = this.pending.get(e.generation);
        if (p) {
          p.inFlight = e.inFlight;
          p.drainMs = e.durationMs;
          p.timedOut = e.timedOut;
        }
        if (e.timedOut) r.drainTimeouts += 1;
        this.time('drain', e.durationMs);
        break;
      }
      case 'committed': {
        const p = this.pending.get(e.generation);
        if (p) p.commitMs = e.durationMs;
        this.time('commit', e.durationMs);
        break;
      }
      case 'revoked': {
        const p = this.pending.get(e.generation);
        this.pending.delete(e.generation);
        r.revokes += 1;
        r.partitionsRevoked += e.partitions.length;
        this.time('release', e.durationMs);
        this.time('total', e.totalMs);
        this.last = {
          generation: e.generation,
          protocol: e.protocol,
          partitions: e.partitions,
          inFlight: p?.inFlight ?? 0,
          drainMs: p?.drainMs ?? 0,
          commitMs: p?.commitMs ?? 0,
          releaseMs: e.durationMs,
          totalMs: e.totalMs,
          timedOut: p?.timedOut ?? false,
          at: e.at,
        };
        this.waitingSince_ = e.at;
        break;
      }
      case 'lost':
        this.pending.delete(e.generation);
        r.losses += 1;
        r.partitionsLost += e.partitions.length;
        this.waitingSince_ = e.at;
        break;
      default: {
        const never: never = e;
        throw new Error(`unknown rebalance event ${String(never)}`);
      }
    }
  }

  snapshot(fetchWakes: RebalanceMetrics['fetchWakes']): RebalanceMetrics {
    return {
      ...this.counts,
      drain: this.phases.drain.snapshot(),
      commit: this.phases.commit.snapshot(),
      release: this.phases.release.snapshot(),
      total: this.phases.total.snapshot(),
      last: this.last,
      fetchWakes,
    };
  }

  private time(phase: RebalancePhase, ms: number): void {
    this.phases[phase].observe(ms);
    this.phaseTimed(phase, ms);
  }
}
