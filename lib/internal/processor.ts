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
  of,
  retry,
  throwError,
} from 'rxjs';
import { finalize } from 'rxjs';
import type { OperatorFunction, Subscription } from 'rxjs';
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
import { dropOnEndMerge } from './drop-on-end-merge';
import { keyOrderedMerge } from './key-ordered-merge';
import type { FairLimiter } from './fair-limiter';
import type { PartitionControl } from './partition-control';

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
}

/** The single-message mode of `process()`. */
export function singleMode<R, K, V>(
  handler: MessageHandler<R, K, V>,
): ProcessingMode<R, K, V, Processed<R>> {
  return {
    call: (messages) => handler(messages[0] as DecodedMessage<K, V>),
    output: (messages, status, attempts, result, error) => {
      const message = messages[0] as KafkaMessage;
      const out = {
        topic: message.topic,
        partition: message.partition,
        offset: message.offset,
        generation: message.generation,
        status,
        attempts,
        result,
      };
      return error === undefined ? out : { ...out, error };
    },
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

  /** The pipeline of one partition: bounded by the shared limiter and `partitionConcurrency`. */
  runPartition(partition: PartitionControl, limiter: FairLimiter): Observable<O> {
    partition.trackRunning();
    // Under ordering 'key', what the merge projects after a revoke must run (it fills the gap
    // below work already done); the merge itself decides what to drop.
    const keyed = this.mode.batch === undefined && this.options.ordering === 'key';
    const run = (messages: KafkaMessage[]): Observable<O> =>
      limiter.run(
        () => {
          if (!keyed && !partition.active) return EMPTY;
          if (partition.signal.aborted) return EMPTY;
          partition.handlerStarted();
          return this.handle(partition, messages).pipe(
            finalize(() => {
              partition.handlerEnded();
            }),
          );
        },
        keyed ? partition.signal : partition.ended,
      );
    const batch = this.mode.batch;
    // Messages (or batches) still waiting when the partition is revoked are dropped, never run.
    const units: Observable<O> =
      batch === undefined
        ? partition.messages$.pipe(
            this.options.ordering === 'key'
              ? keyOrderedMerge(
                  (m: KafkaMessage) => run([m]),
                  this.options.partitionConcurrency,
                  orderingKey,
                  (m: KafkaMessage) => m.offset,
                  partition.ended,
                  partition.signal,
                )
              : dropOnEndMerge(
                  (m: KafkaMessage) => run([m]),
                  this.options.partitionConcurrency,
                  partition.ended,
                ),
          )
        : partition.messages$.pipe(
            batchesOf<KafkaMessage>(batch.maxSize, batch.maxWaitMs),
            dropOnEndMerge(run, this.options.partitionConcurrency, partition.ended),
          );
    return units.pipe(finalize(() => partition.pipelineDone()));
  }

  /** One unit: decode, run with retries, ack — or apply the failure policy. */
  private handle(partition: PartitionControl, messages: KafkaMessage[]): Observable<O> {
    const good: KafkaMessage[] = [];
    const decoded: DecodedMessage<K, V>[] = [];
    const undecodable: Observable<O>[] = [];
    for (const m of messages) {
      try {
        decoded.push(this.decode(m));
        good.push(m);
      } catch (err) {
        // A payload that cannot be decoded fails the same way every time: never retried.
        undecodable.push(this.fail(partition, [m], err as DeserializationError, 0));
        if (this.options.onFailure === 'stop') return concat(...undecodable);
      }
    }
    if (good.length === 0) return concat(...undecodable);
    const first = good[0] as KafkaMessage;
    let attempts = 0;
    let abandoned = false;
    const succeed = (result: unknown): O => {
      this.settle(partition, good, result as R | undefined);
      return this.mode.output(good, 'processed', attempts, result as R | undefined);
    };
    /** Retries (rxjs `retry`), starting from the outcome of a first attempt already made. */
    const retried = (firstAttempt: Observable<unknown>): Observable<O> => {
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
        map(succeed),
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
    };
    // The first attempt runs without operators: a Promise or a plain value that succeeds (the
    // common case) is acked and emitted directly; a failure or an Observable handler continues
    // through the retry pipeline above, which never calls the handler again for this attempt.
    const run$ = new Observable<O>((subscriber) => {
      attempts = 1;
      let result: ReturnType<MessageHandler<R>>;
      try {
        result = this.mode.call(decoded, good);
      } catch (err) {
        return retried(throwError(() => err)).subscribe(subscriber);
      }
      if (isObservable(result)) {
        const observable = result;
        return retried(invoke(() => observable)).subscribe(subscriber);
      }
      if (isPromiseLike(result)) {
        let inner: Subscription | undefined;
        result.then(
          (value) => {
            if (subscriber.closed) return;
            subscriber.next(succeed(value));
            subscriber.complete();
          },
          (err: unknown) => {
            if (subscriber.closed) return;
            inner = retried(throwError(() => err)).subscribe(subscriber);
          },
        );
        return () => inner?.unsubscribe();
      }
      subscriber.next(succeed(result));
      subscriber.complete();
      return undefined;
    });
    return undecodable.length === 0 ? run$ : concat(...undecodable, run$);
  }

  private decode(message: KafkaMessage): DecodedMessage<K, V> {
    const { key: keyOf, value: valueOf } = this.options;
    if (keyOf === undefined && valueOf === undefined) {
      return message as unknown as DecodedMessage<K, V>;
    }
    const run = (part: 'key' | 'value', fn: typeof keyOf, data: Buffer | null): unknown => {
      if (fn === undefined) return data;
      try {
        return fn(data, message);
      } catch (err) {
        throw new DeserializationError(
          `Could not decode the ${part} of ${message.topic}[${message.partition}]@${message.offset}: ${describe(err)}`,
          coordinatesOf(message),
          part,
          { cause: err },
        );
      }
    };
    return {
      ...message,
      key: run('key', keyOf, message.key) as K,
      value: run('value', valueOf, message.value) as V,
    };
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
 * Groups values into arrays of at most `maxSize`, emitted when full or `maxWaitMs` after the first
 * value of the array. A partial array when the source completes is dropped: its values were never
 * started (on a revoke, the next owner gets them).
 */
export function batchesOf<T>(maxSize: number, maxWaitMs: number): OperatorFunction<T, T[]> {
  return (source) =>
    new Observable<T[]>((subscriber) => {
      let buffer: T[] = [];
      let timer: NodeJS.Timeout | undefined;
      const flush = (): void => {
        if (timer) clearTimeout(timer);
        timer = undefined;
        if (buffer.length === 0) return;
        const out = buffer;
        buffer = [];
        subscriber.next(out);
      };
      const sub = source.subscribe({
        next: (value) => {
          buffer.push(value);
          if (buffer.length >= maxSize) flush();
          else timer ??= setTimeout(flush, maxWaitMs);
        },
        error: (e: unknown) => subscriber.error(e),
        complete: () => {
          if (timer) clearTimeout(timer);
          buffer = [];
          subscriber.complete();
        },
      });
      return () => {
        if (timer) clearTimeout(timer);
        sub.unsubscribe();
      };
    });
}
