/**
 * The scheduler of one partition's units (messages, or batches) under `process()`: a counter and a
 * queue, no Observable per unit. It starts units in order, at most `concurrency` at once, each with
 * a slot of the shared {@link FairLimiter} (`partitions$`'s `run()` uses it too, through
 * `dropOnEndMerge`, with no shared limit). When the partition ends:
 * - FIFO (ordering 'partition' and 'none', batches): when `ended` aborts, units not started are
 *   dropped (a revoked partition does not start buffered work); started ones finish;
 * - keyed (ordering 'key'): units of one key run one at a time in arrival order, different keys
 *   concurrently, ready keys in the order they became ready. When `ended` aborts, units after the
 *   last one started are dropped but earlier ones still run (a later offset of another key may be
 *   done: leaving an earlier one undone would hold the committed offset below finished work, and
 *   the next owner would redo it); when `stop` aborts (lost, drain deadline), every unit waiting
 *   is dropped;
 * - a stop at a failed unit (`halt`, onFailure 'stop'): units waiting at or after it are dropped
 *   (all of them, FIFO), and later pushes are ignored.
 *
 * A unit that finishes synchronously costs two counter updates and a queue step; the loop, not
 * recursion, starts the next one, so a long run of synchronous units never grows the stack.
 */
import type { FairLimiter, LimiterWaiter } from './fair-limiter';
import { FifoQueue, KeyedQueue } from './unit-queues';
import type { KeyOrdering, UnitQueue } from './unit-queues';

export type { KeyOrdering };

/** A unit that did not finish synchronously. */
export interface RunningUnit {
  /** The runner was torn down: stop the unit and forget its result (never call `finish`). */
  cancel(): void;
}

/** Runs units for a {@link PartitionRunner}. */
export interface UnitExecutor<U> {
  /**
   * Runs `unit`; a limiter slot is held for it. Returns undefined when the unit finished
   * synchronously, else a handle: the executor then calls `runner.finish(handle, unit)` once, when
   * it finishes, unless the runner cancelled it first.
   */
  start(unit: U): RunningUnit | undefined;
}

/**
 * A stop at a failed unit (`onFailure: 'stop'`): once `halted` aborts, nothing waiting at or after
 * `haltedAt` starts, and nothing pushed after it is queued.
 */
export interface HaltSource {
  readonly halted: AbortSignal;
  readonly haltedAt: number | undefined;
}

export class PartitionRunner<U> implements LimiterWaiter {
  private readonly queue: UnitQueue<U>;
  /** Units started and not finished; each holds a limiter slot. */
  private active = 0;
  /** Places this runner holds in the limiter's queue and still wants. */
  private requested = 0;
  /** Places in the limiter's queue given up (the partition ended, the runner closed). */
  private stale = 0;
  private readonly inFlight = new Set<RunningUnit>();
  private draining = false;
  private closed = false;
  private completed = false;
  private sourceDone = false;
  private endedFlag: boolean;
  private stopFlag: boolean;
  private cutDone = false;
  /** The position the queue was last cut at for a halt (a lower halt cuts again). */
  private haltCutAt = Number.POSITIVE_INFINITY;
  /** The highest position started so far (keyed ordering). */
  private lastStarted = Number.NEGATIVE_INFINITY;
  private readonly onEnded = (): void => {
    this.endedFlag = true;
    this.drain();
  };
  private readonly onStop = (): void => {
    this.stopFlag = true;
    this.drain();
  };
  /** A halt's first notice (its position is read from `halt.haltedAt`, which may move down). */
  private readonly onHalt = (): void => this.drain();

  /**
   * @param onComplete called once, when the source completed (or `ended` aborted) and every
   * started unit finished (and, keyed, every unit kept after the end).
   */
  constructor(
    private readonly executor: UnitExecutor<U>,
    private readonly limiter: FairLimiter,
    private readonly concurrency: number,
    private readonly ended: AbortSignal,
    private readonly stop: AbortSignal,
    private readonly onComplete: () => void,
    private readonly keyed?: KeyOrdering<U>,
    private readonly halt?: HaltSource,
  ) {
    this.queue = keyed === undefined ? new FifoQueue<U>() : new KeyedQueue<U>(keyed);
    this.endedFlag = ended.aborted;
    this.stopFlag = stop.aborted;
    ended.addEventListener('abort', this.onEnded, { once: true });
    stop.addEventListener('abort', this.onStop, { once: true });
    halt?.halted.addEventListener('abort', this.onHalt, { once: true });
  }

  /** Whether a stop at a failed unit keeps `unit` from being queued or started. */
  private haltedOut(unit: U): boolean {
    const at = this.halt?.haltedAt;
    if (at === undefined) return false;
    // FIFO units start in position order: every one not started yet comes after the failed one.
    return this.keyed === undefined || this.keyed.positionOf(unit) >= at;
  }

  /** Units running now. */
  get running(): number {
    return this.active;
  }

  /** Units waiting to start. */
  get waiting(): number {
    return this.queue.waiting;
  }

  /** A unit from the source (ignored once the partition ended or the runner closed). */
  push(unit: U): void {
    if (this.endedFlag || this.closed || this.haltedOut(unit)) return;
    this.queue.push(unit);
    this.drain();
  }

  /** The source completed: complete once every started unit finished. */
  sourceComplete(): void {
    this.sourceDone = true;
    this.checkComplete();
  }

  /** As a sink of its partition ({@link PartitionControl.attach}): `push`. */
  next(unit: U): void {
    this.push(unit);
  }

  /** As a sink of its partition: `sourceComplete`. */
  complete(): void {
    this.sourceComplete();
  }

  /** A unit the executor returned a handle for finished. */
  finish(handle: RunningUnit, unit: U): void {
    if (this.closed || !this.inFlight.delete(handle)) return;
    this.finished(unit);
    this.drain();
  }

  /** The limiter handed this runner a slot. */
  granted(): void {
    if (!this.closed && this.requested > 0) {
      this.applyEnd();
      if (this.requested > 0 && this.queue.ready > 0) {
        this.requested -= 1;
        this.startNext();
        if (!this.draining) this.drain();
        return;
      }
    }
    if (this.stale > 0) this.stale -= 1;
    else if (this.requested > 0) this.requested -= 1;
    this.limiter.release();
  }

  /**
   * Tears down: cancels running units (their results no longer count), gives their slots and the
   * places waiting back, drops what waits. Never calls `onComplete`.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.ended.removeEventListener('abort', this.onEnded);
    this.stop.removeEventListener('abort', this.onStop);
    this.halt?.halted.removeEventListener('abort', this.onHalt);
    this.stale += this.requested;
    this.requested = 0;
    this.queue.cut(Number.NEGATIVE_INFINITY);
    const running = [...this.inFlight];
    this.inFlight.clear();
    for (const unit of running) unit.cancel();
    const slots = this.active;
    this.active = 0;
    for (let i = 0; i < slots; i++) this.limiter.release();
  }

  private drain(): void {
    if (this.draining) return; // the loop below picks up what a nested change allowed
    this.draining = true;
    try {
      for (;;) {
        if (this.closed) return;
        this.applyEnd();
        if (this.active + this.requested >= this.concurrency) break;
        if (this.queue.ready <= this.requested) break;
        if (this.limiter.tryAcquire()) {
          this.startNext();
        } else {
          this.requested += 1;
          this.limiter.enqueue(this);
        }
      }
    } finally {
      this.draining = false;
    }
    this.checkComplete();
  }

  /** Applies an end or a stop to what waits; places no longer needed become stale. */
  private applyEnd(): void {
    if (this.stopFlag) {
      if (this.queue.waiting > 0) this.queue.cut(Number.NEGATIVE_INFINITY);
    } else {
      const haltAt = this.halt?.haltedAt ?? Number.POSITIVE_INFINITY;
      if (haltAt < this.haltCutAt) {
        this.haltCutAt = haltAt;
        // Keyed: units of other keys before the failed one still run (the commit reaches it).
        this.queue.cut(haltAt);
      }
      if (this.endedFlag && !this.cutDone) {
        this.cutDone = true;
        this.queue.cut(this.keyed === undefined ? Number.NEGATIVE_INFINITY : this.lastStarted);
      }
    }
    const ready = this.queue.ready;
    if (this.requested > ready) {
      this.stale += this.requested - ready;
      this.requested = ready;
    }
  }

  /** Starts the next unit; a slot is held for it. */
  private startNext(): void {
    const unit = this.queue.take();
    this.active += 1;
    if (this.keyed !== undefined) {
      const position = this.keyed.positionOf(unit);
      if (position > this.lastStarted) this.lastStarted = position;
    }
    const handle = this.executor.start(unit);
    if (this.closed) {
      // The unit errored the pipeline (or a subscriber tore it down): close() released its slot.
      handle?.cancel();
      return;
    }
    if (handle === undefined) this.finished(unit);
    else this.inFlight.add(handle);
  }

  private finished(unit: U): void {
    this.active -= 1;
    this.queue.finished(unit);
    this.limiter.release();
  }

  private checkComplete(): void {
    if (this.completed || this.closed) return;
    if ((this.sourceDone || this.endedFlag) && this.active === 0 && this.queue.waiting === 0) {
      this.completed = true;
      this.onComplete();
    }
  }
}
