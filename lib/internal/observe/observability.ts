/**
 * The observability of one consumer: counters and histograms fed by the engine's hooks, the
 * rebalance events and instrumented handlers; librdkafka's statistics (lag); stalled-handler
 * detection; diagnostics_channel publishing; the `metrics()` snapshot, the `metrics$` stream and
 * `health()`. Reads engine state, never changes it. The per-invocation instrumentation of handlers
 * (timing, stalls, handler channels) is handler-instrumentation.ts; this file counts what it reports.
 */
import { Observable } from 'rxjs';
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { channels, publish } from '../../diagnostics';
import { evaluateHealth } from '../../health';
import type { ConsumerHealth, HealthOptions } from '../../health';
import type {
  ConsumerMetrics,
  PartitionMetrics,
  StalledHandler,
  TransactionMetrics,
} from '../../metrics';
import type { HandlerResult, RebalanceEvent, TopicPartition } from '../../types';
import type { ConsumerEngine } from '../loop/consumer-engine';
import type { CommitKind, EngineObserver } from './engine-observer';
import { Histogram, LATENCY_BUCKETS_SECONDS } from './histogram';
import { parseClientStats } from '../binding/librdkafka-stats';
import type { ClientStats } from '../binding/librdkafka-stats';
import type { TopicPartitionOffset } from '../binding/rdkafka';
import { errorMessage, tpKey } from '../binding/rdkafka';
import { bindingInfo } from '../binding/binding';
import { RebalanceTally } from './rebalance-tally';
import type { RebalancePhase } from './rebalance-tally';
import { HandlerInstrumentation } from './handler-instrumentation';
import type { HandledMessage } from './handler-instrumentation';
import type { StallDetector } from './stall-detector';
import { timerDelay } from '../loop/timers';

export type { HandledMessage } from './handler-instrumentation';

export type { RebalancePhase } from './rebalance-tally';

/** Individual observations, for adapters that keep their own histograms (Prometheus). */
export type Observation =
  | { readonly kind: 'handler'; readonly topic: string; readonly ms: number; readonly ok: boolean }
  | {
      readonly kind: 'commit';
      readonly commit: CommitKind;
      readonly ms: number;
      readonly ok: boolean;
    }
  | { readonly kind: 'rebalance'; readonly phase: RebalancePhase; readonly ms: number };

/** Cumulative counters of one partition (kept across assignments). */
export interface PartitionCounters {
  readonly topic: string;
  readonly partition: number;
  received: number;
  processed: number;
  failed: number;
  stalls: number;
}

const attached = new WeakMap<object, ConsumerObservability>();

/** Links a consumer to its observability, for adapters given only the consumer. */
export function attachObservability(consumer: object, observability: ConsumerObservability): void {
  attached.set(consumer, observability);
}

/** The observability of a consumer (undefined for anything else). */
export function observabilityOf(consumer: object): ConsumerObservability | undefined {
  return attached.get(consumer);
}

export class ConsumerObservability implements EngineObserver {
  /** Set by processTransactional(): the transactional unit's counters. */
  transactions: (() => TransactionMetrics) | undefined;
  private readonly counters = new Map<string, PartitionCounters>();
  private lastCounters: PartitionCounters | undefined;
  private received_ = 0;
  private processed = 0;
  private failed = 0;
  private readonly handlerDuration = new Histogram(LATENCY_BUCKETS_SECONDS);
  private commitsOk = 0;
  private commitsFailed = 0;
  private readonly commitDuration = new Histogram(LATENCY_BUCKETS_SECONDS);
  private readonly rebalance = new RebalanceTally((phase, ms) =>
    this.emitObservation({ kind: 'rebalance', phase, ms }),
  );
  private stats: ClientStats | undefined;
  private statsAt = 0;
  private readonly statsIntervalMs: number;
  /** Times handler invocations, watches them for stalls; what they count lands here. */
  private readonly handlers: HandlerInstrumentation;
  /** The handlers' stall detector, read by the snapshots. */
  private readonly stalls: StallDetector;
  private readonly observers = new Set<(o: Observation) => void>();
  private readonly clientId: string | undefined;

  constructor(
    private readonly engine: ConsumerEngine,
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
  ) {
    const config = settings.globalConfig as Record<string, unknown>;
    this.clientId = typeof config['client.id'] === 'string' ? config['client.id'] : undefined;
    this.statsIntervalMs = Number(config['statistics.interval.ms'] ?? 0) || 0;
    this.handlers = new HandlerInstrumentation(settings, this.clientId, logger, {
      ended: (topic, partition, ms, ok) => this.handlerEnded(topic, partition, ms, ok),
      stalled: (topic, partition) => {
        this.partitionCounters(topic, partition).stalls += 1;
      },
    });
    this.stalls = this.handlers.stalls;
    engine.observer = this;
    engine.rebalances.subscribe({
      next: (e) => this.onRebalance(e),
      complete: () => this.stalls.dispose(),
    });
    engine.client.raw.on('event.stats', (e: unknown) => this.onStats(e));
  }

  // ---------------------------------------------------------------------------------------------
  // Engine hooks

  received(topic: string, partition: number): void {
    this.received_ += 1;
    this.partitionCounters(topic, partition).received += 1;
  }

  commit(
    kind: CommitKind,
    offsets: readonly TopicPartitionOffset[],
    durationMs: number,
    err?: unknown,
  ): void {
    const ok = err === undefined;
    if (ok) this.commitsOk += 1;
    else this.commitsFailed += 1;
    this.commitDuration.observe(durationMs);
    this.emitObservation({ kind: 'commit', commit: kind, ms: durationMs, ok });
    publish(channels.commit, () => ({
      group: this.settings.groupId,
      clientId: this.clientId,
      kind,
      offsets: offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset })),
      ok,
      durationMs,
      error: err,
    }));
  }

  private partitionCounters(topic: string, partition: number): PartitionCounters {
    const last = this.lastCounters;
    if (last !== undefined && last.partition === partition && last.topic === topic) return last;
    const key = tpKey(topic, partition);
    let c = this.counters.get(key);
    if (c === undefined) {
      c = { topic, partition, received: 0, processed: 0, failed: 0, stalls: 0 };
      this.counters.set(key, c);
    }
    this.lastCounters = c;
    return c;
  }

  // ---------------------------------------------------------------------------------------------
  // Rebalances

  private onRebalance(e: RebalanceEvent): void {
    this.rebalance.observe(e);
    publish(channels.rebalance, () => ({
      group: this.settings.groupId,
      clientId: this.clientId,
      event: e,
    }));
  }

  // ---------------------------------------------------------------------------------------------
  // librdkafka statistics

  private onStats(raw: unknown): void {
    let json: unknown;
    try {
      const text = (raw as { message?: unknown } | undefined)?.message;
      json = typeof text === 'string' ? JSON.parse(text) : raw;
    } catch (err) {
      this.logger.debug({ err }, 'unparsable librdkafka statistics ignored');
      return;
    }
    const stats = parseClientStats(json, tpKey);
    if (stats === undefined) return;
    this.stats = stats;
    this.statsAt = Date.now();
    publish(channels.stats, () => ({
      group: this.settings.groupId,
      clientId: this.clientId,
      stats: json,
    }));
  }

  /** The last statistics report, if recent enough to describe the present. */
  private freshStats(now: number): ClientStats | undefined {
    if (this.stats === undefined || this.statsIntervalMs <= 0) return undefined;
    return now - this.statsAt <= 3 * this.statsIntervalMs + 1000 ? this.stats : undefined;
  }

  // ---------------------------------------------------------------------------------------------
  // Handlers

  /**
   * Wraps a handler so each invocation is counted, timed, watched for stalls and published on the
   * handler diagnostics channels (see {@link HandlerInstrumentation.instrument}).
   */
  instrument<M extends HandledMessage, R>(
    handler: (message: M) => HandlerResult<R>,
  ): (message: M) => HandlerResult<R> {
    return this.handlers.instrument(handler);
  }

  /** An instrumented invocation ended, ok or failed: counted, timed, observed. */
  private handlerEnded(topic: string, partition: number, ms: number, ok: boolean): void {
    const c = this.partitionCounters(topic, partition);
    if (ok) {
      this.processed += 1;
      c.processed += 1;
    } else {
      this.failed += 1;
      c.failed += 1;
    }
    this.handlerDuration.observe(ms);
    if (this.observers.size > 0) this.emitObservation({ kind: 'handler', topic, ms, ok });
  }

  // ---------------------------------------------------------------------------------------------
  // Adapters

  /** The consumer's `group.id`. */
  get group(): string {
    return this.settings.groupId;
  }

  /** Registers a listener of individual observations; returns its removal. */
  observe(listener: (o: Observation) => void): () => void {
    this.observers.add(listener);
    return () => this.observers.delete(listener);
  }

  private emitObservation(o: Observation): void {
    for (const listener of this.observers) {
      try {
        listener(o);
      } catch (err) {
        this.logger.warn({ err: errorMessage(err) }, 'a metrics listener threw; observation lost');
      }
    }
  }

  /** Cumulative counters of every partition ever owned. */
  partitionTotals(): readonly PartitionCounters[] {
    return [...this.counters.values()];
  }

  // ---------------------------------------------------------------------------------------------
  // Snapshots

  metrics(): ConsumerMetrics {
    const now = Date.now();
    const stats = this.stats;
    const partitions: PartitionMetrics[] = [];
    const paused: TopicPartition[] = [];
    let inFlight = 0;
    let buffered = 0;
    for (const c of this.engine.controls()) {
      const counters = this.counters.get(c.key);
      const s = stats?.partitions.get(c.key);
      const running = c.inFlight;
      const waiting = Math.max(0, c.ledger.unfinished - running);
      inFlight += running;
      buffered += waiting;
      if (c.paused) paused.push({ topic: c.topic, partition: c.partition });
      partitions.push({
        topic: c.topic,
        partition: c.partition,
        generation: c.generation,
        state: c.state,
        received: counters?.received ?? 0,
        processed: counters?.processed ?? 0,
        failed: counters?.failed ?? 0,
        inFlight: running,
        buffered: waiting,
        bufferedBytes: c.bufferedBytes,
        paused: c.paused,
        lastCommitted: c.lastCommitted,
        lag: s?.lag,
        highWatermark: s?.highWatermark,
        committedOffset: s?.committedOffset,
      });
    }
    return {
      at: now,
      group: this.settings.groupId,
      state: this.engine.lifecycle.kind,
      messages: {
        received: this.received_,
        processed: this.processed,
        failed: this.failed,
        lateDropped: this.engine.lateMessagesDropped,
      },
      handlerDuration: this.handlerDuration.snapshot(),
      inFlight,
      buffered,
      partitions,
      pausedPartitions: paused,
      commits: {
        ok: this.commitsOk,
        failed: this.commitsFailed,
        duration: this.commitDuration.snapshot(),
      },
      rebalances: this.rebalance.snapshot(this.engine.fetchWakes),
      stalledHandlers: this.stalledHandlers(),
      stalls: this.stalls.stallsTotal,
      lastPollAt: this.engine.lastPollAt,
      statsAt: this.statsAt,
      ...(this.transactions === undefined ? {} : { transactions: this.transactions() }),
    };
  }

  stalledHandlers(): StalledHandler[] {
    return this.stalls.stalled();
  }

  /** Cold: per subscriber, a snapshot every `metricsIntervalMs` and a last one when the consumer closes. */
  metrics$(): Observable<ConsumerMetrics> {
    return new Observable<ConsumerMetrics>((subscriber) => {
      const timer = setInterval(
        () => subscriber.next(this.metrics()),
        timerDelay(this.settings.metricsIntervalMs),
      );
      timer.unref();
      const sub = this.engine.rebalances.subscribe({
        complete: () => {
          subscriber.next(this.metrics());
          subscriber.complete();
        },
      });
      return () => {
        clearInterval(timer);
        sub.unsubscribe();
      };
    });
  }

  health(options: HealthOptions = {}): ConsumerHealth {
    const now = Date.now();
    const stats = this.freshStats(now);
    const maxPollAgeMs =
      options.maxPollAgeMs ?? Math.min(30_000, Math.floor(this.settings.maxPollIntervalMs / 2));
    let clientConnected = false;
    try {
      clientConnected = this.engine.client.raw.isConnected();
    } catch {
      clientConnected = false;
    }
    return evaluateHealth({
      now,
      state: this.engine.lifecycle.kind,
      clientConnected,
      assignedPartitions: this.engine.controls().length,
      rebalancing: this.engine.rebalancing,
      waitingSince: Math.max(this.rebalance.waitingSince, this.engine.runningSince),
      maxPollIntervalMs: this.settings.maxPollIntervalMs,
      lastPollAt: this.engine.lastPollAt,
      maxPollAgeMs,
      membershipLost: this.engine.membershipLost,
      stats,
      stalledHandlers: this.stalledHandlers(),
      stallThresholdMs: this.stalls.thresholdMs,
      binding: bindingInfo(
        this.settings.binding,
        this.engine.client.raw,
        this.settings.sharedBatchBuffers,
      ),
    });
  }
}
