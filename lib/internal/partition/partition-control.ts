import { setMaxListeners } from 'node:events';
import { Observable } from 'rxjs';
import type { MonoTypeOperatorFunction, ObservableInput, OperatorFunction } from 'rxjs';
import { AlreadySubscribedError } from '../../errors';
import { dropOnEndMerge } from './drop-on-end-merge';
import type { KafkaMessage, PartitionStream } from '../../types';
import { OffsetLedger } from './offset-ledger';
import { heldBytes } from './held-bytes';

/**
 * The states of one partition assignment:
 * - `active`: messages flow to the pipeline;
 * - `ending`: revoked or closing: no new messages, the pipeline drains what it started;
 * - `fenced`: lost, or the drain deadline passed: late acks no longer count;
 * - `released`: unassigned; nothing more happens.
 */
export type PartitionState = 'active' | 'ending' | 'fenced' | 'released';

/** The one consumer of a partition's messages: `messages$`'s subscriber, or an attached sink. */
export interface PartitionSink {
  next(message: KafkaMessage): void;
  complete(): void;
}

/**
 * The control object of one partition of one assignment (one generation): its stream, its
 * ledger, its abort signal, its backpressure counters and its drain. Owned by the consumer engine.
 * @internal
 */
export class PartitionControl implements PartitionStream {
  readonly ledger: OffsetLedger;
  readonly messages$: Observable<KafkaMessage>;
  private readonly controller = new AbortController();
  private readonly endController = new AbortController();
  private readonly haltController = new AbortController();
  private haltedAt_: number | undefined;
  private state_: PartitionState = 'active';
  private subscriber: PartitionSink | undefined;
  private subscribed = false;
  private pendingBeforeSubscribe: KafkaMessage[] = [];
  private pipelineFinalized = false;
  private drainedResolve!: () => void;
  /** Resolves once the partition's pipeline is drained after `end()`. */
  readonly drained: Promise<void>;
  private bufferedBytes_ = 0;
  private running_ = 0;
  private tracksRunning = false;
  private lastCommitted_: number | undefined;
  private paused_ = false;
  /** Offsets a previous owner already finished (completed-offset memory): skipped, not redone. */
  private skip: Set<number> | undefined;
  private endingClaimed = false;
  /** Handlers were in flight when it was fenced (their work may be done, its acks are ignored). */
  private abandonedWork = false;

  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly generation: number,
    readonly key: string,
    private readonly onChange: (control: PartitionControl) => void,
  ) {
    this.ledger = new OffsetLedger();
    // Every waiting task (limiter slot, merge buffer, retry backoff) listens on these signals.
    setMaxListeners(
      0,
      this.controller.signal,
      this.endController.signal,
      this.haltController.signal,
    );
    this.drained = new Promise<void>((resolve) => (this.drainedResolve = resolve));
    this.messages$ = new Observable<KafkaMessage>((subscriber) => {
      if (this.subscribed) {
        subscriber.error(
          new AlreadySubscribedError(
            `messages$ of ${this.topic}[${this.partition}] accepts a single subscriber (share it, e.g. with share(), to feed several)`,
          ),
        );
        return undefined;
      }
      return this.attach(subscriber);
    });
  }

  /** Bytes of delivered, unfinished messages ({@link heldBytes} each). */
  get bufferedBytes(): number {
    return this.bufferedBytes_;
  }

  /** Handlers running now, when the pipeline reports them (`process()` does). */
  get running(): number {
    return this.running_;
  }

  /** The last offset the broker confirmed for this assignment (written by the committer). */
  get lastCommitted(): number | undefined {
    return this.lastCommitted_;
  }

  /**
   * Claims this stream's ending event (`revoked` or `lost`): true once, for whichever path releases
   * it first (the revoke protocol, a close, a rebalance error), so that no partition ends twice.
   */
  claimEnding(): boolean {
    if (this.endingClaimed) return false;
    this.endingClaimed = true;
    return true;
  }

  /**
   * Whether releasing it now, without a final commit, leaves work the next owner redoes: a handler
   * in flight, or anything finished that the last confirmed commit does not cover.
   */
  get workSinceCommit(): boolean {
    if (!this.ledger.hasDeliveries) return false;
    return (
      this.inFlight > 0 ||
      this.abandonedWork ||
      this.ledger.committable() !== this.lastCommitted_ ||
      this.ledger.completedAbove(1).length > 0
    );
  }

  /** Paused by the library for backpressure (written by flow control). */
  get paused(): boolean {
    return this.paused_;
  }

  /**
   * Where this stream starts: the offset chosen before its first message (the `onAssign` hook, a
   * `latest` start, a seek) and the offsets above it a previous owner already finished.
   */
  startAt(offset: number | undefined, completed?: readonly number[]): void {
    if (offset !== undefined) this.ledger.setStart(offset);
    if (completed !== undefined && completed.length > 0) this.skip = new Set(completed);
  }

  /**
   * Set on a stream a seek started: the completed-offset memory stored for its partition (written
   * before the seek) no longer holds, so the stream's first memory write replaces it even when
   * empty.
   */
  replacesMemory = false;

  /** Whether a previous owner finished this offset (then it is counted done, not redone). */
  finishedBefore(offset: number): boolean {
    return this.skip !== undefined && this.skip.has(offset);
  }

  /** The broker confirmed a commit of `offset` for this assignment (only the committer calls it). */
  confirmCommitted(offset: number): void {
    if (this.lastCommitted_ === undefined || offset > this.lastCommitted_) {
      this.lastCommitted_ = offset;
    }
  }

  /** Flow control paused or resumed the partition for backpressure (only it calls this). */
  markPaused(paused: boolean): void {
    this.paused_ = paused;
  }

  /** A handler of this partition started (`process()` reports them). */
  handlerStarted(): void {
    this.running_ += 1;
  }

  /** A handler of this partition ended. */
  handlerEnded(): void {
    this.running_ -= 1;
  }

  /**
   * Makes `sink` the partition's one consumer, as subscribing to `messages$` does, without an
   * Observable in between (the `process()` pipeline). Returns its detach.
   */
  attach(sink: PartitionSink): () => void {
    if (this.subscribed) {
      throw new AlreadySubscribedError(
        `messages$ of ${this.topic}[${this.partition}] accepts a single subscriber`,
      );
    }
    this.subscribed = true;
    this.subscriber = sink;
    const pending = this.pendingBeforeSubscribe;
    this.pendingBeforeSubscribe = [];
    for (const m of pending) sink.next(m);
    if (this.state_ !== 'active') sink.complete();
    return () => {
      if (this.subscriber === sink) this.subscriber = undefined;
    };
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Aborted when the partition stops delivering (revoke, close, loss). */
  get ended(): AbortSignal {
    return this.endController.signal;
  }

  /**
   * Aborted when one of the partition's messages failed for good under `onFailure: 'stop'`
   * ({@link halt}): nothing at or after it that waits starts any more.
   */
  get halted(): AbortSignal {
    return this.haltController.signal;
  }

  /** The lowest offset of a message that halted the partition, if one did. */
  get haltedAt(): number | undefined {
    return this.haltedAt_;
  }

  /**
   * A message failed for good under `onFailure: 'stop'`: nothing waiting at or after its offset
   * starts (under ordering 'key', a later message of its key would otherwise run after it failed);
   * earlier ones of other keys still run, so the commit reaches the failed offset.
   */
  halt(offset: number): void {
    // A later failure at a lower offset (under 'key' or 'none', units finish out of order) moves
    // the halt down: what waits at or after it is dropped too.
    if (this.haltedAt_ !== undefined && offset >= this.haltedAt_) return;
    this.haltedAt_ = offset;
    if (!this.haltController.signal.aborted) this.haltController.abort();
  }

  get state(): PartitionState {
    return this.state_;
  }

  get active(): boolean {
    return this.state_ === 'active';
  }

  /** Handlers in flight: reported by the pipeline, or delivered-but-unacked messages. */
  get inFlight(): number {
    return this.tracksRunning ? this.running_ : this.ledger.unfinished;
  }

  /** Hands a message to the pipeline. Returns false (message dropped) unless the partition is active. */
  push(message: KafkaMessage): boolean {
    if (this.state_ !== 'active') return false;
    this.ledger.deliver(message.offset);
    this.bufferedBytes_ += heldBytes(message);
    if (this.subscriber) this.subscriber.next(message);
    else this.pendingBeforeSubscribe.push(message);
    return true;
  }

  /**
   * Counts a message a previous owner already finished as done without handing it to the
   * pipeline. Returns false unless the partition is active.
   */
  skipCompleted(offset: number): boolean {
    if (this.state_ !== 'active') return false;
    this.skip?.delete(offset);
    if (this.skip?.size === 0) this.skip = undefined;
    this.ledger.deliver(offset);
    this.ledger.complete(offset);
    this.onChange(this);
    return true;
  }

  ack(message: KafkaMessage): void {
    // Every message carries its stream's signal: one of another stream (a wrong `acknowledge()`,
    // also one of the stream a seek replaced, which has the same generation) must not count here.
    if (
      message.signal !== this.signal ||
      message.partition !== this.partition ||
      message.topic !== this.topic
    ) {
      return;
    }
    if (this.state_ === 'fenced' || this.state_ === 'released') return;
    if (!this.ledger.complete(message.offset)) return;
    this.bufferedBytes_ -= heldBytes(message);
    this.checkDrained();
    this.onChange(this);
  }

  acknowledge<T extends KafkaMessage>(): MonoTypeOperatorFunction<T> {
    return (source) =>
      new Observable<T>((subscriber) => {
        const sub = source.subscribe({
          next: (m) => {
            this.ack(m);
            subscriber.next(m);
          },
          error: (e: unknown) => subscriber.error(e),
          complete: () => subscriber.complete(),
        });
        return () => {
          sub.unsubscribe();
          this.pipelineDone();
        };
      });
  }

  run<T, R>(project: (value: T) => ObservableInput<R>, concurrency = 1): OperatorFunction<T, R> {
    return dropOnEndMerge(project, concurrency, this.ended);
  }

  /** Used by `process()`: the pipeline reports running handlers itself. */
  trackRunning(): void {
    this.tracksRunning = true;
  }

  /** The pipeline consuming this partition finished (completed, failed or unsubscribed). */
  pipelineDone(): void {
    if (this.pipelineFinalized) return;
    this.pipelineFinalized = true;
    this.checkDrained();
    this.onChange(this);
  }

  /**
   * Stops delivery (revoke or close): buffered messages not yet handed over are dropped, the stream
   * completes, and the drain begins.
   */
  end(): void {
    if (this.state_ !== 'active') return;
    this.state_ = 'ending';
    this.pendingBeforeSubscribe = [];
    this.endController.abort();
    this.subscriber?.complete();
    if (!this.subscribed) this.pipelineFinalized = true;
    this.checkDrained();
  }

  /** The partition is lost or its deadline passed: abort its signal and ignore later acks. */
  fence(reason: string): void {
    if (this.state_ === 'released') return;
    if (this.inFlight > 0) this.abandonedWork = true;
    this.end();
    this.state_ = 'fenced';
    if (!this.controller.signal.aborted) this.controller.abort(new Error(reason));
    this.drainedResolve();
  }

  /** The partition was unassigned. */
  release(): void {
    this.end();
    this.state_ = 'released';
    this.drainedResolve();
  }

  /** A snapshot for logs: why the partition is (not) drained. */
  describe(): Record<string, unknown> {
    return {
      topic: this.topic,
      partition: this.partition,
      generation: this.generation,
      state: this.state_,
      running: this.running_,
      unfinished: this.ledger.unfinished,
      committable: this.ledger.committable(),
      pipelineFinalized: this.pipelineFinalized,
      subscribed: this.subscribed,
    };
  }

  get isDrained(): boolean {
    return this.state_ !== 'active' && (this.pipelineFinalized || this.ledger.idle);
  }

  private checkDrained(): void {
    if (this.isDrained) this.drainedResolve();
  }
}
