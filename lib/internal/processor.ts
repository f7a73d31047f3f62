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
  defer,
  filter,
  from,
  isObservable,
  map,
  of,
  retry,
} from 'rxjs';
import { finalize } from 'rxjs';
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

const describe = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export class MessageProcessor<R, K, V> {
  constructor(
    private readonly handler: MessageHandler<R, K, V>,
    private readonly options: ResolvedProcessOptions,
    private readonly host: ProcessorHost,
    private readonly logger: Logger,
    private readonly deadLetter: DeadLetterWriter | undefined,
    private readonly random: () => number = Math.random,
  ) {}

  /** The pipeline of one partition: bounded by the shared limiter and `partitionConcurrency`. */
  runPartition(partition: PartitionControl, limiter: FairLimiter): Observable<Processed<R>> {
    partition.trackRunning();
    return partition.messages$.pipe(
      // Messages still waiting when the partition is revoked are dropped, never run.
      dropOnEndMerge(
        (message: KafkaMessage) =>
          limiter.run(() => {
            if (!partition.active) return EMPTY;
            partition.running += 1;
            return this.handle(partition, message).pipe(
              finalize(() => {
                partition.running -= 1;
              }),
            );
          }, partition.ended),
        this.options.partitionConcurrency,
        partition.ended,
      ),
      finalize(() => partition.pipelineDone()),
    );
  }

  private handle(partition: PartitionControl, message: KafkaMessage): Observable<Processed<R>> {
    let decoded: DecodedMessage<K, V>;
    try {
      decoded = this.decode(message);
    } catch (err) {
      // A payload that cannot be decoded fails the same way every time: never retried.
      return this.fail(partition, message, err as DeserializationError, 0);
    }
    let attempts = 0;
    let abandoned = false;
    return defer(() => {
      attempts += 1;
      return invoke(this.handler, decoded);
    }).pipe(
      retry({
        count: this.options.retry.count,
        delay: (err: unknown, retryCount: number) =>
          this.retryDelay(partition, message, err, retryCount, () => (abandoned = true)),
      }),
      map((result) => {
        partition.ack(message);
        return this.processed(message, 'processed', attempts, result);
      }),
      catchError((err: unknown) => {
        if (abandoned) {
          this.logger.info(
            { ...coordinatesOf(message), attempts, err },
            'retry abandoned: the partition is being revoked; the message stays uncommitted and its next owner runs it',
          );
          return EMPTY;
        }
        const error = new HandlerError(
          `Handler failed on ${message.topic}[${message.partition}]@${message.offset} after ${attempts} attempt(s): ${describe(err)}`,
          coordinatesOf(message),
          { cause: err, attempts },
        );
        return this.fail(partition, message, error, attempts);
      }),
    );
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

  /** The wait before retry `n`, cut short (and the retry abandoned) if the partition ends. */
  private retryDelay(
    partition: PartitionControl,
    message: KafkaMessage,
    err: unknown,
    n: number,
    abandon: () => void,
  ): Observable<unknown> {
    if (!partition.active || message.signal.aborted) {
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
      const ended = partition.ended;
      const onEnd = (): void => {
        abandon();
        subscriber.error(err);
      };
      const timer = setTimeout(() => {
        subscriber.next(0);
        subscriber.complete();
      }, delayMs);
      ended.addEventListener('abort', onEnd, { once: true });
      return () => {
        clearTimeout(timer);
        ended.removeEventListener('abort', onEnd);
      };
    });
  }

  /** Applies the failure policy to a message that failed for good. */
  private fail(
    partition: PartitionControl,
    message: KafkaMessage,
    error: HandlerError | DeserializationError,
    attempts: number,
  ): Observable<Processed<R>> {
    const coordinates = coordinatesOf(message);
    if (message.signal.aborted) {
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
        this.host.counters.skipped += 1;
        this.logger.error(
          { err: error, ...coordinates, attempts, skipped: this.host.counters.skipped },
          'message failed for good and is skipped (onFailure: skip): its offset is committed without it being processed',
        );
        this.host.publish({
          type: 'message-skipped',
          ...coordinates,
          offset: message.offset,
          attempts,
          error: cause,
          at: Date.now(),
        });
        partition.ack(message);
        return of(this.processed(message, 'skipped', attempts, undefined, cause));
      }
      case 'dead-letter': {
        const writer = this.deadLetter;
        if (writer === undefined) throw new Error('dead-letter policy without a writer');
        const reason: DeadLetterReason = {
          error: cause,
          attempts,
          stage: error instanceof DeserializationError ? error.part : 'handler',
        };
        return from(writer.send(message, reason)).pipe(
          filter(() => !message.signal.aborted), // released meanwhile: the next owner redoes it
          map(() => {
            this.host.counters.deadLettered += 1;
            this.logger.warn(
              { err: error, ...coordinates, attempts, deadLetterTopic: writer.topic },
              'message failed for good and was written to the dead-letter topic',
            );
            this.host.publish({
              type: 'dead-lettered',
              ...coordinates,
              offset: message.offset,
              attempts,
              error: cause,
              deadLetterTopic: writer.topic,
              at: Date.now(),
            });
            partition.ack(message);
            return this.processed(message, 'dead-lettered', attempts, undefined, cause);
          }),
          catchError((writeErr: unknown) => {
            if (message.signal.aborted) return EMPTY;
            // Never skip a message that did not reach the dead-letter topic: stop instead.
            const e = new DeadLetterError(
              `Could not write ${message.topic}[${message.partition}]@${message.offset} to the dead-letter topic ${writer.topic}: ${describe(writeErr)}; stopping so that it is not lost`,
              coordinates,
              writer.topic,
              error,
              { cause: writeErr, retriable: true },
            );
            this.stop(message, e, attempts);
            return EMPTY;
          }),
        );
      }
      default:
        this.stop(message, error, attempts);
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

  private processed(
    message: KafkaMessage,
    status: ProcessedStatus,
    attempts: number,
    result: R | undefined,
    error?: unknown,
  ): Processed<R> {
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
  }
}

/** Runs a handler and emits its result once when it succeeds (last value for an Observable). */
function invoke<R, K, V>(
  handler: MessageHandler<R, K, V>,
  message: DecodedMessage<K, V>,
): Observable<R | undefined> {
  return new Observable<R | undefined>((subscriber) => {
    let result: ReturnType<MessageHandler<R, K, V>>;
    try {
      result = handler(message);
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
    if (
      result !== null &&
      typeof result === 'object' &&
      typeof (result as Promise<R>).then === 'function'
    ) {
      (result as Promise<R>).then(
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
