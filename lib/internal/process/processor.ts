/**
 * `process()`'s per-message path: decode → run the handler (retried with backoff) → ack, or apply
 * the failure policy (stop, skip, dead-letter). Offsets only count as done through `ack`, so a
 * message that is neither processed, skipped nor confirmed in the dead-letter topic is never
 * committed.
 *
 * This file schedules the units of each partition (its runner and batch sink, units counted while
 * they run) and runs a single message's first attempt without any Observable (the fast path);
 * unit-handling.ts is the path every other unit, and every retry, takes.
 */
import { Observable, isObservable, throwError } from 'rxjs';
import type { Subscriber, Subscription } from 'rxjs';
import type { Logger } from '../../logger';
import type { DeserializationError } from '../../errors';
import type { ResolvedProcessOptions } from '../../process-options';
import type { DecodedMessage, KafkaMessage, MessageHandler, Processed } from '../../types';
import { BatchSink } from './batch-sink';
import type { DeadLetterWriter } from './dead-letter';
import { decodeMessage, isPromiseLike } from './decoding';
import type { FairLimiter } from '../partition/fair-limiter';
import type { ProcessorHost } from './failure-policy';
import type { ProcessingMode } from './processing-mode';
import { UnitHandling, invoke } from './unit-handling';
import { PartitionRunner } from '../partition/partition-runner';
import type { KeyOrdering, RunningUnit } from '../partition/partition-runner';
import type { PartitionControl } from '../partition/partition-control';

export type { FailureCounters, ProcessorHost } from './failure-policy';

/** Messages without a key are ordered among themselves, as one key. */
const NO_KEY = Symbol('no key');
/** The ordering key of a message: its key bytes (binary-safe), or {@link NO_KEY}. */
const orderingKey = (m: KafkaMessage): unknown =>
  m.key === null ? NO_KEY : m.key.toString('latin1');

export class MessageProcessor<R, K, V, O = Processed<R>> {
  constructor(
    private readonly mode: ProcessingMode<R, K, V, O>,
    private readonly options: ResolvedProcessOptions,
    host: ProcessorHost,
    logger: Logger,
    deadLetter: DeadLetterWriter | undefined,
    random: () => number = Math.random,
  ) {
    this.units = new UnitHandling(mode, options, host, logger, deadLetter, random);
  }

  /** Decode → handler with retries → settle or the failure policy, for every unit. */
  private readonly units: UnitHandling<R, K, V, O>;

  /**
   * The pipeline of one partition: bounded by the shared limiter and `partitionConcurrency`.
   * Messages (or batches) still waiting when the partition is revoked are dropped, never run
   * (under ordering 'key', those before the last one started still run: see PartitionRunner).
   */
  runPartition(partition: PartitionControl, limiter: FairLimiter): Observable<O> {
    partition.trackRunning();
    const batch = this.mode.batch;
    const one = batch === undefined ? this.mode.one : undefined;
    const keyed = batch === undefined && this.options.ordering === 'key';
    return new Observable<O>((subscriber) => {
      let runner: PartitionRunner<KafkaMessage> | PartitionRunner<KafkaMessage[]>;
      let detach: () => void;
      const complete = (): void => subscriber.complete();
      if (batch !== undefined || one === undefined) {
        const r: PartitionRunner<KafkaMessage[]> = new PartitionRunner<KafkaMessage[]>(
          {
            start: (messages) =>
              this.subscribeUnit(
                partition,
                subscriber,
                this.units.handle(partition, messages),
                r,
                messages,
              ),
          },
          limiter,
          this.options.partitionConcurrency,
          partition.ended,
          partition.signal,
          complete,
          undefined,
          partition,
        );
        runner = r;
        const sink = new BatchSink(r, batch?.maxSize ?? 1, batch?.maxWaitMs ?? 0);
        let detachSink: () => void;
        try {
          detachSink = partition.attach(sink);
        } catch (err) {
          r.close();
          subscriber.error(err);
          return undefined;
        }
        detach = () => {
          sink.dispose();
          detachSink();
        };
      } else {
        const r: PartitionRunner<KafkaMessage> = new PartitionRunner<KafkaMessage>(
          { start: (m) => this.startOne(partition, subscriber, one, m, r) },
          limiter,
          this.options.partitionConcurrency,
          partition.ended,
          partition.signal,
          complete,
          keyed ? KEY_ORDERING : undefined,
          partition,
        );
        runner = r;
        try {
          detach = partition.attach(r);
        } catch (err) {
          r.close();
          subscriber.error(err);
          return undefined;
        }
      }
      return () => {
        runner.close();
        detach();
        partition.pipelineDone();
      };
    });
  }

  /**
   * One message on the fast path: a handler that returns a plain value, or a Promise that
   * resolves, is acked and emitted without any Observable; a failure (or an Observable handler)
   * continues through the retry pipeline, which never calls the handler again for this attempt.
   */
  private startOne(
    partition: PartitionControl,
    subscriber: Subscriber<O>,
    one: NonNullable<ProcessingMode<R, K, V, O>['one']>,
    m: KafkaMessage,
    runner: PartitionRunner<KafkaMessage>,
  ): RunningUnit | undefined {
    let decoded: DecodedMessage<K, V>;
    try {
      const attempt = decodeMessage<K, V>(m, this.options);
      if (isPromiseLike(attempt)) {
        // An async deserializer: the unit waits for it (its failure is a DeserializationError,
        // never retried), then runs as any other.
        const unit$ = this.units.handle(partition, [m], [attempt]);
        return this.subscribeUnit(partition, subscriber, unit$, runner, m);
      }
      decoded = attempt;
    } catch (err) {
      // A payload that cannot be decoded fails the same way every time: never retried.
      return this.subscribeUnit(
        partition,
        subscriber,
        this.units.failures.fail(partition, [m], err as DeserializationError, 0),
        runner,
        m,
      );
    }
    partition.handlerStarted(); // handed to a PendingUnit below unless the handler succeeds at once
    let result: ReturnType<MessageHandler<R>>;
    try {
      result = one.call(decoded, m);
    } catch (err) {
      partition.handlerEnded();
      return this.retryOne(
        partition,
        subscriber,
        runner,
        m,
        decoded,
        throwError(() => err),
      );
    }
    if (isObservable(result)) {
      partition.handlerEnded();
      const observable = result;
      return this.retryOne(
        partition,
        subscriber,
        runner,
        m,
        decoded,
        invoke(() => observable),
      );
    }
    if (!isPromiseLike(result)) {
      this.units.settleOne(partition, m, result as R | undefined);
      subscriber.next(one.output(m, 'processed', 1, result));
      partition.handlerEnded();
      return undefined;
    }
    return this.awaitOne(partition, subscriber, one, m, runner, decoded, result);
  }

  /**
   * The rest of {@link startOne} for a handler that returned a Promise. A method of its own: its
   * closures make V8 allocate a context at every call, which the synchronous path must not pay.
   */
  private awaitOne(
    partition: PartitionControl,
    subscriber: Subscriber<O>,
    one: NonNullable<ProcessingMode<R, K, V, O>['one']>,
    m: KafkaMessage,
    runner: PartitionRunner<KafkaMessage>,
    decoded: DecodedMessage<K, V>,
    result: PromiseLike<unknown>,
  ): RunningUnit {
    const unit = new PendingUnit(partition);
    result.then(
      (value) => {
        if (unit.cancelled) return;
        this.units.settleOne(partition, m, value as R | undefined);
        subscriber.next(one.output(m, 'processed', 1, value as R | undefined));
        unit.settle();
        runner.finish(unit, m);
      },
      (err: unknown) => {
        if (unit.cancelled) return;
        unit.sub = this.units
          .retrying(
            partition,
            [m],
            [decoded],
            throwError(() => err),
          )
          .subscribe({
            next: (o) => subscriber.next(o),
            error: (e: unknown) => {
              unit.settle();
              subscriber.error(e);
            },
            complete: () => {
              unit.settle();
              runner.finish(unit, m);
            },
          });
      },
    );
    return unit;
  }

  /** One message whose first attempt failed or returned an Observable: the retry pipeline. */
  private retryOne(
    partition: PartitionControl,
    subscriber: Subscriber<O>,
    runner: PartitionRunner<KafkaMessage>,
    m: KafkaMessage,
    decoded: DecodedMessage<K, V>,
    firstAttempt: Observable<unknown>,
  ): RunningUnit | undefined {
    const unit$ = this.units.retrying(partition, [m], [decoded], firstAttempt);
    return this.subscribeUnit(partition, subscriber, unit$, runner, m);
  }

  /**
   * Runs a unit's Observable (the retry pipeline, a failure policy, a batch): its values go to the
   * partition's subscriber. Returns undefined when it completed synchronously, else its handle,
   * which the runner is told about (`finish`) when it completes.
   */
  private subscribeUnit<U>(
    partition: PartitionControl,
    subscriber: Subscriber<O>,
    unit$: Observable<O>,
    runner: PartitionRunner<U>,
    value: U,
  ): RunningUnit | undefined {
    partition.handlerStarted();
    const unit = new PendingUnit(partition);
    let sync = true;
    let completedSync = false;
    unit.sub = unit$.subscribe({
      next: (o) => subscriber.next(o),
      error: (e: unknown) => {
        unit.settle();
        subscriber.error(e);
      },
      complete: () => {
        unit.settle();
        if (sync) completedSync = true;
        else runner.finish(unit, value);
      },
    });
    sync = false;
    return completedSync ? undefined : unit;
  }
}

/** A unit in flight: counted in its partition's running handlers until it settles. */
class PendingUnit implements RunningUnit {
  sub: Subscription | undefined = undefined;
  cancelled = false;
  private settled = false;

  constructor(private readonly partition: PartitionControl) {}

  settle(): void {
    if (this.settled) return;
    this.settled = true;
    this.partition.handlerEnded();
  }

  cancel(): void {
    this.cancelled = true;
    this.sub?.unsubscribe();
    this.settle();
  }
}

/** Ordering 'key': per key bytes, in offset order. */
const KEY_ORDERING: KeyOrdering<KafkaMessage> = {
  keyOf: orderingKey,
  positionOf: (m) => m.offset,
};
