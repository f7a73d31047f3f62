/**
 * One unit of work (a message, or a batch) as an Observable: decode it, call the handler, retry
 * with backoff, then settle it (ack) or apply the failure policy. processor.ts schedules the units
 * and runs a single message's first attempt on a fast path; whatever that path cannot finish (an
 * async deserializer, a failure, an Observable handler) continues here, so that retries and
 * failures have one implementation.
 */
import {
  EMPTY,
  Observable,
  catchError,
  concat,
  defer,
  isObservable,
  asapScheduler,
  map,
  mergeMap,
  of,
  subscribeOn,
  retry,
  tap,
  throwError,
} from 'rxjs';
import type { Subscription } from 'rxjs';
import type { Logger } from '../../logger';
import { HandlerError } from '../../errors';
import { BatchItemFailure } from '../../batch-item-failure';
import type { DeserializationError } from '../../errors';
import type { ResolvedProcessOptions } from '../../process-options';
import type { DecodedMessage, KafkaMessage, MessageHandler, Processed } from '../../types';
import type { DeadLetterWriter } from './dead-letter';
import { coordinatesOf, decodeMessage, describe, isPromiseLike } from './decoding';
import { FailurePolicy } from './failure-policy';
import type { ProcessorHost } from './failure-policy';
import type { ProcessingMode } from './processing-mode';
import type { PartitionControl } from '../partition/partition-control';

/** The decode → handler → retry → settle-or-fail path of a processor's units. */
export class UnitHandling<R, K, V, O = Processed<R>> {
  constructor(
    private readonly mode: ProcessingMode<R, K, V, O>,
    private readonly options: ResolvedProcessOptions,
    private readonly host: ProcessorHost,
    private readonly logger: Logger,
    private readonly deadLetter: DeadLetterWriter | undefined,
    random: () => number,
  ) {
    this.failures = new FailurePolicy(options, host, logger, deadLetter, random, {
      settle: (partition, messages, result) => this.settle(partition, messages, result),
      output: (messages, status, attempts, result, error) =>
        mode.output(messages, status, attempts, result, error),
    });
  }

  /** What a message that failed for good leads to (also used by the one-message fast path). */
  readonly failures: FailurePolicy<R, O>;

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
  settleOne(partition: PartitionControl, m: KafkaMessage, result: R | undefined): void {
    if (this.mode.settle) this.mode.settle(partition, [m], result);
    else partition.ack(m);
  }

  /** One unit: decode, run with retries, ack — or apply the failure policy. */
  handle(
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
            defer(() => {
              // A stop at or before it (a message of `good` that failed alone) came first.
              const halted = partition.haltedAt;
              if (!before || (halted !== undefined && halted <= m.offset)) return EMPTY;
              return this.failures.fail(partition, [m], error, 0);
            }),
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
  retrying(
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
          // A partial batch result is not retried as a whole: it splits the batch (below).
          this.splitAt(good, err) >= 0
            ? throwError(() => err)
            : this.failures.retryDelay(first, this.causeOf(err), retryCount, () => {
                abandoned = true;
              }),
      }),
      map((result: unknown): O => {
        this.settle(partition, good, result as R | undefined);
        return this.mode.output(good, 'processed', attempts, result as R | undefined);
      }),
      catchError((err: unknown) => {
        const at = abandoned ? -1 : this.splitAt(good, err);
        if (at >= 0) return this.split(partition, good, decoded, at, err as BatchItemFailure);
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
        const cause = this.causeOf(err);
        const error = new HandlerError(
          `Handler failed on ${what} after ${attempts} attempt(s): ${describe(cause)}`,
          coordinatesOf(first),
          { cause, attempts },
        );
        return this.failures.fail(partition, good, error, attempts);
      }),
    );
  }

  /**
   * Where a batch's partial result splits it: the index of the message a {@link BatchItemFailure}
   * names, or -1 (not a batch, not a partial result, or a message not in this batch).
   */
  private splitAt(good: KafkaMessage[], err: unknown): number {
    if (this.mode.batch === undefined || !(err instanceof BatchItemFailure)) return -1;
    const first = good[0] as KafkaMessage;
    // Another partition's message (the failure names one): not a partial result of this batch.
    if (err.partition !== undefined && err.partition !== first.partition) return -1;
    if (err.topic !== undefined && err.topic !== first.topic) return -1;
    if (good.length === 1 && first.offset === err.offset) return -1; // alone already: a failure
    return good.findIndex((m) => m.offset === err.offset);
  }

  /** What a failure reports: a batch message's partial result stands for its cause. */
  private causeOf(err: unknown): unknown {
    return this.mode.batch !== undefined &&
      err instanceof BatchItemFailure &&
      err.cause !== undefined
      ? err.cause
      : err;
  }

  /**
   * A batch whose handler said which message failed: the messages before it are processed; the
   * failed one runs on its own (its first attempt is this one) with retries, then the failure
   * policy; the messages after it run as a new batch, unless the partition stopped at or before
   * them (`onFailure: 'stop'`), or its revoke began meanwhile (they are left to the next owner, as
   * a batch waiting to start is).
   */
  private split(
    partition: PartitionControl,
    good: KafkaMessage[],
    decoded: DecodedMessage<K, V>[],
    at: number,
    failure: BatchItemFailure,
  ): Observable<O> {
    const parts: Observable<O>[] = [];
    if (at > 0) {
      const done = good.slice(0, at);
      parts.push(
        defer(() => {
          this.settle(partition, done, undefined);
          return of(this.mode.output(done, 'processed', 1, undefined));
        }),
      );
    }
    const failed = good[at] as KafkaMessage;
    const cause = this.causeOf(failure);
    parts.push(
      this.retrying(
        partition,
        [failed],
        [decoded[at] as DecodedMessage<K, V>],
        throwError(() => cause),
      ),
    );
    const rest = good.slice(at + 1);
    if (rest.length > 0) {
      const restDecoded = decoded.slice(at + 1);
      parts.push(
        defer(() => {
          const next = rest[0] as KafkaMessage;
          const halted = partition.haltedAt;
          // Not started: left to the next owner once a revoke began (as a queued batch is).
          if (partition.ended.aborted || next.signal.aborted) return EMPTY;
          if (halted !== undefined && halted <= next.offset) return EMPTY;
          return this.runUnit(partition, rest, restDecoded);
        }).pipe(
          // On a later turn: a split of a split of … (every message failing at once) must not
          // grow the stack by a frame per message.
          subscribeOn(asapScheduler),
        ),
      );
    }
    return concat(...parts);
  }
}

/** Runs a handler call and emits its result once when it succeeds (last value for an Observable). */
export function invoke<R>(call: () => ReturnType<MessageHandler<R>>): Observable<R | undefined> {
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
