import { defer } from 'rxjs';
import type { Observable } from 'rxjs';
import type { Logger } from './logger';
import { inspect } from 'node:util';
import type { InspectOptions } from 'node:util';
import { resolveSettings } from './internal/settings/resolve-settings';
import type { ConsumerSettings, ReactiveConsumerOptions } from './config';
import { ConsumerEngine } from './internal/loop/consumer-engine';
import { firstAssignment } from './internal/loop/readiness';
import { closeConsumer } from './internal/loop/consumer-close';
import type { DeadLetterWriter } from './internal/process/dead-letter';
import type { Transactions } from './internal/transactions/transactions';
import type {
  OutputRecord,
  TransactionalHandler,
  TransactionalOptions,
} from './transactional-options';
import { batchMode, batchOptions } from './internal/process/batch-mode';
import * as pipelines from './internal/process/pipeline';
import type { PipelineHost } from './internal/process/pipeline';
import { requireHandler, singleMode } from './internal/process/processing-mode';
import type { ProcessingMode } from './internal/process/processing-mode';
import { transactionalMode } from './internal/process/transactional-mode';
import { resolveProcessOptions } from './process-options';
import type { ResolvedProcessOptions } from './process-options';
import { ConsumerObservability, attachObservability } from './internal/observe/observability';
import type { ConsumerHealth, HealthOptions } from './health';
import type { ConsumerMetrics } from './metrics';
import type { PartitionControl } from './internal/partition/partition-control';
import { checkThreadPool } from './internal/binding/thread-pool';
import type { ReactiveConsumerInternals } from './internal/settings/test-seams';
import { asLogger, defaultLogger } from './logger';
import { traceBatchHandler, traceHandler } from './tracing';
import type { HandlerTracer } from './tracing';
import type {
  ConsumerEvent,
  MessageHandler,
  PartitionCommitResult,
  PartitionStream,
  ProcessOptions,
  Processed,
  RebalanceEvent,
  StartPosition,
  TopicPartition,
  BatchHandler,
  BatchProcessOptions,
  HandlerResult,
  MessageBatch,
  ProcessedBatch,
} from './types';

/** @internal Test seams; not part of the public API. */
export type { ReactiveConsumerInternals } from './internal/settings/test-seams';

/**
 * A Kafka consumer whose partitions are RxJS streams, and whose rebalances drain in-flight work,
 * commit it (confirmed by the broker) and only then release the partitions.
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
   * Everything else worth knowing, as it happens: retries, skipped, dead-lettered and failed
   * messages, offset resets (records skipped), unavailable topics, transient client errors (hot;
   * completes when the consumer is closed).
   */
  readonly events$: Observable<ConsumerEvent>;
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
  /** Runs handler calls inside a tracing context (`options.tracing`). */
  private readonly tracer: HandlerTracer | undefined;
  /** Dead-letter writers of the running pipeline, closed by `close()` after the consumer. */
  private readonly deadLetterWriters = new Set<DeadLetterWriter>();
  /** The transactional unit of a running processTransactional(), closed after the consumer. */
  private transactions: Transactions | undefined;
  private readiness: Promise<void> | undefined;
  private readonly pipelineHost: PipelineHost;

  constructor(options: ReactiveConsumerOptions);
  /** @internal With test seams (fakes of the client, the store, the jitter source). */
  constructor(options: ReactiveConsumerOptions, internals: ReactiveConsumerInternals);
  constructor(
    options: ReactiveConsumerOptions,
    private readonly internals: ReactiveConsumerInternals = {},
  ) {
    this.settings = resolveSettings(options);
    this.tracer = options.tracing;
    const base = options.logger ? asLogger(options.logger) : defaultLogger();
    this.logger = base.child({ component: 'reactive-rdkafka', group: this.settings.groupId });
    this.engine = new ConsumerEngine(
      this.settings,
      this.logger,
      internals.consumerFactory,
      internals.storeFactory,
    );
    this.rebalances$ = this.engine.rebalances.asObservable();
    this.events$ = this.engine.events.asObservable();
    this.observability = new ConsumerObservability(this.engine, this.settings, this.logger);
    this.metrics$ = this.observability.metrics$();
    attachObservability(this, this.observability);
    pipelines.closeOnAbort(options.signal, this.logger, () => this.close());
    this.partitions$ = pipelines.partitionStreams(this.engine, {
      attached: () => this.attached,
      attach: () => void (this.attached = true),
      started: () => checkThreadPool(this.logger, this.rebalances$),
    });
    this.pipelineHost = {
      settings: this.settings,
      logger: this.logger,
      engine: this.engine,
      partitions: this.partitions$ as Observable<PartitionControl>,
      attached: () => this.attached,
      deadLetterWriters: this.deadLetterWriters,
      transactions: () => this.transactions,
      close: () => this.close(),
      internals,
    };
  }

  /**
   * Runs `handler` for every message, at most `concurrency` at once across partitions (a fair
   * pool) and `partitionConcurrency` within one partition (1 keeps offset order). A message counts
   * as processed when the handler's Promise resolves, its Observable completes, or it returns a
   * plain value.
   *
   * Keys and values can be decoded first (`key`/`value`: `'string'`, `'json'`, a function). A
   * failing handler is retried with backoff (`retry`); a message that fails for good, or whose
   * payload cannot be decoded, follows `onFailure`:
   * - `'stop'` (default): commit what is contiguous before it, close, and error the returned
   *   Observable with a {@link HandlerError} (or {@link DeserializationError}) carrying its
   *   coordinates — nothing after it is committed;
   * - `'dead-letter'`: write it to `deadLetter.topic`, confirmed by the broker, then count it as done
   *   (if the write fails for good: stop with a {@link DeadLetterError});
   * - `'skip'`: log it at error level, count it, go on.
   *
   * Emits a {@link Processed} per finished message; completes after `close()`.
   *
   * Type the decoded value with the first type parameter (`process<Order>(…, { value: 'json' })`),
   * or pass a deserializer declared beforehand (`const value = deserializers.json(isOrder)`).
   */
  process<V = Buffer | null, R = unknown, K = Buffer | null>(
    handler: MessageHandler<R, K, V>,
    options: ProcessOptions<K, V> = {},
  ): Observable<Processed<R>> {
    requireHandler(handler);
    return this.pipeline(
      singleMode(
        this.observability.instrument(traceHandler(handler, this.settings.groupId, this.tracer)),
      ),
      resolveProcessOptions(options as ProcessOptions<unknown, unknown>, this.settings),
    );
  }

  /**
   * Like {@link process}, with a handler that receives each partition's messages in batches: at
   * most `maxSize` messages (default 100), gathered for at most `maxWaitMs` (default 100 ms) after
   * the first one. Batches of one partition are in offset order and, with `partitionConcurrency: 1`
   * (default), run one at a time. A batch counts as processed — every message in it — when the
   * handler succeeds; a failure retries the whole batch, then the failure policy applies to all of
   * its messages (`stop` names the batch's first offset); a `BatchItemFailure` thrown for one
   * message fails that one alone (docs/failure-handling.md). A revoke drains the batch in flight;
   * messages still being gathered, or batches not started, are left to the next owner.
   * A message whose key or value cannot be decoded is taken out of its batch and handled alone
   * (under `onFailure: 'stop'`, the messages before it in its batch run first and are committed).
   * `ordering: 'key'` is rejected (a batch holds many keys).
   */
  processBatch<V = Buffer | null, R = unknown, K = Buffer | null>(
    handler: BatchHandler<R, K, V>,
    options: BatchProcessOptions<K, V> = {},
  ): Observable<ProcessedBatch<R>> {
    requireHandler(handler);
    const { bounds, rest } = batchOptions(options);
    const instrumented = this.observability.instrument(
      traceBatchHandler(
        (batch: MessageBatch<K, V>) => handler(batch) as HandlerResult<R>,
        this.settings.groupId,
        this.tracer,
      ),
    );
    return this.pipeline(
      batchMode<R, K, V>(bounds, instrumented),
      resolveProcessOptions(rest as ProcessOptions<unknown, unknown>, this.settings),
    );
  }

  /**
   * Exactly once from topic to topic: runs `handler` for every message and writes the records it
   * returns, together with the message's offset, in Kafka transactions (KIP-98, with the consumer's
   * group metadata: KIP-447). A `read_committed` reader of the outputs sees each input's records
   * exactly once — across rebalances, restarts and crashes (SIGKILL) — and the group's committed
   * offsets move only with them. Side effects outside Kafka are not covered (at least once).
   *
   * The library owns one transactional producer for this consumer; `transactional.id` is given
   * (`transactionalId`) or derived (`${transactionalIdPrefix ?? group.id}-${instanceId}`): unique
   * among live instances, stable across restarts of one (see docs/exactly-once.md).
   *
   * - Records of one input partition are written in its offset order (a message that finished out
   *   of order waits for those below it); a message counts once its records are in the open
   *   transaction. A transaction holds at most `maxMessages` messages and stays open at most
   *   `maxMs`; one commits at a time.
   * - A revoke drains, commits the open transaction (outputs and offsets, confirmed), then
   *   unassigns; a lost partition, a refused produce or a failed commit aborts it, and the
   *   partitions that had work in it go back and redo it (nothing of the aborted transaction ever
   *   counts); a fenced producer stops the consumer with a {@link ProducerFencedError}.
   * - `concurrency`, `partitionConcurrency`, `ordering`, `retry`, `key`/`value` work as in
   *   {@link process}; `onFailure` is `'stop'` or `'skip'` (no dead-letter: that write would not be
   *   in the transaction); `rememberCompleted` and `isolation.level=read_uncommitted` are refused.
   * - Emits a {@link Processed} per finished message (its `result` the records), before its
   *   transaction commits; completes after `close()`.
   */
  processTransactional<V = Buffer | null, K = Buffer | null>(
    handler: TransactionalHandler<K, V>,
    options: TransactionalOptions<K, V> = {},
  ): Observable<Processed<readonly OutputRecord[]>> {
    requireHandler(handler);
    const traced = traceHandler(handler, this.settings.groupId, this.tracer, true);
    const { resolved, unit, mode } = transactionalMode(traced as typeof handler, options, {
      settings: this.settings,
      logger: this.logger,
      engine: this.engine,
      observability: this.observability,
      producerFactory: this.internals.transactionalProducerFactory,
      tracer: this.tracer,
    });
    const subscribed = pipelines.warnIfNeverSubscribed(this.pipelineHost, 'processTransactional()');
    return defer(() => {
      subscribed();
      // Only the subscription that runs the pipeline installs the transactions.
      if (!this.attached && this.engine.lifecycle.kind === 'idle' && !this.transactions) {
        this.transactions = unit;
        this.engine.commitThrough(unit);
        this.observability.transactions = () => unit.stats();
        void unit.start();
      }
      return this.pipeline(mode, resolved.process);
    });
  }

  private pipeline<R, K, V, O>(mode: ProcessingMode<R, K, V, O>, resolved: ResolvedProcessOptions) {
    return pipelines.runPipeline(this.pipelineHost, mode, resolved);
  }

  /**
   * Moves an owned partition to `position` while running (replay, or skip ahead): messages of it
   * already buffered are dropped, handlers in flight on it are aborted (their results no longer
   * count), and its stream is replaced by a new one starting at the new offset — `partitions$` emits
   * it, `process()` runs it. Nothing past the new position is committed from before the seek; the
   * new position itself is committed at the next commit even if nothing is processed. Resolves with
   * the offset sought to; rejects with `NotAssignedError` for a partition not owned now. Seeks of
   * one partition called together apply in call order (the last one wins).
   */
  seek(partition: TopicPartition, position: StartPosition): Promise<number> {
    return this.engine.seek(partition, position);
  }

  /**
   * Commits what has been processed now, whatever `commitIntervalMs` says (with
   * `processTransactional()`: commits the open transaction), and resolves once the broker confirmed
   * each owned partition's contiguous offset — one result per partition (`committed` or
   * `unchanged`). Rejects with a `CommitError` naming the partitions not confirmed within
   * `commitTimeoutMs` (or released first), and with a `ClosedError` once closing.
   */
  commit(): Promise<PartitionCommitResult[]> {
    return this.engine.commit();
  }

  /**
   * Stops fetching the given partitions (all owned ones and every later assignment, without an
   * argument) until `resume()`. Handlers already running finish; rebalances still drain and commit.
   * The pause outlives rebalances: a partition paused here is paused again when reassigned.
   */
  pause(partitions?: readonly TopicPartition[]): void {
    this.engine.pause(partitions);
  }

  /**
   * Undoes `pause()` (for every partition, without an argument). A partition resumed by name
   * after `pause()` of everything stays resumed when it is assigned again (until the next `pause()`
   * of everything); other later assignments still start paused. A partition the library paused for
   * backpressure resumes only once its buffer drained.
   */
  resume(partitions?: readonly TopicPartition[]): void {
    this.engine.resume(partitions);
  }

  /** The partitions paused by `pause()` (owned now or not). */
  paused(): TopicPartition[] {
    return this.engine.pausedByUser();
  }

  /**
   * The fetch position (next offset to read) of each partition this consumer owns now:
   * librdkafka's, or — where it knows none (after a seek) or runs ahead (records held back to be
   * fetched again) — one past the last message the partition's stream was handed; `offset` is
   * undefined while neither is known (an assignment that started from its committed offset and
   * was handed nothing yet).
   */
  positions(): { topic: string; partition: number; offset: number | undefined }[] {
    return this.engine.positions();
  }

  /**
   * What `JSON.stringify(consumer)` shows: its group, topics, state and settings, with every
   * secret-bearing setting (`sasl.password`, `ssl.key.pem`, …) as `[redacted]`.
   */
  toJSON(): {
    groupId: string;
    topics: readonly string[];
    state: string;
    settings: ConsumerSettings;
  } {
    return {
      groupId: this.settings.groupId,
      topics: this.settings.topics,
      state: this.engine.lifecycle.kind,
      settings: this.settings,
    };
  }

  /** What `util.inspect(consumer)` (and `console.log`) shows: {@link toJSON}'s view, never the internals. */
  [inspect.custom](_depth: number, options: InspectOptions): string {
    return `ReactiveConsumer ${inspect(this.toJSON(), options)}`;
  }

  /**
   * Resolves once the consumer has joined its group and received its first assignment (possibly
   * empty, when the group has more members than partitions): for a readiness probe or a start-up
   * log line. It does not start the consumer (subscribing to `process()` or `partitions$` does).
   * Rejects with the consumer's error, or a `ClosedError`, if it ends before that.
   */
  ready(): Promise<void> {
    this.readiness ??= firstAssignment(this.engine);
    return this.readiness;
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
   * Graceful shutdown: stops intake, waits for revokes already in flight, drains in-flight
   * handlers, commits (confirmed by the broker), leaves the group and disconnects, within
   * `timeoutMs` (default `closeTimeoutMs`, 25 s: inside a Kubernetes pod's 30 s SIGTERM grace
   * period). A native call that cannot be cut short (a `sendOffsetsToTransaction` stuck on an
   * unreachable transaction coordinator) is left to finish: the disconnect (and, with transactions,
   * the abort) happens once it returned, after this promise resolved (docs/exactly-once.md).
   * Idempotent: a later call returns the same promise; a sooner `timeoutMs` than the first call's
   * deadline holds (a SIGTERM after an unsubscribe must fit its grace period). Safe before the
   * first assignment and from a SIGTERM handler. Unsubscribing from `process()` /
   * `processBatch()` does the same; the pipeline completes afterwards. From inside a handler, do
   * not await it: the close drains that handler too, so the await lasts until the drain deadline.
   */
  async close(options: { timeoutMs?: number } = {}): Promise<void> {
    await closeConsumer(options, {
      settings: this.settings,
      engine: this.engine,
      transactions: this.transactions,
      deadLetterWriters: this.deadLetterWriters,
    });
  }

  /** `await using consumer = new ReactiveConsumer(…)` closes it (gracefully) at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
