/**
 * A consumer's one pipeline, from its start to its stop. `partitions$` admits one pipeline per
 * consumer, and the subscription that runs it starts the engine. The pipeline behind `process()`,
 * `processBatch()` and `processTransactional()` runs the partition streams through a
 * MessageProcessor under one fair concurrency limit; it owns the dead-letter writer of the
 * subscription that runs it, cuts off handlers still running once the consumer has closed, and
 * makes unsubscribing a graceful close rather than a teardown. `options.signal` closes it the same
 * way. reactive-consumer.ts only chooses the processing mode and resolves the options.
 */
import { ClientOAuth } from '../binding/oauth-bearer';
import { Observable, mergeMap } from 'rxjs';
import type { Subscription } from 'rxjs';
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { AlreadySubscribedError, ClosedError } from '../../errors';
import type { ResolvedProcessOptions } from '../../process-options';
import type { ConsumerEngine } from '../loop/consumer-engine';
import { FairLimiter } from '../partition/fair-limiter';
import type { PartitionControl } from '../partition/partition-control';
import type { Transactions } from '../transactions/transactions';
import { DeadLetterWriter, producerFactoryOf } from './dead-letter';
import type { ProducerFactory } from './dead-letter';
import { MessageProcessor } from './processor';
import type { ProcessingMode } from './processing-mode';

/** What the gate of `partitions$` uses of its consumer. */
export interface PartitionsGate {
  /** Whether a pipeline is attached to the consumer already. */
  attached(): boolean;
  /** Marks the pipeline attached: the consumer runs no other. */
  attach(): void;
  /** The pipeline's subscription to the partition streams is made; the engine starts next. */
  started(): void;
}

/**
 * A consumer's `partitions$`: one pipeline per consumer, refused once the consumer is closing.
 * The subscription that runs the pipeline starts the engine; its end closes the consumer.
 */
export function partitionStreams(
  engine: ConsumerEngine,
  gate: PartitionsGate,
): Observable<PartitionControl> {
  return new Observable<PartitionControl>((subscriber) => {
    if (gate.attached()) {
      subscriber.error(
        new AlreadySubscribedError(
          'This consumer already runs a pipeline (process() or partitions$); create another consumer for a second one',
        ),
      );
      return undefined;
    }
    const lifecycle = engine.lifecycle.kind;
    if (lifecycle === 'closing' || lifecycle === 'closed') {
      subscriber.error(new ClosedError('The consumer is closed'));
      return undefined;
    }
    gate.attach();
    const sub = engine.partitionStreams.subscribe(subscriber);
    gate.started();
    void engine.start();
    return () => {
      sub.unsubscribe();
      void engine.close();
    };
  });
}

/** `options.signal`: its abort closes the consumer gracefully (at once if it aborted already). */
export function closeOnAbort(
  signal: AbortSignal | undefined,
  logger: Logger,
  close: () => Promise<void>,
): void {
  if (signal !== undefined) {
    const onAbort = (): void => {
      logger.info('the signal aborted: closing');
      void close().catch((err: unknown) => logger.warn({ err }, 'close on abort failed'));
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  }
}

/** What a pipeline uses of its consumer. */
export interface PipelineHost {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly engine: ConsumerEngine;
  /** The consumer's `partitions$`: subscribing it connects (one pipeline per consumer). */
  readonly partitions: Observable<PartitionControl>;
  /** Whether a pipeline is attached to the consumer (set by subscribing `partitions`). */
  attached(): boolean;
  /** The consumer's dead-letter writers, closed by its `close()` after the consumer. */
  readonly deadLetterWriters: Set<DeadLetterWriter>;
  /** The transactional unit a running processTransactional() installed, if any. */
  transactions(): Transactions | undefined;
  /** The consumer's graceful close. */
  close(): Promise<void>;
  /** Test seams: the dead-letter producer, the source of retry jitter. */
  readonly internals: {
    readonly notSubscribedWarnMs?: number;
    readonly producerFactory?: ProducerFactory;
    readonly random?: () => number;
  };
}

/** Runs `mode` over the consumer's partitions; see the file comment. */
/** How long a pipeline may stay unsubscribed before the consumer warns about it. */
const NOT_SUBSCRIBED_WARN_MS = 5000;

/**
 * A pipeline nobody subscribes to consumes nothing, silently: warns once, `warnAfterMs` after the
 * call, while the consumer has not started (a forgotten subscribe(), or an Observable returned
 * where none subscribes). Returns the cancel, called by the subscription.
 */
export function warnIfNeverSubscribed(host: PipelineHost, call: string): () => void {
  const warnAfterMs = host.internals.notSubscribedWarnMs ?? NOT_SUBSCRIBED_WARN_MS;
  const timer = setTimeout(() => {
    if (host.engine.lifecycle.kind !== 'idle') return;
    host.logger.warn(
      { afterMs: warnAfterMs },
      `${call} was called but its Observable was never subscribed: nothing is consumed until it is`,
    );
  }, warnAfterMs);
  timer.unref();
  return () => clearTimeout(timer);
}

export function runPipeline<R, K, V, O>(
  host: PipelineHost,
  mode: ProcessingMode<R, K, V, O>,
  resolved: ResolvedProcessOptions,
  call = 'process() or processBatch()',
): Observable<O> {
  const deadLetter =
    resolved.deadLetter === undefined
      ? undefined
      : new DeadLetterWriter(
          resolved.deadLetter.topic,
          resolved.deadLetter.producerConfig,
          host.settings.groupId,
          host.settings.connectTimeoutMs,
          host.logger.child({ component: 'dead-letter' }),
          host.internals.producerFactory ?? producerFactoryOf(host.settings.binding),
          new ClientOAuth(
            host.settings.oauthBearerToken,
            host.logger.child({ component: 'oauthbearer' }),
            host.settings.connectTimeoutMs,
          ),
        );
  const subscribed = warnIfNeverSubscribed(host, call);
  return new Observable<O>((subscriber) => {
    subscribed();
    const limiter = new FairLimiter(resolved.concurrency);
    const processor = new MessageProcessor<R, K, V, O>(
      mode,
      resolved,
      host.engine,
      host.logger,
      deadLetter,
      host.internals.random,
    );
    const wasAttached = host.attached();
    /** Set once the user unsubscribed: the pipeline keeps running, unseen, until it drained. */
    let detached = false;
    /**
     * Once the consumer has closed, handlers still running (they ignored `message.signal` past
     * the drain deadline) are cut off: their results no longer count, and the pipeline must not
     * wait for them to complete. Checked just after the close finished (its partition streams
     * completed: a pipeline whose handlers all ended completes by itself first).
     */
    const cutOff = host.engine.rebalances.subscribe({
      complete: () =>
        setImmediate(() => {
          if (sub.closed) return;
          host.logger.warn(
            'handlers still running when the consumer closed were cut off (they ignored message.signal); their results do not count',
          );
          sub.unsubscribe();
          if (!detached) subscriber.complete();
        }),
    });
    const sub: Subscription = host.partitions
      .pipe(mergeMap((partition) => processor.runPartition(partition, limiter)))
      .subscribe({
        next: (value) => {
          if (!detached) subscriber.next(value);
        },
        error: (err: unknown) => {
          if (!detached) subscriber.error(err);
          else
            host.logger.debug(
              { err },
              'the pipeline ended with an error after it was unsubscribed',
            );
        },
        complete: () => {
          if (!detached) subscriber.complete();
        },
      });
    // Only the subscription that runs the pipeline owns the writer and the transactions (a
    // refused second one must not close them).
    const runs = !wasAttached && host.attached();
    const owns = deadLetter !== undefined && runs;
    if (owns) {
      host.deadLetterWriters.add(deadLetter);
      void deadLetter.start();
    }
    return () => {
      cutOff.unsubscribe();
      if (sub.closed) {
        if (owns) void deadLetter.close(host.settings.commitTimeoutMs);
        if (runs) void host.transactions()?.close();
        return;
      }
      // Unsubscribing (or `takeUntil`) is a graceful stop, exactly like close(): the pipeline
      // is not torn down — handlers in flight finish and their offsets count, the final commits
      // are confirmed, the partitions released — only its results are no longer emitted. The
      // subscription ends when the consumer has closed (within `closeTimeoutMs`).
      detached = true;
      host.logger.info('the pipeline was unsubscribed: closing the consumer gracefully');
      void host
        .close()
        .catch((err: unknown) => host.logger.warn({ err }, 'close after unsubscribe failed'))
        .finally(() => sub.unsubscribe());
    };
  });
}
