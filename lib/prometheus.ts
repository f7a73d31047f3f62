/**
 * An optional Prometheus adapter: registers a consumer's metrics on a user-supplied `prom-client`
 * registry. `prom-client` is an optional peer dependency, loaded only when this function is called
 * (or passed in as `client`). Metric names and labels: docs/observability.md.
 */
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';
import { ConfigError } from './errors';
import { LATENCY_BUCKETS_SECONDS, REBALANCE_BUCKETS_SECONDS } from './internal/observe/histogram';
import { observabilityOf } from './internal/observe/observability';
import type { ConsumerObservability, Observation } from './internal/observe/observability';
import type { ConsumerMetrics, PartitionMetrics, TransactionMetrics } from './metrics';
import type { ReactiveConsumer } from './reactive-consumer';

/**
 * The subset of a prom-client `Registry` the adapter uses (declared here so that the library's
 * types do not depend on prom-client being installed).
 */
export interface PrometheusRegistry {
  /** prom-client's `Registry#getSingleMetric`. */
  getSingleMetric(name: string): unknown;
  /** prom-client's `Registry#removeSingleMetric`. */
  removeSingleMetric(name: string): void;
  /** prom-client's `Registry#registerMetric`. */
  registerMetric(metric: never): void;
}

/** Options of {@link registerPrometheusMetrics}. */
export interface PrometheusOptions {
  /** The prom-client `Registry` to register on (`new Registry()` or `register`, the global one). */
  registry: PrometheusRegistry;
  /** Prefix of every metric name. @default 'kafka_consumer_' */
  prefix?: string;
  /**
   * The prom-client module to build metrics with; pass it when the application's prom-client is not
   * the one this package would `require`.
   * @default require('prom-client')
   */
  client?: unknown;
}

type Labels = Record<string, string | number>;
type Prom = typeof PromClient;
type CounterT = PromClient.Counter<string>;
type GaugeT = PromClient.Gauge<string>;
type HistogramT = PromClient.Histogram<string>;

/** The metrics of one (registry, prefix), shared by every consumer registered on it. */
interface Shared {
  readonly consumers: Set<ConsumerObservability>;
  readonly names: string[];
  readonly handlerDuration: HistogramT;
  readonly commitDuration: HistogramT;
  readonly phaseDuration: HistogramT;
}

const shared = new WeakMap<object, Map<string, Shared>>();

function loadClient(client: unknown): Prom {
  if (client !== undefined) return client as Prom;
  try {
    return createRequire(__filename)('prom-client') as Prom;
  } catch (err) {
    throw new ConfigError(
      'Expected the optional peer dependency `prom-client` to be installed (npm install prom-client), or passed as `client`',
      'client',
      { cause: err },
    );
  }
}

/**
 * Registers the consumer's metrics on a prom-client registry. Counters and gauges are read from
 * `consumer.metrics()` at scrape time; histograms are observed as events happen. Several consumers
 * may share one registry (values of consumers with the same labels add up). Returns a function
 * that unregisters the consumer (and removes the metrics once no consumer is left).
 *
 * @example
 * import { Registry } from 'prom-client';
 * const registry = new Registry();
 * registerPrometheusMetrics(consumer, { registry });
 * // GET /metrics → res.end(await registry.metrics())
 */
export function registerPrometheusMetrics(
  consumer: ReactiveConsumer,
  options: PrometheusOptions,
): () => void {
  const obs = observabilityOf(consumer);
  if (obs === undefined) {
    throw new ConfigError('Expected `consumer` to be a ReactiveConsumer', 'consumer');
  }
  const registry = options?.registry as unknown as PromClient.Registry | undefined;
  if (
    typeof registry !== 'object' ||
    registry === null ||
    typeof registry.registerMetric !== 'function'
  ) {
    throw new ConfigError('Expected `registry` to be a prom-client Registry', 'registry');
  }
  const prefix = options.prefix ?? 'kafka_consumer_';
  if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix)) {
    throw new ConfigError(
      `Expected \`prefix\` to be a valid Prometheus metric name prefix, got ${JSON.stringify(prefix)}`,
      'prefix',
    );
  }
  let byPrefix = shared.get(registry);
  if (byPrefix === undefined) {
    byPrefix = new Map();
    shared.set(registry, byPrefix);
  }
  let metrics = byPrefix.get(prefix);
  if (metrics === undefined) {
    metrics = create(loadClient(options.client), registry, prefix);
    byPrefix.set(prefix, metrics);
  }
  const m = metrics;
  m.consumers.add(obs);
  const group = consumer.settings.groupId;
  const stop = obs.observe((o: Observation) => {
    switch (o.kind) {
      case 'handler':
        m.handlerDuration.observe(
          { group, topic: o.topic, result: o.ok ? 'ok' : 'failed' },
          o.ms / 1000,
        );
        break;
      case 'commit':
        m.commitDuration.observe(
          { group, kind: o.commit, result: o.ok ? 'ok' : 'failed' },
          o.ms / 1000,
        );
        break;
      case 'rebalance':
        m.phaseDuration.observe({ group, phase: o.phase }, o.ms / 1000);
        break;
      default: {
        const never: never = o;
        throw new Error(`unknown observation ${String(never)}`);
      }
    }
  });
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    stop();
    m.consumers.delete(obs);
    if (m.consumers.size === 0) {
      for (const name of m.names) registry.removeSingleMetric(name);
      byPrefix.delete(prefix);
    }
  };
}

function create(prom: Prom, registry: PromClient.Registry, p: string): Shared {
  const consumers = new Set<ConsumerObservability>();
  const names: string[] = [];
  // One scrape reads every metric in turn, within one turn of the event loop: take one snapshot
  // per consumer per scrape, forgotten at the next turn.
  const snapshots = new Map<ConsumerObservability, ConsumerMetrics>();
  const snapshot = (obs: ConsumerObservability): ConsumerMetrics => {
    let m = snapshots.get(obs);
    if (m === undefined) {
      m = obs.metrics();
      if (snapshots.size === 0) setImmediate(() => snapshots.clear());
      snapshots.set(obs, m);
    }
    return m;
  };
  const tp = ['group', 'topic', 'partition'];
  const name = (n: string): string => {
    const full = p + n;
    if (registry.getSingleMetric(full) !== undefined) {
      throw new ConfigError(
        `A metric named ${full} is already registered on this registry; use another \`prefix\``,
        'prefix',
      );
    }
    names.push(full);
    return full;
  };

  // Counters and gauges are recomputed from the snapshots at every scrape.
  const counter = (
    n: string,
    help: string,
    labelNames: string[],
    fill: (add: (labels: Labels, value: number) => void, obs: ConsumerObservability) => void,
  ): CounterT =>
    new prom.Counter({
      name: name(n),
      help,
      labelNames,
      registers: [registry],
      collect(this: CounterT) {
        this.reset();
        for (const obs of consumers) fill((labels, v) => this.inc(labels, v), obs);
      },
    });
  const gauge = (
    n: string,
    help: string,
    labelNames: string[],
    fill: (add: (labels: Labels, value: number) => void, obs: ConsumerObservability) => void,
  ): GaugeT =>
    new prom.Gauge({
      name: name(n),
      help,
      labelNames,
      registers: [registry],
      collect(this: GaugeT) {
        this.reset();
        for (const obs of consumers) fill((labels, v) => this.inc(labels, v), obs);
      },
    });

  const perPartition =
    (field: 'received' | 'processed' | 'failed' | 'stalls') =>
    (add: (labels: Labels, value: number) => void, obs: ConsumerObservability): void => {
      const group = obs.group;
      for (const c of obs.partitionTotals())
        add({ group, topic: c.topic, partition: c.partition }, c[field]);
    };

  counter(
    'messages_received_total',
    'Messages handed to a partition pipeline.',
    tp,
    perPartition('received'),
  );
  counter(
    'messages_processed_total',
    'Handler invocations that succeeded (process()).',
    tp,
    perPartition('processed'),
  );
  counter(
    'messages_failed_total',
    'Handler invocations that failed (process()).',
    tp,
    perPartition('failed'),
  );
  counter(
    'handler_stalls_total',
    'Handlers that ran longer than stallThresholdMs.',
    tp,
    perPartition('stalls'),
  );
  counter(
    'late_messages_dropped_total',
    'Messages of partitions not (or no longer) assigned, dropped without processing.',
    ['group'],
    (add, obs) => add({ group: obs.group }, snapshot(obs).messages.lateDropped),
  );
  counter(
    'commits_total',
    'Commit requests by result (ok: confirmed by the broker).',
    ['group', 'result'],
    (add, obs) => {
      const c = snapshot(obs).commits;
      add({ group: obs.group, result: 'ok' }, c.ok);
      add({ group: obs.group, result: 'failed' }, c.failed);
    },
  );
  /** A counter of `processTransactional()`'s transactions: `pick` gives its value per label set. */
  const transactionCounter = (
    n: string,
    help: string,
    labelNames: string[],
    pick: (t: TransactionMetrics) => readonly [Labels, number][],
  ): CounterT =>
    counter(n, help, ['group', ...labelNames], (add, obs) => {
      const t = snapshot(obs).transactions;
      if (t === undefined) return;
      for (const [labels, value] of pick(t)) add({ group: obs.group, ...labels }, value);
    });
  transactionCounter(
    'transactions_total',
    'processTransactional() transactions by result (committed: confirmed by the broker; aborted).',
    ['result'],
    (t) => [
      [{ result: 'committed' }, t.committed],
      [{ result: 'aborted' }, t.aborted],
    ],
  );
  transactionCounter(
    'transaction_messages_total',
    'Input messages in committed and in aborted transactions (processTransactional()).',
    ['result'],
    (t) => [
      [{ result: 'committed' }, t.messages],
      [{ result: 'aborted' }, t.abortedMessages],
    ],
  );
  transactionCounter(
    'transaction_records_total',
    'Output records in committed and in aborted transactions (processTransactional()).',
    ['result'],
    (t) => [
      [{ result: 'committed' }, t.records],
      [{ result: 'aborted' }, t.abortedRecords],
    ],
  );
  transactionCounter(
    'transaction_refused_records_total',
    'Output records the producer or the broker refused, each aborting its transaction (processTransactional()).',
    [],
    (t) => [[{}, t.refusedRecords]],
  );
  transactionCounter(
    'transaction_skipped_inputs_total',
    "Inputs skipped (onFailure: 'skip') because an output record of theirs kept being refused (processTransactional()).",
    [],
    (t) => [[{}, t.skippedInputs]],
  );
  transactionCounter(
    'transaction_producers_recreated_total',
    'Transactional producers recreated with the same transactional.id after librdkafka refused an abort fatally (processTransactional()).',
    [],
    (t) => [[{}, t.recreatedProducers]],
  );
  counter(
    'rebalances_total',
    'Rebalance outcomes: assigned, revoked (drained, committed, released) or lost.',
    ['group', 'type'],
    (add, obs) => {
      const r = snapshot(obs).rebalances;
      add({ group: obs.group, type: 'assigned' }, r.assignments);
      add({ group: obs.group, type: 'revoked' }, r.revokes);
      add({ group: obs.group, type: 'lost' }, r.losses);
    },
  );
  counter(
    'rebalance_partitions_total',
    'Partitions moved by rebalances: assigned, revoked or lost.',
    ['group', 'type'],
    (add, obs) => {
      const r = snapshot(obs).rebalances;
      add({ group: obs.group, type: 'assigned' }, r.partitionsAssigned);
      add({ group: obs.group, type: 'revoked' }, r.partitionsRevoked);
      add({ group: obs.group, type: 'lost' }, r.partitionsLost);
    },
  );
  counter(
    'drain_timeouts_total',
    'Revokes whose drain deadline (drainTimeoutMs) passed.',
    ['group'],
    (add, obs) => add({ group: obs.group }, snapshot(obs).rebalances.drainTimeouts),
  );

  const eachPartition =
    (value: (pm: PartitionMetrics) => unknown) =>
    (add: (labels: Labels, value: number) => void, obs: ConsumerObservability): void => {
      for (const pm of snapshot(obs).partitions) {
        const v = value(pm);
        if (typeof v === 'number')
          add({ group: obs.group, topic: pm.topic, partition: pm.partition }, v);
      }
    };
  gauge('assigned_partitions', 'Partitions owned now.', ['group'], (add, obs) =>
    add({ group: obs.group }, snapshot(obs).partitions.length),
  );
  gauge(
    'in_flight_messages',
    'Handlers running now per partition.',
    tp,
    eachPartition((pm) => pm.inFlight),
  );
  gauge(
    'buffered_messages',
    'Delivered messages waiting for a handler slot, per partition.',
    tp,
    eachPartition((pm) => pm.buffered),
  );
  gauge(
    'buffered_bytes',
    'Payload bytes of delivered, unfinished messages, per partition.',
    tp,
    eachPartition((pm) => pm.bufferedBytes),
  );
  gauge(
    'partition_paused',
    '1 while the partition is paused for backpressure.',
    tp,
    eachPartition((pm) => (pm.paused ? 1 : 0)),
  );
  gauge(
    'lag_messages',
    "Consumer lag: end offset minus committed offset (librdkafka's statistics).",
    tp,
    eachPartition((pm) => pm.lag),
  );
  gauge(
    'committed_offset',
    "The group's committed offset (librdkafka's statistics).",
    tp,
    eachPartition((pm) => pm.committedOffset),
  );
  gauge(
    'stalled_handlers',
    'Handlers running longer than stallThresholdMs now.',
    ['group'],
    (add, obs) => add({ group: obs.group }, obs.stalledHandlers().length),
  );
  gauge(
    'last_poll_age_seconds',
    'Seconds since the consume loop last returned from librdkafka.',
    ['group'],
    (add, obs) => {
      const last = snapshot(obs).lastPollAt;
      if (last > 0) add({ group: obs.group }, (Date.now() - last) / 1000);
    },
  );
  gauge('healthy', '1 while health() reports healthy.', ['group'], (add, obs) =>
    add({ group: obs.group }, obs.health().healthy ? 1 : 0),
  );

  const histogram = (n: string, help: string, labelNames: string[], buckets: readonly number[]) =>
    new prom.Histogram({
      name: name(n),
      help,
      labelNames,
      buckets: [...buckets],
      registers: [registry],
    });
  return {
    consumers,
    names,
    handlerDuration: histogram(
      'handler_duration_seconds',
      'Duration of handler invocations (process()).',
      ['group', 'topic', 'result'],
      LATENCY_BUCKETS_SECONDS,
    ),
    commitDuration: histogram(
      'commit_duration_seconds',
      'Commit request → broker confirmation or failure.',
      ['group', 'kind', 'result'],
      LATENCY_BUCKETS_SECONDS,
    ),
    phaseDuration: histogram(
      'rebalance_phase_duration_seconds',
      'Revoke phases: drain (revoking→drained), commit (drained→committed), release (committed→revoked), total.',
      ['group', 'phase'],
      REBALANCE_BUCKETS_SECONDS,
    ),
  };
}
