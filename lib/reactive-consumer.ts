import { EMPTY, Observable, catchError, finalize, isObservable, map, mergeMap } from 'rxjs';
import { dropOnEndMerge } from './internal/drop-on-end-merge';
import type { Logger } from 'pino';
import { resolveSettings } from './config';
import type { ConsumerSettings, ReactiveConsumerOptions } from './config';
import { AlreadySubscribedError, ClosedError, ConfigError, HandlerError } from './errors';
import { ConsumerEngine } from './internal/consumer-engine';
import { FairLimiter } from './internal/fair-limiter';
import { ConsumerObservability, attachObservability } from './internal/observability';
import type { ConsumerHealth, HealthOptions } from './health';
import type { ConsumerMetrics } from './metrics';
import type { PartitionControl } from './internal/partition-control';
import type { ConsumerFactory } from './internal/rdkafka';
import { defaultLogger } from './logger';
import type {
  KafkaMessage,
  MessageHandler,
  PartitionStream,
  ProcessOptions,
  Processed,
  RebalanceEvent,
} from './types';

/** Defaults of {@link ProcessOptions}. */
export const PROCESS_DEFAULTS = { concurrency: 64, partitionConcurrency: 1 } as const;

/** @internal Test seams; not part of the public API. */
export interface ReactiveConsumerInternals {
  consumerFactory?: ConsumerFactory;
}

let startedConsumers = 0;
let threadPoolWarned = false;

/**
 * A Kafka consumer whose partitions are RxJS streams, and whose rebalances drain in-flight work,
 * commit it (confirmed by the broker) and only then release the partitions.
 *
 * @example
 * const consumer = new ReactiveConsumer({
 *   config: { 'bootstrap.servers': 'localhost:9092', 'group.id': 'billing' },
 *   topicConfig: { 'auto.offset.reset': 'earliest' },
 *   topics: ['orders'],
 * });
 * consumer.process(async (message) => charge(JSON.parse(message.value!.toString())), {
 *   concurrency: 32,
 * }).subscribe({ error: (err) => console.error(err) });
 * process.on('SIGTERM', () => void consumer.close());
 */
export class ReactiveConsumer {
  /** Every rebalance phase as it happens (hot; completes when the consumer is closed). */
  readonly rebalances$: Observable<RebalanceEvent>;
  /**
   * One {@link PartitionStream} per assigned partition per assignment. Subscribing connects and
   * subscribes; unsubscribing closes the consumer. One pipeline per consumer: `partitions$` or
   * `process()`, subscribed once.
   */
  readonly partitions$: Observable<PartitionStream>;
  /** The resolved settings (defaults applied). */
  readonly settings: ConsumerSettings;
  /**
   * A {@link ConsumerMetrics} snapshot every `metricsIntervalMs` while subscribed, and a last one
   * when the consumer closes (then it completes). See docs/observability.md.
   */
  readonly metrics$: Observable<ConsumerMetrics>;
  private readonly engine: ConsumerEngine;
  private readonly observability: ConsumerObservability;
  private readonly logger: Logger;
  private attached = false;

  constructor(options: ReactiveConsumerOptions, internals: ReactiveConsumerInternals = {}) {
    this.settings = resolveSettings(options);
    const base = options.logger ?? defaultLogger();
    this.logger = base.child({ component: 'reactive-rdkafka', group: this.settings.groupId });
    this.engine = new ConsumerEngine(this.settings, this.logger, internals.consumerFactory);
    this.rebalances$ = this.engine.rebalances.asObservable();
    this.observability = new ConsumerObservability(this.engine, this.settings, this.logger);
    this.metrics$ = this.observability.metrics$();
    attachObservability(this, this.observability);
    this.partitions$ = new Observable<PartitionControl>((subscriber) => {
      if (this.attached) {
        subscriber.error(
          new AlreadySubscribedError(
            'This consumer already runs a pipeline (process() or partitions$); create another consumer for a second one',
          ),
        );
        return undefined;
      }
      const lifecycle = this.engine.lifecycle.kind;
      if (lifecycle === 'closing' || lifecycle === 'closed') {
        subscriber.error(new ClosedError('The consumer is closed'));
        return undefined;
      }
      this.attached = true;
      const sub = this.engine.partitionStreams.subscribe(subscriber);
      this.warnOnSmallThreadPool();
      void this.engine.start();
      return () => {
        sub.unsubscribe();
        void this.engine.close();
      };
    });
  }

  /**
   * Runs `handler` for every message, at most `concurrency` at once across partitions (a fair
   * pool) and `partitionConcurrency` within one partition (1 keeps offset order). A message counts
   * as processed when the handler's Promise resolves, its Observable completes, or it returns a
   * plain value. A handler failure stops the consumer: it commits what is contiguous, closes, and
   * the returned Observable errors with a {@link HandlerError}. Completes after `close()`.
   */
  process<R = unknown>(
    handler: MessageHandler<R>,
    options: ProcessOptions = {},
  ): Observable<Processed<R>> {
    const concurrency = options.concurrency ?? PROCESS_DEFAULTS.concurrency;
    const partitionConcurrency =
      options.partitionConcurrency ?? PROCESS_DEFAULTS.partitionConcurrency;
    for (const [key, value] of [
      ['concurrency', concurrency],
      ['partitionConcurrency', partitionConcurrency],
    ] as const) {
      if (!(value === Infinity || (Number.isInteger(value) && value >= 1))) {
        throw new ConfigError(
          `Expected \`${key}\` to be an integer ≥ 1, got ${String(value)}`,
          key,
        );
      }
    }
    if (typeof handler !== 'function') {
      throw new ConfigError('Expected `handler` to be a function', 'handler');
    }
    handler = this.observability.instrument(handler);
    return new Observable<Processed<R>>((subscriber) => {
      const limiter = new FairLimiter(concurrency);
      return (this.partitions$ as Observable<PartitionControl>)
        .pipe(
          mergeMap((partition) =>
            this.runPartition(partition, handler, limiter, partitionConcurrency),
          ),
        )
        .subscribe(subscriber);
    });
  }

  /**
   * The fetch position (next offset to read) of each partition this consumer owns now; `offset` is
   * undefined until librdkafka knows it (before the first fetch of the partition).
   */
  positions(): { topic: string; partition: number; offset: number | undefined }[] {
    return this.engine.positions();
  }

  /** The consumer's metrics now: counters, handler and commit latency, per-partition state and lag. */
  metrics(): ConsumerMetrics {
    return this.observability.metrics();
  }

  /**
   * Whether the consumer works: connected, a member of its group (or legitimately waiting for an
   * assignment), polling recently, no stalled handler. For liveness and readiness probes.
   */
  health(options?: HealthOptions): ConsumerHealth {
    return this.observability.health(options);
  }

  /**
   * Graceful shutdown: stops intake, drains in-flight handlers, commits (confirmed by the broker),
   * leaves the group and disconnects, within `closeTimeoutMs`. Idempotent; safe before the first
   * assignment and from a SIGTERM handler. The pipeline completes afterwards.
   */
  close(): Promise<void> {
    return this.engine.close();
  }

  private runPartition<R>(
    partition: PartitionControl,
    handler: MessageHandler<R>,
    limiter: FairLimiter,
    partitionConcurrency: number,
  ): Observable<Processed<R>> {
    partition.trackRunning();
    return partition.messages$.pipe(
      // Messages still waiting when the partition is revoked are dropped, never run.
      dropOnEndMerge(
        (message: KafkaMessage) => {
          return limiter.run(() => {
            if (!partition.active) return EMPTY;
            partition.running += 1;
            return invoke(handler, message).pipe(
              map((result): Processed<R> => {
                partition.ack(message);
                return {
                  topic: message.topic,
                  partition: message.partition,
                  offset: message.offset,
                  generation: message.generation,
                  result,
                };
              }),
              catchError((err: unknown) => {
                this.onHandlerError(message, err);
                return EMPTY;
              }),
              finalize(() => {
                partition.running -= 1;
              }),
            );
          }, partition.ended);
        },
        partitionConcurrency,
        partition.ended,
      ),
      finalize(() => partition.pipelineDone()),
    );
  }

  private onHandlerError(message: KafkaMessage, err: unknown): void {
    const coordinates = {
      topic: message.topic,
      partition: message.partition,
      offset: message.offset,
    };
    const error = new HandlerError(
      `Handler failed on ${message.topic}[${message.partition}]@${message.offset}: ${err instanceof Error ? err.message : String(err)}`,
      coordinates,
      { cause: err },
    );
    if (message.signal.aborted) {
      // The partition was lost or its deadline passed: this result no longer counts anyway.
      this.logger.warn({ err, ...coordinates }, 'handler failed after its partition was released');
      return;
    }
    this.logger.error(
      { err, ...coordinates },
      'handler failed: committing what is contiguous and closing',
    );
    this.engine.failWith(error);
  }

  private warnOnSmallThreadPool(): void {
    startedConsumers += 1;
    const pool = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    // Each consumer keeps one consume(n) in flight on a libuv pool thread; leave room for dns/fs.
    if (!threadPoolWarned && startedConsumers >= pool) {
      threadPoolWarned = true;
      this.logger.warn(
        { consumers: startedConsumers, UV_THREADPOOL_SIZE: pool },
        'more consumers in this process than free libuv pool threads: set UV_THREADPOOL_SIZE ≥ consumers + 4 before Node starts, or consumers will slow each other down',
      );
    }
  }
}

/** Runs a handler and emits its result once when it succeeds (last value for an Observable). */
function invoke<R>(handler: MessageHandler<R>, message: KafkaMessage): Observable<R | undefined> {
  return new Observable<R | undefined>((subscriber) => {
    let result: ReturnType<MessageHandler<R>>;
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
