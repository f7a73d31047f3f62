import assert from 'node:assert/strict';
import { lastValueFrom } from 'rxjs';
import { Registry } from 'prom-client';
import { registerPrometheusMetrics } from '../lib';
import { ReactiveConsumer } from './helpers/binding';
import type { KafkaMessage, ReactiveConsumerOptions } from '../lib';
import {
  BROKERS,
  committedOffsets,
  createTopic,
  highWatermarks,
  produce,
  uniqueName,
  waitFor,
} from './helpers/kafka';
import { useTestOutput } from './helpers/output';

/**
 * Metrics against what the broker holds: consumer lag from librdkafka's statistics equals the end
 * offset minus the group's committed offset (read by a separate client), commits are counted,
 * revoke phases are timed, health() reads librdkafka's group state, and the Prometheus scrape shows
 * the same numbers.
 */
describe('observability (real broker)', function () {
  this.timeout(120_000);
  const output = useTestOutput();

  it('reports lag = end offset − committed offset per partition, commits, revoke phases and health', async () => {
    const topic = uniqueName('observability');
    const groupId = uniqueName('observability-group');
    const partitions = 3;
    const perPartition = 100;
    const hangAt = 60;
    await createTopic(topic, partitions);
    await produce(
      topic,
      Array.from({ length: partitions * perPartition }, (_, i) => ({
        key: `k-${i}`,
        value: `v-${i}`,
        partition: i % partitions,
      })),
    );

    const options = (name: string): ReactiveConsumerOptions => ({
      config: {
        'bootstrap.servers': BROKERS,
        'group.id': groupId,
        'client.id': name,
        'partition.assignment.strategy': 'range',
        'session.timeout.ms': 6000,
        'heartbeat.interval.ms': 500,
        'max.poll.interval.ms': 30_000,
      },
      topicConfig: { 'auto.offset.reset': 'earliest' },
      topics: [topic],
      logger: output.logger(name),
      commitIntervalMs: 200,
      metricsIntervalMs: 500,
      stallThresholdMs: 1500,
    });

    const a = new ReactiveConsumer(options('a'));
    const registry = new Registry();
    registerPrometheusMetrics(a, { registry });
    let release!: () => void;
    const hung = new Promise<void>((r) => (release = r));
    const seen = new Set<string>();
    const handler = async (m: KafkaMessage): Promise<void> => {
      if (m.partition === 0 && m.offset === hangAt) await hung;
      seen.add(`${m.partition}@${m.offset}`);
    };
    const doneA = lastValueFrom(a.process(handler, { concurrency: 8 }), {
      defaultValue: undefined,
    });

    // Partition 0 stops at the hung handler; the others finish.
    const expectCommitted = [hangAt, perPartition, perPartition];
    await waitFor(
      async () =>
        JSON.stringify(await committedOffsets(groupId, topic, partitions)) ===
        JSON.stringify(expectCommitted),
      { timeoutMs: 60_000, what: `committed offsets ${JSON.stringify(expectCommitted)}` },
    );
    const ends = await highWatermarks(topic, partitions);
    const committed = await committedOffsets(groupId, topic, partitions);
    const expectedLag = ends.map((end, p) => end - committed[p]!);
    assert.deepEqual(expectedLag, [perPartition - hangAt, 0, 0]);
    await waitFor(
      () =>
        JSON.stringify(
          [...a.metrics().partitions].sort((x, y) => x.partition - y.partition).map((p) => p.lag),
        ) === JSON.stringify(expectedLag),
      { timeoutMs: 20_000, what: `lag ${JSON.stringify(expectedLag)} in the metrics` },
    );
    const m = a.metrics();
    for (const p of m.partitions) {
      assert.equal(p.highWatermark, ends[p.partition], `high watermark of ${p.partition}`);
      assert.equal(p.committedOffset, committed[p.partition], `committed offset of ${p.partition}`);
      assert.equal(p.lastCommitted, committed[p.partition], `last commit of ${p.partition}`);
    }
    assert.ok(m.commits.ok > 0, 'commits confirmed');
    assert.equal(m.commits.duration.count, m.commits.ok + m.commits.failed);
    assert.equal(m.messages.received, partitions * perPartition);
    assert.equal(m.messages.processed, hangAt + 2 * perPartition, 'p0 stops at the hung one');
    assert.equal(m.inFlight, 1);
    const p0 = m.partitions.find((p) => p.partition === 0)!;
    assert.equal(p0.buffered, perPartition - hangAt - 1, 'the rest of p0 waits behind it');

    // The hung handler is reported as stalled, and the probe says so.
    await waitFor(() => a.metrics().stalledHandlers.length === 1, {
      timeoutMs: 10_000,
      what: 'the stalled handler',
    });
    let health = a.health();
    assert.deepEqual(health.checks, {
      connected: true,
      member: true,
      pollingRecently: true,
      noStalledPartitions: false,
    });
    assert.equal(health.details.groupState, 'up');
    assert.equal(health.details.joinState, 'steady');
    assert.equal(health.details.brokersUp, 1);

    const text = await registry.metrics();
    assert.match(
      text,
      new RegExp(
        `kafka_consumer_lag_messages\\{group="${groupId}",topic="${topic}",partition="0"\\} ${perPartition - hangAt}`,
      ),
    );

    // A second member joins: a revokes (drains, commits, releases) and gets some partitions back.
    release();
    await waitFor(() => a.health().healthy, { timeoutMs: 10_000, what: 'a healthy again' });
    health = a.health();
    assert.equal(health.healthy, true, JSON.stringify(health.details));
    const b = new ReactiveConsumer(options('b'));
    const doneB = lastValueFrom(b.process(handler, { concurrency: 8 }), {
      defaultValue: undefined,
    });
    await waitFor(() => a.metrics().rebalances.revokes >= 1, {
      timeoutMs: 60_000,
      what: 'a revoke on a',
    });
    await waitFor(() => seen.size === partitions * perPartition, {
      timeoutMs: 60_000,
      what: 'every message processed',
    });
    await waitFor(
      async () =>
        JSON.stringify(await committedOffsets(groupId, topic, partitions)) === JSON.stringify(ends),
      { timeoutMs: 30_000, what: 'everything committed' },
    );
    const r = a.metrics().rebalances;
    assert.ok(r.last, 'the last revoke is described');
    assert.equal(r.last.timedOut, false);
    assert.ok(r.last.totalMs >= r.last.drainMs + r.last.commitMs, JSON.stringify(r.last));
    assert.equal(r.drain.count, r.revokes);
    assert.equal(r.commit.count, r.revokes);
    assert.equal(r.release.count, r.revokes);
    assert.ok(r.partitionsRevoked >= partitions, 'eager: everything is revoked once');
    assert.ok(r.assignments >= 2);
    assert.equal(r.losses, 0);

    // Once the statistics catch up, no owned partition lags.
    for (const c of [a, b]) {
      await waitFor(
        () => {
          const owned = c.metrics().partitions;
          return owned.length > 0 && owned.every((p) => p.lag === 0);
        },
        {
          timeoutMs: 20_000,
          what: 'zero lag everywhere',
        },
      );
    }
    const scrape = await registry.metrics();
    assert.match(
      scrape,
      new RegExp(
        `kafka_consumer_rebalance_phase_duration_seconds_count\\{group="${groupId}",phase="drain"\\} [1-9]`,
      ),
    );
    await Promise.all([a.close(), b.close()]);
    await Promise.all([doneA, doneB]);
    assert.equal(a.health().healthy, false, 'closed consumers are not healthy');
  });
});
