import assert from 'node:assert/strict';
import * as promClient from 'prom-client';
import { Registry } from 'prom-client';
import type { Subscription } from 'rxjs';
import { ConfigError, registerPrometheusMetrics } from '../lib';
import type { KafkaMessage } from '../lib';
import { T, harness, tp, until } from './helpers/harness';
import { statsEvent } from './helpers/observability';

/** The value of one sample line of the exposition text, or undefined. */
function sample(
  text: string,
  name: string,
  labels: Record<string, string | number> = {},
): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (.+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => got[k] === String(v))) return Number(m[3]);
  }
  return undefined;
}

describe('registerPrometheusMetrics', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('exposes counters, gauges and histograms with group, topic and partition labels', async () => {
    const h = harness({ stallThresholdMs: 30 });
    const registry = new Registry();
    registerPrometheusMetrics(h.consumer, { registry });
    let release!: () => void;
    subs.push(
      h.consumer
        .process((m: KafkaMessage) =>
          m.partition === 1 && m.offset === 4 ? new Promise<void>((r) => (release = r)) : undefined,
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 30);
    h.fake().produce(T, 1, 5);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => h.consumer.metrics().messages.processed === 34, '34 processed');
    await until(() => h.consumer.metrics().stalledHandlers.length === 1, 'a stall');
    await until(() => h.fake().commits.get(`${T}[0]`) === 30, 'committed');
    h.fake().emit(
      'event.stats',
      statsEvent(T, [
        { partition: 0, lag: 0, committed: 30, hi: 30 },
        { partition: 1, lag: 1, committed: 4, hi: 5 },
      ]),
    );

    const text = await registry.metrics();
    const p0 = { group: 'g', topic: T, partition: 0 };
    const p1 = { group: 'g', topic: T, partition: 1 };
    assert.equal(sample(text, 'kafka_consumer_messages_received_total', p0), 30);
    assert.equal(sample(text, 'kafka_consumer_messages_received_total', p1), 5);
    assert.equal(sample(text, 'kafka_consumer_messages_processed_total', p0), 30);
    assert.equal(sample(text, 'kafka_consumer_messages_processed_total', p1), 4);
    assert.equal(sample(text, 'kafka_consumer_messages_failed_total', p0), 0);
    assert.equal(sample(text, 'kafka_consumer_in_flight_messages', p1), 1);
    assert.equal(sample(text, 'kafka_consumer_in_flight_messages', p0), 0);
    assert.equal(sample(text, 'kafka_consumer_partition_paused', p0), 0);
    assert.equal(sample(text, 'kafka_consumer_lag_messages', p1), 1);
    assert.equal(sample(text, 'kafka_consumer_committed_offset', p0), 30);
    assert.equal(sample(text, 'kafka_consumer_assigned_partitions', { group: 'g' }), 2);
    assert.equal(sample(text, 'kafka_consumer_stalled_handlers', { group: 'g' }), 1);
    assert.equal(sample(text, 'kafka_consumer_handler_stalls_total', p1), 1);
    assert.equal(sample(text, 'kafka_consumer_healthy', { group: 'g' }), 0, 'a stall is unhealthy');
    assert.ok(sample(text, 'kafka_consumer_commits_total', { group: 'g', result: 'ok' })! >= 1);
    assert.equal(
      sample(text, 'kafka_consumer_rebalances_total', { group: 'g', type: 'assigned' }),
      1,
    );
    assert.equal(
      sample(text, 'kafka_consumer_rebalance_partitions_total', { group: 'g', type: 'assigned' }),
      2,
    );
    assert.equal(
      sample(text, 'kafka_consumer_handler_duration_seconds_count', {
        group: 'g',
        topic: T,
        result: 'ok',
      }),
      34,
    );
    assert.equal(
      sample(text, 'kafka_consumer_handler_duration_seconds_bucket', {
        group: 'g',
        topic: T,
        result: 'ok',
        le: '+Inf',
      }),
      34,
    );
    assert.ok(
      sample(text, 'kafka_consumer_commit_duration_seconds_count', {
        group: 'g',
        kind: 'periodic',
        result: 'ok',
      })! >= 1,
    );
    assert.ok(sample(text, 'kafka_consumer_last_poll_age_seconds', { group: 'g' })! < 5);
    assert.match(text, /# TYPE kafka_consumer_messages_received_total counter/);
    assert.match(text, /# TYPE kafka_consumer_in_flight_messages gauge/);
    assert.match(text, /# TYPE kafka_consumer_handler_duration_seconds histogram/);

    release();
    await until(() => h.consumer.metrics().messages.processed === 35, 'all processed');
    await h.consumer.close();
    const after = await registry.metrics();
    assert.equal(
      sample(after, 'kafka_consumer_rebalance_phase_duration_seconds_count', {
        group: 'g',
        phase: 'drain',
      }),
      1,
    );
    assert.equal(
      sample(after, 'kafka_consumer_rebalances_total', { group: 'g', type: 'revoked' }),
      1,
    );
    const okCommits = sample(after, 'kafka_consumer_commits_total', { group: 'g', result: 'ok' });
    const timed = ['periodic', 'revoke'].reduce(
      (n, kind) =>
        n +
        (sample(after, 'kafka_consumer_commit_duration_seconds_count', {
          group: 'g',
          kind,
          result: 'ok',
        }) ?? 0),
      0,
    );
    assert.equal(timed, okCommits, 'every confirmed commit is timed');
    assert.equal(
      sample(after, 'kafka_consumer_in_flight_messages', p1),
      undefined,
      'released partitions disappear',
    );
    assert.equal(sample(after, 'kafka_consumer_messages_received_total', p1), 5, 'counters stay');
  });

  it('adds up consumers sharing a registry, and removes the metrics when the last one unregisters', async () => {
    const registry = new Registry();
    const a = harness();
    const b = harness({ config: { 'group.id': 'other' } });
    const stopA = registerPrometheusMetrics(a.consumer, { registry, prefix: 'app_kafka_' });
    const stopB = registerPrometheusMetrics(b.consumer, { registry, prefix: 'app_kafka_' });
    for (const h of [a, b]) {
      subs.push(h.consumer.process(() => undefined).subscribe());
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 3);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => h.consumer.metrics().messages.processed === 3, 'processed');
    }
    let text = await registry.metrics();
    assert.equal(
      sample(text, 'app_kafka_messages_processed_total', { group: 'g', partition: 0 }),
      3,
    );
    assert.equal(
      sample(text, 'app_kafka_messages_processed_total', { group: 'other', partition: 0 }),
      3,
    );
    assert.equal(sample(text, 'kafka_consumer_messages_processed_total'), undefined);
    stopA();
    text = await registry.metrics();
    assert.equal(
      sample(text, 'app_kafka_messages_processed_total', { group: 'g', partition: 0 }),
      undefined,
    );
    assert.equal(
      sample(text, 'app_kafka_messages_processed_total', { group: 'other', partition: 0 }),
      3,
    );
    stopB();
    assert.equal(registry.getSingleMetric('app_kafka_messages_processed_total'), undefined);
    // Registering again works after everything was removed.
    registerPrometheusMetrics(a.consumer, { registry, prefix: 'app_kafka_' })();
  });

  it('accepts the prom-client module explicitly and rejects bad arguments with a ConfigError', () => {
    const h = harness();
    const registry = new Registry();
    registerPrometheusMetrics(h.consumer, { registry, client: promClient })();
    assert.throws(
      () => registerPrometheusMetrics(h.consumer, { registry: {} as never }),
      (e: unknown) => e instanceof ConfigError && e.key === 'registry',
    );
    assert.throws(
      () => registerPrometheusMetrics({} as never, { registry }),
      (e: unknown) => e instanceof ConfigError && e.key === 'consumer',
    );
    assert.throws(
      () => registerPrometheusMetrics(h.consumer, { registry, prefix: 'bad-prefix' }),
      (e: unknown) => e instanceof ConfigError && e.key === 'prefix',
    );
    new promClient.Counter({
      name: 'taken_messages_received_total',
      help: 'x',
      registers: [registry],
    });
    assert.throws(
      () => registerPrometheusMetrics(h.consumer, { registry, prefix: 'taken_' }),
      (e: unknown) => e instanceof ConfigError && /already registered/.test(e.message),
    );
  });
});
