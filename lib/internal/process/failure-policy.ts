/**
 * What happens when a handler fails: the wait before each retry (cut short only when the message's
 * signal aborts), and the failure policy for a message (or batch) that failed for good — skip,
 * dead-letter (acked only once the broker confirmed the write) or stop.
 */
import { EMPTY, Observable, catchError, filter, from, map, of } from 'rxjs';
import type { Logger } from '../../logger';
import { DeadLetterError, DeserializationError, HandlerError } from '../../errors';
import type { ResolvedProcessOptions } from '../../process-options';
import { backoffDelay } from '../../process-options';
import type { ConsumerEvent, KafkaMessage, ProcessedStatus } from '../../types';
import type { DeadLetterReason, DeadLetterWriter } from './dead-letter';
import { coordinatesOf, describe } from './decoding';
import type { PartitionControl } from '../partition/partition-control';
import { timerDelay } from '../loop/timers';

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

/** How the processor counts a unit done and what its pipeline emits for it. */
export interface FailureTarget<R, O> {
  settle(partition: PartitionControl, messages: KafkaMessage[], result: R | undefined): void;
  output(
    messages: KafkaMessage[],
    status: ProcessedStatus,
    attempts: number,
    result: R | undefined,
    error?: unknown,
  ): O;
}

export class FailurePolicy<R, O> {
  constructor(
    private readonly options: ResolvedProcessOptions,
    private readonly host: ProcessorHost,
    private readonly logger: Logger,
    private readonly deadLetter: DeadLetterWriter | undefined,
    private readonly random: () => number,
    private readonly target: FailureTarget<R, O>,
  ) {}

  /**
   * The wait before retry `n`. A revoke or a close does not cut it short: the message is still
   * this member's work until its partition is released, so it keeps retrying within the drain
   * deadline (abandoning it would make the next owner redo what finished above it). The retry is
   * abandoned only when the message's signal aborts: the partition was lost, its drain deadline
   * passed, or a seek replaced its stream.
   */
  retryDelay(
    message: KafkaMessage,
    err: unknown,
    n: number,
    abandon: () => void,
  ): Observable<unknown> {
    if (message.signal.aborted) {
      abandon();
      return new Observable((subscriber) => subscriber.error(err));
    }
    // Not worth retrying (retry.when): the failure policy applies now.
    if (!this.retryable(err, message)) return new Observable((subscriber) => subscriber.error(err));
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
      }, timerDelay(delayMs));
      signal.addEventListener('abort', onAbort, { once: true });
      return () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      };
    });
  }

  /** `retry.when`'s answer; a predicate that throws says no (logged). */
  private retryable(err: unknown, message: KafkaMessage): boolean {
    try {
      const answer: unknown = this.options.retry.when(err, message);
      if (answer !== null && typeof (answer as { then?: unknown })?.then === 'function') {
        this.logger.warn(
          coordinatesOf(message),
          'retry.when returned a Promise: it must answer synchronously; the failure is retried',
        );
        return true;
      }
      return Boolean(answer);
    } catch (predicateError) {
      this.logger.warn(
        { ...coordinatesOf(message), err: predicateError, handlerError: err },
        'retry.when threw: the failure is not retried',
      );
      return false;
    }
  }

  /** Applies the failure policy to messages (one, or a batch) that failed for good. */
  fail(
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
          this.target.settle(partition, [m], undefined);
        }
        return of(this.target.output(messages, 'skipped', attempts, undefined, cause));
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
            return this.target.output(messages, 'dead-lettered', attempts, undefined, cause);
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
            this.stop(partition, first, e, attempts);
            return EMPTY;
          }),
        );
      }
      default:
        this.stop(partition, first, error, attempts);
        return EMPTY;
    }
  }

  private stop(
    partition: PartitionControl,
    message: KafkaMessage,
    error: Error,
    attempts: number,
  ): void {
    // Nothing of the partition waiting at or after it starts (a later message of its key, say).
    partition.halt(message.offset);
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
