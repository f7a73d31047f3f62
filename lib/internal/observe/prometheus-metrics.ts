/**
 * The Prometheus metrics of one (registry, prefix), shared by every consumer registered on it:
 * counters and gauges recomputed from each consumer's metrics snapshot at every scrape, histograms
 * fed by the consumers' observations (lib/prometheus.ts registers consumers on them).
 */
import type * as PromClient from 'prom-client';
import { ConfigError } from '../../errors';
import type { ConsumerMetrics, PartitionMetrics, TransactionMetrics } from '../../metrics';
import { LATENCY_BUCKETS_SECONDS, REBALANCE_BUCKETS_SECONDS } from './histogram';
import type { ConsumerObservability } from './observability';

type Labels = Record<string, string | number>;
export type Prom = typeof PromClient;
type CounterT = PromClient.Counter<string>;
type GaugeT = PromClient.Gauge<string>;
type HistogramT = PromClient.Histogram<string>;

/** The metrics of one (registry, prefix), shared by every consumer registered on it. */
export interface Shared {
  readonly consumers: Set<ConsumerObservability>;
  readonly names: string[];
  readonly handlerDuration: HistogramT;
  readonly commitDuration: HistogramT;
  readonly phaseDuration: HistogramT;
}

export function createPrometheusMetrics(
  prom: Prom,
  registry: PromClient.Registry,
  p: string,
): Shared {
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
