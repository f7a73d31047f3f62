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
  filter,
  from,
  isObservable,
  map,
  mergeMap,
  of,
  retry,
  throwError,
} from 'rxjs';
import type { Subscriber, Subscription } from 'rxjs';
import type { Logger } from 'pino';
import { DeadLetterError, DeserializationError, HandlerError } from '../errors';
import type { KafkaCoordinates } from '../errors';
import type { ResolvedProcessOptions } from '../process-options';
import { backoffDelay } from '../process-options';
import type {
  ConsumerEvent,
  DecodedMessage,
  KafkaMessage,
  MessageHandler,
  Processed,
  ProcessedStatus,
} from '../types';
import type { DeadLetterReason, DeadLetterWriter } from './dead-letter';
import type { FairLimiter } from './fair-limiter';
import { PartitionRunner } from './partition-runner';
import type { KeyOrdering, RunningUnit } from './partition-runner';
import type { PartitionControl, PartitionSink } from './partition-control';

/** What the processor needs from the engine. */
export interface ProcessorHost {
  failWith(err: Error): void;
  publish(event: ConsumerEvent): void;
  readonly counters: FailureCounters;
}

/** Failure-policy outcomes, counted since the consumer started. */
export interface FailureCounters {
  retries: number;
  skipped: number;
  deadLettered: number;
  failed: number;
}

const coordinatesOf = (m: KafkaMessage): KafkaCoordinates => ({
  topic: m.topic,
  partition: m.partition,
  offset: m.offset,
});

/** Messages without a key are ordered among themselves, as one key. */
const NO_KEY = Symbol('no key');
/** The ordering key of a message: its key bytes (binary-safe), or {@link NO_KEY}. */
const orderingKey = (m: KafkaMessage): unknown =>
  m.key === null ? NO_KEY : m.key.toString('latin1');

const describe = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** How a processor hands work to the user and reports it: one message at a time, or batches. */
export interface ProcessingMode<R, K, V, O> {
  /** Per-partition batching; absent for one message at a time. */
  readonly batch?: { readonly maxSize: number; readonly maxWaitMs: number };
  /** Calls the user's handler for a unit (one message, or one batch) of decoded messages. */
  call(messages: DecodedMessage<K, V>[], raw: KafkaMessage[]): ReturnType<MessageHandler<R>>;
  /**
   * Counts finished messages as done (`result` undefined for skipped ones). Absent: acked in
   * their partition's ledger at once; `processTransactional()` acks them only once their records
   * are in the open transaction.
   */
  settle?(partition: PartitionControl, messages: KafkaMessage[], result: R | undefined): void;
  /** What the pipeline emits for a finished unit. */
  output(
    messages: KafkaMessage[],
    status: ProcessedStatus,
    attempts: number,
    result: R | undefined,
    error?: unknown,
  ): O;
  /** The same two for one message, without arrays (single-message modes). */
  readonly one?: {
    call(message: DecodedMessage<K, V>, raw: KafkaMessage): ReturnType<MessageHandler<R>>;
    output(
      message: KafkaMessage,
      status: ProcessedStatus,
      attempts: number,
      result: R | undefined,
    ): O;
  };
}

/** The single-message mode of `process()`. */
export function singleMode<R, K, V>(
  handler: MessageHandler<R, K, V>,
): ProcessingMode<R, K, V, Processed<R>> {
  const output = (
    message: KafkaMessage,
    status: ProcessedStatus,
    attempts: number,
    result: R | undefined,
  ): Processed<R> => ({
    topic: message.topic,
    partition: message.partition,
    offset: message.offset,
    generation: message.generation,
    status,
    attempts,
    result,
  });
  return {
    call: (messages) => handler(messages[0] as DecodedMessage<K, V>),
    output: (messages, status, attempts, result, error) => {
      const out = output(messages[0] as KafkaMessage, status, attempts, result);
      return error === undefined ? out : { ...out, error };
    },
    one: { call: (message) => handler(message), output },
  };
}

export class MessageProcessor<R, K, V, O = Processed<R>> {
  constructor(
    private readonly mode: ProcessingMode<R, K, V, O>,
    private readonly options: ResolvedProcessOptions,
    private readonly host: ProcessorHost,
    private readonly logger: Logger,
    private readonly deadLetter: DeadLetterWriter | undefined,
    private readonly random: () => number = Math.random,
  ) {}

  /** Counts finished messages as done: the mode's rule, or an ack in the ledger. */
  private settle(
    partition: PartitionControl,
    messages: KafkaMessage[],
    result: R | undefined,
  ): void {
    if (this.mode.settle) this.mode.settle(partition, messages, result);
    else for (const m of messages) partition.ack(m);
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
      const attempt = this.decode(m);
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
        this.fail(partition, [m], err as DeserializationError, 0),
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
      this.settle(partition, [m], result as R | undefined);
      subscriber.next(one.output(m, 'processed', 1, result));
      partition.handlerEnded();
      return undefined;
    }
    const unit = new PendingUnit(partition);
    result.then(
      (value) => {
        if (unit.cancelled) return;
        this.settle(partition, [m], value as R | undefined);
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
          return this.decode(m);
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
        undecodable.push(this.fail(partition, [m], attempt as DeserializationError, 0));
        if (this.options.onFailure === 'stop') return concat(...undecodable);
      }
    }
    if (good.length === 0) return concat(...undecodable);
    // The first attempt runs without operators: a Promise or a plain value that succeeds (the
    // common case) is acked and emitted directly; a failure or an Observable handler continues
    // through the retry pipeline, which never calls the handler again for this attempt.
    const run$ = new Observable<O>((subscriber) => {
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
    return undecodable.length === 0 ? run$ : concat(...undecodable, run$);
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
          this.retryDelay(first, err, retryCount, () => (abandoned = true)),
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
        return this.fail(partition, good, error, attempts);
      }),
    );
  }

  /**
   * Decodes key and value. Synchronous deserializers give the message at once; an async one (a
   * schema-registry lookup) gives a Promise. Either way a failure is a DeserializationError.
   */
  private decode(message: KafkaMessage): DecodedMessage<K, V> | Promise<DecodedMessage<K, V>> {
    const { key: keyOf, value: valueOf } = this.options;
    if (keyOf === undefined && valueOf === undefined) {
      return message as unknown as DecodedMessage<K, V>;
    }
    const failed = (part: 'key' | 'value', err: unknown): DeserializationError =>
      new DeserializationError(
        `Could not decode the ${part} of ${message.topic}[${message.partition}]@${message.offset}: ${describe(err)}`,
        coordinatesOf(message),
        part,
        { cause: err },
      );
    const run = (part: 'key' | 'value', fn: typeof keyOf, data: Buffer | null): unknown => {
      if (fn === undefined) return data;
      let out: unknown;
      try {
        out = fn(data, message);
      } catch (err) {
        throw failed(part, err);
      }
      return isPromiseLike(out)
        ? Promise.resolve(out).catch((err: unknown) => {
            throw failed(part, err);
          })
        : out;
    };
    const key = run('key', keyOf, message.key);
    const value = run('value', valueOf, message.value);
    if (!isPromiseLike(key) && !isPromiseLike(value)) {
      return { ...message, key: key as K, value: value as V };
    }
    const decoded = Promise.all([key, value]).then(([k, v]) => ({
      ...message,
      key: k as K,
      value: v as V,
    }));
    // Its failure is handled where the unit runs; a unit dropped before it runs (a revoke) must
    // not leave an unhandled rejection behind.
    decoded.catch(() => undefined);
    return decoded;
  }

  /**
   * The wait before retry `n`. A revoke or a close does not cut it short: the message is still
   * this member's work until its partition is released, so it keeps retrying within the drain
   * deadline (abandoning it would make the next owner redo what finished above it). The retry is
   * abandoned only when the message's signal aborts: the partition was lost, its drain deadline
   * passed, or a seek replaced its stream.
   */
  private retryDelay(
    message: KafkaMessage,
    err: unknown,
    n: number,
    abandon: () => void,
  ): Observable<unknown> {
    if (message.signal.aborted) {
      abandon();
      return new Observable((subscriber) => subscriber.error(err));
    }
    const delayMs = backoffDelay(this.options.retry, n, this.random);
    this.host.counters.retries += 1;
    this.logger.warn(
      { ...coordinatesOf(message), attempt: n, retryInMs: delayMs, err },
      'handler failed; retrying',
    );
    this.host.publish({
      type: 'handler-retry',
      ...coordinatesOf(message),
      offset: message.offset,
      attempt: n,
      delayMs,
      error: err,
      at: Date.now(),
    });
    return new Observable((subscriber) => {
      const signal = message.signal;
      const onAbort = (): void => {
        abandon();
        subscriber.error(err);
      };
      const timer = setTimeout(() => {
        subscriber.next(0);
        subscriber.complete();
      }, delayMs);
      signal.addEventListener('abort', onAbort, { once: true });
      return () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      };
    });
  }

  /** Applies the failure policy to messages (one, or a batch) that failed for good. */
  private fail(
    partition: PartitionControl,
    messages: KafkaMessage[],
    error: HandlerError | DeserializationError,
    attempts: number,
  ): Observable<O> {
    const first = messages[0] as KafkaMessage;
    const coordinates = coordinatesOf(first);
    if (first.signal.aborted) {
      // The partition was lost or its deadline passed: this result no longer counts anyway.
      this.logger.warn(
        { err: error, ...coordinates },
        'handler failed after its partition was released',
      );
      return EMPTY;
    }
    const cause = error instanceof HandlerError ? error.cause : error;
    switch (this.options.onFailure) {
      case 'skip': {
        for (const m of messages) {
          this.host.counters.skipped += 1;
          this.logger.error(
            { err: error, ...coordinatesOf(m), attempts, skipped: this.host.counters.skipped },
            'message failed for good and is skipped (onFailure: skip): its offset is committed without it being processed',
          );
          this.host.publish({
            type: 'message-skipped',
            ...coordinatesOf(m),
            offset: m.offset,
            attempts,
            error: cause,
            at: Date.now(),
          });
          this.settle(partition, [m], undefined);
        }
        return of(this.mode.output(messages, 'skipped', attempts, undefined, cause));
      }
      case 'dead-letter': {
        const writer = this.deadLetter;
        if (writer === undefined) throw new Error('dead-letter policy without a writer');
        const reason: DeadLetterReason = {
          error: cause,
          attempts,
          stage: error instanceof DeserializationError ? error.part : 'handler',
        };
        return from(Promise.all(messages.map((m) => writer.send(m, reason)))).pipe(
          filter(() => !first.signal.aborted), // released meanwhile: the next owner redoes it
          map(() => {
            for (const m of messages) {
              this.host.counters.deadLettered += 1;
              this.logger.warn(
                { err: error, ...coordinatesOf(m), attempts, deadLetterTopic: writer.topic },
                'message failed for good and was written to the dead-letter topic',
              );
              this.host.publish({
                type: 'dead-lettered',
                ...coordinatesOf(m),
                offset: m.offset,
                attempts,
                error: cause,
                deadLetterTopic: writer.topic,
                at: Date.now(),
              });
              partition.ack(m);
            }
            return this.mode.output(messages, 'dead-lettered', attempts, undefined, cause);
          }),
          catchError((writeErr: unknown) => {
            if (first.signal.aborted) return EMPTY;
            // Never skip a message that did not reach the dead-letter topic: stop instead.
            const e = new DeadLetterError(
              `Could not write ${first.topic}[${first.partition}]@${first.offset} to the dead-letter topic ${writer.topic}: ${describe(writeErr)}; stopping so that it is not lost`,
              coordinates,
              writer.topic,
              error,
              { cause: writeErr, retriable: true },
            );
            this.stop(first, e, attempts);
            return EMPTY;
          }),
        );
      }
      default:
        this.stop(first, error, attempts);
        return EMPTY;
    }
  }

  private stop(message: KafkaMessage, error: Error, attempts: number): void {
    this.host.counters.failed += 1;
    this.logger.error(
      { err: error, ...coordinatesOf(message), attempts },
      'message failed for good: committing what is contiguous before it and closing (onFailure: stop)',
    );
    this.host.publish({
      type: 'message-failed',
      ...coordinatesOf(message),
      offset: message.offset,
      attempts,
      error,
      at: Date.now(),
    });
    this.host.failWith(error);
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

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  value !== null &&
  typeof value === 'object' &&
  typeof (value as PromiseLike<unknown>).then === 'function';

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

/**
 * Hands a partition's messages to its runner in arrays of at most `maxSize`, each handed over when
 * full or `maxWaitMs` after its first message. A partial array when the partition's stream
 * completes is dropped: its messages were never started (on a revoke, the next owner gets them).
 */
export class BatchSink implements PartitionSink {
  private buffer: KafkaMessage[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly flush = (): void => {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.buffer.length === 0) return;
    const out = this.buffer;
    this.buffer = [];
    this.runner.push(out);
  };

  constructor(
    private readonly runner: Pick<PartitionRunner<KafkaMessage[]>, 'push' | 'sourceComplete'>,
    private readonly maxSize: number,
    private readonly maxWaitMs: number,
  ) {}

  next(message: KafkaMessage): void {
    this.buffer.push(message);
    if (this.buffer.length >= this.maxSize) this.flush();
    else this.timer ??= setTimeout(this.flush, this.maxWaitMs);
  }

  complete(): void {
    this.dispose();
    this.runner.sourceComplete();
  }

  /** Drops what is gathered and stops the timer. */
  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.buffer = [];
  }
}
