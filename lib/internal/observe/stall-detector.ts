/**
 * Stalled-handler detection: keeps the handlers running now, in start order, and a sweep reports
 * each one whose running time passes the threshold — once when it passes, and again when the
 * handler finally ends.
 *
 * The running handlers are an intrusive doubly linked list of their own records (no map, no entry
 * objects): a start appends the record, an end unlinks it, both O(1) and without allocation beyond
 * the record itself, which the caller may extend with its own fields (the instrumentation keeps a
 * handler invocation's whole state in it). A sweep walks from the oldest and stops at the first
 * handler still under the threshold, so it looks at the stalled handlers plus one.
 */
import type { StalledHandler } from '../../metrics';

/** One running handler, as a node of the detector's list. */
export class RunningHandler {
  stalled = false;
  /** Whether the record is in a detector's list now. */
  tracked = false;
  /** Neighbours in start order (undefined at the ends and when not tracked). */
  prev: RunningHandler | undefined = undefined;
  next: RunningHandler | undefined = undefined;

  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offset: number,
    readonly generation: number | undefined,
    /** When it started, on the detector's clock (ms; `performance.now()` unless injected). */
    readonly startedAt: number,
  ) {}
}

/** What the detector reports (elapsed times in whole ms, as the threshold is). */
export interface StallListener {
  stalled(handler: RunningHandler, elapsedMs: number): void;
  completed(handler: RunningHandler, elapsedMs: number): void;
}

export class StallDetector {
  /** The oldest running handler, and the newest. */
  private head: RunningHandler | undefined = undefined;
  private tail: RunningHandler | undefined = undefined;
  private timer: NodeJS.Timeout | undefined;
  private stalledNow = 0;
  /** Handlers that ever passed the threshold. */
  stallsTotal = 0;

  /**
   * @param thresholdMs 0 disables detection (handlers are not tracked at all).
   * @param now the clock of `startedAt` (monotonic ms; injectable for tests).
   * @param wallNow the wall clock (ms since the epoch) that reported start times are given in.
   */
  constructor(
    readonly thresholdMs: number,
    private readonly listener: StallListener,
    private readonly now: () => number = () => performance.now(),
    private readonly wallNow: () => number = Date.now,
  ) {}

  get enabled(): boolean {
    return this.thresholdMs > 0;
  }

  /** The detector's clock (what `startedAt` of a tracked record must be read from). */
  clock(): number {
    return this.now();
  }

  /** Tracks a handler that starts now; returns its record for `end()` (undefined when disabled). */
  start(
    topic: string,
    partition: number,
    offset: number,
    generation: number | undefined,
    startedAt: number,
  ): RunningHandler | undefined {
    if (!this.enabled) return undefined;
    const handler = new RunningHandler(topic, partition, offset, generation, startedAt);
    this.track(handler);
    return handler;
  }

  /**
   * Tracks a record built by the caller (its `startedAt` read from {@link clock} now, so that the
   * list stays in start order). Does nothing when disabled or when the record is tracked already.
   */
  track(handler: RunningHandler): void {
    if (!this.enabled || handler.tracked) return;
    handler.tracked = true;
    handler.prev = this.tail;
    handler.next = undefined;
    if (this.tail === undefined) this.head = handler;
    else this.tail.next = handler;
    this.tail = handler;
    if (this.timer === undefined) {
      const every = Math.max(10, Math.min(1000, Math.floor(this.thresholdMs / 4)));
      this.timer = setInterval(() => this.sweep(), every);
      this.timer.unref();
    }
  }

  /** The handler ended; a repeated end, or one of a record never tracked, changes nothing. */
  end(handler: RunningHandler | undefined): void {
    if (handler === undefined || !handler.tracked) return;
    handler.tracked = false;
    const { prev, next } = handler;
    if (prev === undefined) this.head = next;
    else prev.next = next;
    if (next === undefined) this.tail = prev;
    else next.prev = prev;
    handler.prev = undefined;
    handler.next = undefined;
    if (handler.stalled) {
      this.stalledNow -= 1;
      this.listener.completed(handler, Math.floor(this.now() - handler.startedAt));
    }
  }

  /** Reports handlers that passed the threshold since the last sweep. */
  sweep(): void {
    if (this.head === undefined) return;
    const now = this.now();
    for (let h: RunningHandler | undefined = this.head; h !== undefined; h = h.next) {
      if (h.stalled) continue;
      const elapsed = now - h.startedAt;
      // Start order: every later handler started even more recently.
      if (elapsed < this.thresholdMs) break;
      h.stalled = true;
      this.stalledNow += 1;
      this.stallsTotal += 1;
      this.listener.stalled(h, Math.floor(elapsed));
    }
  }

  /** Handlers stalled now. */
  stalled(): StalledHandler[] {
    if (this.stalledNow === 0) return [];
    const now = this.now();
    const wall = this.wallNow();
    const out: StalledHandler[] = [];
    for (let h: RunningHandler | undefined = this.head; h !== undefined; h = h.next) {
      if (!h.stalled) continue;
      const elapsed = now - h.startedAt;
      out.push({
        topic: h.topic,
        partition: h.partition,
        offset: h.offset,
        generation: h.generation,
        startedAt: Math.round(wall - elapsed),
        elapsedMs: Math.floor(elapsed),
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
