/**
 * Stalled-handler detection: keeps the handlers running now, in start order, and a sweep reports
 * each one whose running time passes the threshold — once when it passes, and again when the
 * handler finally ends. O(1) per start and end; a sweep looks at the stalled handlers plus one.
 */
import type { StalledHandler } from '../metrics';

/** One running handler. */
export interface RunningHandler {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly generation: number | undefined;
  /** ms since the epoch. */
  readonly startedAt: number;
  stalled: boolean;
}

/** What the detector reports. */
export interface StallListener {
  stalled(handler: RunningHandler, elapsedMs: number): void;
  completed(handler: RunningHandler, elapsedMs: number): void;
}

export class StallDetector {
  private readonly running = new Map<number, RunningHandler>();
  private nextId = 0;
  private timer: NodeJS.Timeout | undefined;
  private stalledNow = 0;
  /** Handlers that ever passed the threshold. */
  stallsTotal = 0;

  /**
   * @param thresholdMs 0 disables detection (handlers are not tracked at all).
   * @param now the clock (injectable for tests).
   */
  constructor(
    readonly thresholdMs: number,
    private readonly listener: StallListener,
    private readonly now: () => number = Date.now,
  ) {}

  get enabled(): boolean {
    return this.thresholdMs > 0;
  }

  /** Tracks a handler that starts now; returns the token for `end()` (-1 when disabled). */
  start(
    topic: string,
    partition: number,
    offset: number,
    generation: number | undefined,
    startedAt: number,
  ): number {
    if (!this.enabled) return -1;
    const id = this.nextId++;
    this.running.set(id, { topic, partition, offset, generation, startedAt, stalled: false });
    if (this.timer === undefined) {
      const every = Math.max(10, Math.min(1000, Math.floor(this.thresholdMs / 4)));
      this.timer = setInterval(() => this.sweep(), every);
      this.timer.unref();
    }
    return id;
  }

  end(token: number): void {
    if (token < 0) return;
    const handler = this.running.get(token);
    if (!handler) return;
    this.running.delete(token);
    if (handler.stalled) {
      this.stalledNow -= 1;
      this.listener.completed(handler, this.now() - handler.startedAt);
    }
  }

  /** Reports handlers that passed the threshold since the last sweep. */
  sweep(): void {
    const now = this.now();
    for (const handler of this.running.values()) {
      if (handler.stalled) continue;
      const elapsed = now - handler.startedAt;
      // Start order: every later handler started even more recently.
      if (elapsed < this.thresholdMs) break;
      handler.stalled = true;
      this.stalledNow += 1;
      this.stallsTotal += 1;
      this.listener.stalled(handler, elapsed);
    }
  }

  /** Handlers stalled now. */
  stalled(): StalledHandler[] {
    if (this.stalledNow === 0) return [];
    const now = this.now();
    const out: StalledHandler[] = [];
    for (const h of this.running.values()) {
      if (!h.stalled) continue;
      out.push({
        topic: h.topic,
        partition: h.partition,
        offset: h.offset,
        generation: h.generation,
        startedAt: h.startedAt,
        elapsedMs: now - h.startedAt,
      });
    }
    return out;
  }

  get stalledCount(): number {
    return this.stalledNow;
  }

  /** Stops the sweep timer (the consumer closed). */
  dispose(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
