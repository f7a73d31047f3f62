/**
 * `process()`'s per-message path: decode → run the handler (retried with backoff) → ack, or apply
 * the failure policy (stop, skip, dead-letter). Offsets only count as done through `ack`, so a
 * message that is neither processed, skipped nor confirmed in the dead-letter topic is never
 * committed.
 */
import {
  EMPTY,
  Observable,
  catchError,
  concat,
  defer,
  isObservable,
  map,
  mergeMap,
  retry,
  tap,
  throwError,
} from 'rxjs';
import type { Subscriber, Subscription } from 'rxjs';
import type { Logger } from 'pino';
import { HandlerError } from '../../errors';
import type { DeserializationError } from '../../errors';
import type { ResolvedProcessOptions } from '../../process-options';
import type { DecodedMessage, KafkaMessage, MessageHandler, Processed } from '../../types';
import { BatchSink } from './batch-sink';
import type { DeadLetterWriter } from './dead-letter';
import { coordinatesOf, decodeMessage, describe, isPromiseLike } from './decoding';
import type { FairLimiter } from '../partition/fair-limiter';
import { FailurePolicy } from './failure-policy';
import type { ProcessorHost } from './failure-policy';
import type { ProcessingMode } from './processing-mode';
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
    private readonly host: ProcessorHost,
    private readonly logger: Logger,
    private readonly deadLetter: DeadLetterWriter | undefined,
    random: () => number = Math.random,
  ) {
    this.failures = new FailurePolicy(options, host, logger, deadLetter, random, {
      settle: (partition, messages, result) => this.settle(partition, messages, result),
      output: (messages, status, attempts, result, error) =>
        mode.output(messages, status, attempts, result, error),
    });
  }

  private readonly failures: FailurePolicy<R, O>;

  /** Counts finished messages as done: the mode's rule, or an ack in the ledger. */
  private settle(
    partition: PartitionControl,
    messages: KafkaMessage[],
    result: R | undefined,
  ): void {
    if (this.mode.settle) this.mode.settle(partition, messages, result);
    else for (const m of messages) partition.ack(m);
  }

  /** {@link settle} for one message, without an array unless the mode has its own rule. */
  private settleOne(partition: PartitionControl, m: KafkaMessage, result: R | undefined): void {
    if (this.mode.settle) this.mode.settle(partition, [m], result);
    else partition.ack(m);
  }

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
                this.handle(partition, messages),
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
        const unit$ = this.handle(partition, [m], [attempt]);
        return this.subscribeUnit(partition, subscriber, unit$, runner, m);
      }
      decoded = attempt;
    } catch (err) {
      // A payload that cannot be decoded fails the same way every time: never retried.
      return this.subscribeUnit(
        partition,
        subscriber,
        this.failures.fail(partition, [m], err as DeserializationError, 0),
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
      this.settleOne(partition, m, result as R | undefined);
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
        this.settleOne(partition, m, value as R | undefined);
        subscriber.next(one.output(m, 'processed', 1, value as R | undefined));
        unit.settle();
        runner.finish(unit, m);
      },
      (err: unknown) => {
        if (unit.cancelled) return;
        unit.sub = this.retrying(
          partition,
          [m],
          [decoded],
          throwError(() => err),
        ).subscribe({
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
    const unit$ = this.retrying(partition, [m], [decoded], firstAttempt);
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

  /** One unit: decode, run with retries, ack — or apply the failure policy. */
  private handle(
    partition: PartitionControl,
    messages: KafkaMessage[],
    decoding?: (DecodedMessage<K, V> | Promise<DecodedMessage<K, V>>)[],
  ): Observable<O> {
    const attempts =
      decoding ??
      messages.map((m) => {
        try {
          return decodeMessage<K, V>(m, this.options);
        } catch (err) {
          return err as DeserializationError;
        }
      });
    if (!attempts.some(isPromiseLike)) {
      return this.runDecoded(partition, messages, attempts as (DecodedMessage<K, V> | Error)[]);
    }
    // Async deserializers: every message's decoding settles first, in the unit's order.
    return defer(() =>
      Promise.all(
        attempts.map((a) =>
          isPromiseLike(a) ? Promise.resolve(a).catch((err: unknown) => err as Error) : a,
        ),
      ),
    ).pipe(mergeMap((settled) => this.runDecoded(partition, messages, settled)));
  }

  /** Runs a unit whose messages are decoded (an Error where decoding failed). */
  private runDecoded(
    partition: PartitionControl,
    messages: KafkaMessage[],
    attempts: (DecodedMessage<K, V> | Error)[],
  ): Observable<O> {
    const good: KafkaMessage[] = [];
    const decoded: DecodedMessage<K, V>[] = [];
    const undecodable: Observable<O>[] = [];
    for (const [i, m] of messages.entries()) {
      const attempt = attempts[i];
      if (!(attempt instanceof Error) && attempt !== undefined) {
        decoded.push(attempt);
        good.push(m);
      } else {
        // A payload that cannot be decoded fails the same way every time: never retried.
        const error = attempt as DeserializationError;
        if (this.options.onFailure === 'stop') {
          // Stop at it, after the messages before it (a batch's): they are committed, it is not.
          // The stop is decided once they ran (it closes the consumer); if they stopped it
          // themselves, theirs is the failure reported.
          if (good.length === 0) return this.failures.fail(partition, [m], error, 0);
          let before = false;
          return concat(
            this.runUnit(partition, good, decoded).pipe(tap(() => (before = true))),
            defer(() => (before ? this.failures.fail(partition, [m], error, 0) : EMPTY)),
          );
        }
        undecodable.push(this.failures.fail(partition, [m], error, 0));
      }
    }
    if (good.length === 0) return concat(...undecodable);
    const run$ = this.runUnit(partition, good, decoded);
    return undecodable.length === 0 ? run$ : concat(...undecodable, run$);
  }

  /**
   * Runs the handler once for a unit (a message, or a batch's decoded messages). The first attempt
   * runs without operators: a Promise or a plain value that succeeds (the common case) is acked
   * and emitted directly; a failure or an Observable handler continues through the retry
   * pipeline, which never calls the handler again for this attempt.
   */
  private runUnit(
    partition: PartitionControl,
    good: KafkaMessage[],
    decoded: DecodedMessage<K, V>[],
  ): Observable<O> {
    return new Observable<O>((subscriber) => {
      let result: ReturnType<MessageHandler<R>>;
      try {
        result = this.mode.call(decoded, good);
      } catch (err) {
        return this.retrying(
          partition,
          good,
          decoded,
          throwError(() => err),
        ).subscribe(subscriber);
      }
      if (isObservable(result)) {
        const observable = result;
        return this.retrying(
          partition,
          good,
          decoded,
          invoke(() => observable),
        ).subscribe(subscriber);
      }
      if (isPromiseLike(result)) {
        let inner: Subscription | undefined;
        result.then(
          (value) => {
            if (subscriber.closed) return;
            this.settle(partition, good, value as R | undefined);
            subscriber.next(this.mode.output(good, 'processed', 1, value as R | undefined));
            subscriber.complete();
          },
          (err: unknown) => {
            if (subscriber.closed) return;
            inner = this.retrying(
              partition,
              good,
              decoded,
              throwError(() => err),
            ).subscribe(subscriber);
          },
        );
        return () => inner?.unsubscribe();
      }
      this.settle(partition, good, result as R | undefined);
      subscriber.next(this.mode.output(good, 'processed', 1, result as R | undefined));
      subscriber.complete();
      return undefined;
    });
  }

  /**
   * Retries (rxjs `retry`) of a unit whose first attempt was made (`firstAttempt` replays its
   * outcome), then acks it — or applies the failure policy.
   */
  private retrying(
    partition: PartitionControl,
    good: KafkaMessage[],
    decoded: DecodedMessage<K, V>[],
    firstAttempt: Observable<unknown>,
  ): Observable<O> {
    const first = good[0] as KafkaMessage;
    let attempts = 1;
    let abandoned = false;
    let pendingFirst: Observable<unknown> | undefined = firstAttempt;
    return defer(() => {
      if (pendingFirst !== undefined) {
        const f = pendingFirst;
        pendingFirst = undefined;
        return f;
      }
      attempts += 1;
      return invoke(() => this.mode.call(decoded, good));
    }).pipe(
      retry({
        count: this.options.retry.count,
        delay: (err: unknown, retryCount: number) =>
          this.failures.retryDelay(first, err, retryCount, () => (abandoned = true)),
      }),
      map((result: unknown): O => {
        this.settle(partition, good, result as R | undefined);
        return this.mode.output(good, 'processed', attempts, result as R | undefined);
      }),
      catchError((err: unknown) => {
        if (abandoned) {
          this.logger.info(
            { ...coordinatesOf(first), messages: good.length, attempts, err },
            'retry abandoned: the partition was lost, its drain deadline passed or a seek replaced it; the message stays uncommitted and its next owner runs it',
          );
          return EMPTY;
        }
        const what =
          good.length === 1
            ? `${first.topic}[${first.partition}]@${first.offset}`
            : `the batch ${first.topic}[${first.partition}]@${first.offset}..${(good[good.length - 1] as KafkaMessage).offset}`;
        const error = new HandlerError(
          `Handler failed on ${what} after ${attempts} attempt(s): ${describe(err)}`,
          coordinatesOf(first),
          { cause: err, attempts },
        );
        return this.failures.fail(partition, good, error, attempts);
      }),
    );
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

/** Runs a handler call and emits its result once when it succeeds (last value for an Observable). */
function invoke<R>(call: () => ReturnType<MessageHandler<R>>): Observable<R | undefined> {
  return new Observable<R | undefined>((subscriber) => {
    let result: ReturnType<MessageHandler<R>>;
    try {
      result = call();
    } catch (err) {
      subscriber.error(err);
      return undefined;
    }
    if (isObservable(result)) {
      let last: R | undefined;
      return result.subscribe({
        next: (v) => (last = v),
        error: (e: unknown) => subscriber.error(e),
        complete: () => {
          subscriber.next(last);
          subscriber.complete();
        },
      });
    }
    if (isPromiseLike(result)) {
      result.then(
        (v) => {
          subscriber.next(v);
          subscriber.complete();
        },
        (e: unknown) => subscriber.error(e),
      );
      return undefined;
    }
    subscriber.next(result as R);
    subscriber.complete();
    return undefined;
  });
}
