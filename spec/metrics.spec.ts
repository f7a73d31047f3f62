import assert from 'node:assert/strict';
import { lastValueFrom, toArray } from 'rxjs';
import type { Subscription } from 'rxjs';
import * as Kafka from 'node-rdkafka';
import { ConfigError } from '../lib';
import { resolveSettings } from '../lib/internal/settings/resolve-settings';
import { MESSAGE_OVERHEAD_BYTES } from '../lib/internal/partition/held-bytes';
import type { ConsumerMetrics, KafkaMessage } from '../lib';
import { T, harness, tp, until } from './helpers/harness';
import { statsEvent } from './helpers/observability';

const E = Kafka.CODES.ERRORS;

describe('metrics', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('counts received and processed messages in total and per partition', async () => {
    const h = harness();
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 30);
    h.fake().produce(T, 1, 20);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => h.consumer.metrics().messages.processed === 50, '50 processed');
    const m = h.consumer.metrics();
    assert.equal(m.state, 'running');
    assert.equal(m.group, 'g');
    assert.deepEqual(m.messages, { received: 50, processed: 50, failed: 0, lateDropped: 0 });
    assert.deepEqual(
      m.partitions.map((p) => [p.partition, p.received, p.processed, p.failed, p.generation]),
      [
        [0, 30, 30, 0, 1],
        [1, 20, 20, 0, 1],
      ],
    );
    assert.equal(m.handlerDuration.count, 50);
    assert.ok(m.handlerDuration.buckets.every((b) => b.count <= 50));
    assert.ok(m.lastPollAt > 0);
    await h.consumer.close();
    assert.equal(h.consumer.metrics().state, 'closed');
  });

  it('counts a failed handler, whatever way it fails', async () => {
    for (const fail of [
      () => {
        throw new Error('sync');
      },
      () => Promise.reject(new Error('async')),
    ]) {
      const h = harness();
      const done = lastValueFrom(
        h.consumer.process((m: KafkaMessage) => (m.offset === 3 ? fail() : undefined), {
          retry: 0, // each attempt is an invocation; keep it to one
        }),
      ).catch((err: unknown) => err);
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 5);
      h.fake().rebalanceAssign([tp(0)]);
      await done;
      const m = h.consumer.metrics();
      assert.equal(m.messages.failed, 1);
      assert.equal(m.messages.processed, 3);
      assert.equal(m.handlerDuration.count, 4);
    }
  });

  it('reports in-flight and buffered messages per partition and the partitions paused for backpressure', async () => {
    const h = harness({ maxBufferedMessages: 10 });
    let hold = true;
    const release: (() => void)[] = [];
    subs.push(
      h.consumer
        .process(() => (hold ? new Promise<void>((r) => release.push(r)) : undefined), {
          concurrency: 4,
          partitionConcurrency: 2,
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 50);
    h.fake().produce(T, 1, 3);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => h.fake().isPaused(T, 0), 'partition 0 paused');
    await until(() => h.consumer.metrics().inFlight === 4, 'four handlers running');
    const m = h.consumer.metrics();
    const p0 = m.partitions.find((p) => p.partition === 0)!;
    const p1 = m.partitions.find((p) => p.partition === 1)!;
    assert.equal(p0.inFlight, 2);
    assert.equal(p1.inFlight, 2);
    assert.equal(p1.buffered, 1);
    assert.ok(p0.buffered >= 8, `buffered ${p0.buffered}`);
    assert.equal(p0.paused, true);
    assert.equal(p1.paused, false);
    assert.deepEqual(m.pausedPartitions, [tp(0)]);
    assert.equal(m.buffered, p0.buffered + p1.buffered);
    // The fake's messages: a 10-byte value and the key `k<offset>`, offsets from 0.
    let expectedBytes = 0;
    for (let offset = 0; offset < p0.received; offset++) {
      expectedBytes += 10 + `k${offset}`.length + MESSAGE_OVERHEAD_BYTES;
    }
    assert.equal(p0.bufferedBytes, expectedBytes);
    hold = false;
    release.forEach((r) => r());
    await until(() => h.consumer.metrics().messages.processed === 53, 'everything processed');
    const after = h.consumer.metrics();
    assert.equal(after.inFlight, 0);
    assert.equal(after.buffered, 0);
    assert.deepEqual(after.pausedPartitions, []);
    subs.forEach((s) => s.unsubscribe());
  });

  it('counts commits confirmed and failed, with their latency', async () => {
    let calls = 0;
    const h = harness(
      {},
      { commitResult: () => (++calls === 1 ? E.ERR_REQUEST_TIMED_OUT : undefined) },
    );
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().commits.get(`${T}[0]`) === 5, 'committed after a failure');
    const c = h.consumer.metrics().commits;
    assert.equal(c.failed, 1);
    assert.ok(c.ok >= 1);
    assert.equal(c.duration.count, c.ok + c.failed);
    assert.ok(c.duration.sumMs >= 0);
    assert.equal(h.consumer.metrics().partitions[0]?.lastCommitted, 5);
  });

  it('counts the broker-thread wakes after incremental rebalances, and the requests they sent', async () => {
    const h = harness({}, { protocol: 'COOPERATIVE' });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    for (const p of [0, 1, 2]) h.fake().produce(T, p, 3);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => h.consumer.metrics().messages.processed === 6, 'the first assignment ran');
    // Nothing was held before it: librdkafka starts the new partitions' fetchers itself.
    assert.deepEqual(h.consumer.metrics().rebalances.fetchWakes, {
      afterRebalance: 0,
      afterResume: 0,
      requests: 0,
    });
    h.fake().rebalanceAssign([tp(2)]);
    // Partitions 0 and 1 were kept: a metadata request, then one ListOffsets to their one leader.
    await until(() => h.fake().watermarkRequests === 1, 'the leader woken');
    let w = h.consumer.metrics().rebalances.fetchWakes;
    assert.equal(w.afterRebalance, 1);
    assert.equal(w.requests, 2);
    assert.equal(h.fake().metadataRequests, 1);
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'partition 0 revoked');
    // Leaders known a moment ago: only the ListOffsets (at most one per leader every 50 ms).
    await until(() => h.fake().watermarkRequests === 2, 'woken again after the unassign');
    w = h.consumer.metrics().rebalances.fetchWakes;
    assert.equal(w.afterRebalance, 2);
    assert.equal(w.requests, 3);
    assert.equal(h.fake().metadataRequests, 1);
    assert.equal(w.afterResume, 0, 'nothing was paused');
  });

  it('times each revoke phase and counts partitions moved, drain timeouts and losses', async () => {
    const h = harness({
      drainTimeoutMs: 150,
      config: { 'max.poll.interval.ms': 10_000, 'session.timeout.ms': 6000 },
    });
    let release!: () => void;
    const hung = new Promise<void>((r) => (release = r));
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => (m.partition === 1 && m.offset === 0 ? hung : undefined))
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().produce(T, 1, 3);
    h.fake().rebalanceAssign([tp(0), tp(1), tp(2)]);
    await until(() => h.consumer.metrics().inFlight === 1, 'the hung handler');
    h.fake().rebalanceRevoke([tp(0), tp(1), tp(2)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    let r = h.consumer.metrics().rebalances;
    assert.equal(r.assignments, 1);
    assert.equal(r.partitionsAssigned, 3);
    assert.equal(r.revokes, 1);
    assert.equal(r.partitionsRevoked, 3);
    assert.equal(r.drainTimeouts, 1);
    assert.equal(r.drain.count, 1);
    assert.equal(r.commit.count, 1);
    assert.equal(r.release.count, 1);
    assert.equal(r.total.count, 1);
    const last = r.last!;
    assert.equal(last.timedOut, true);
    assert.equal(last.inFlight, 1);
    assert.ok(last.drainMs >= 100, `drain ${last.drainMs} ms`);
    assert.ok(last.totalMs >= last.drainMs + last.commitMs);
    assert.equal(last.partitions.length, 3);

    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.consumer.metrics().partitions.length === 1, 'reassigned');
    h.fake().emit('event.log', { severity: 4, fac: 'MAXPOLL', message: 'poll interval exceeded' });
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'lost'), 'lost');
    r = h.consumer.metrics().rebalances;
    assert.equal(r.losses, 1);
    assert.equal(r.partitionsLost, 1);
    assert.equal(r.revokes, 1, 'a loss is no revoke');
    release();
  });

  it('takes consumer lag, committed offset and high watermark from librdkafka statistics', async () => {
    const h = harness();
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => h.consumer.metrics().partitions.length === 2, 'assigned');
    assert.equal(h.consumer.metrics().partitions[0]?.lag, undefined, 'unknown before statistics');
    assert.equal(h.consumer.metrics().statsAt, 0);
    h.fake().emit(
      'event.stats',
      statsEvent(T, [
        { partition: 0, lag: 12, committed: 88, hi: 100 },
        { partition: 1, lag: 0, committed: 7, hi: 7 },
        { partition: 9, lag: 5, committed: 1, hi: 6 }, // not ours: not reported
      ]),
    );
    const m = h.consumer.metrics();
    assert.deepEqual(
      m.partitions.map((p) => [p.partition, p.lag, p.committedOffset, p.highWatermark]),
      [
        [0, 12, 88, 100],
        [1, 0, 7, 7],
      ],
    );
    assert.ok(m.statsAt > 0);
  });

  it('emits a snapshot every metricsIntervalMs and a last one when the consumer closes', async () => {
    const h = harness({ metricsIntervalMs: 20 });
    const snapshots: ConsumerMetrics[] = [];
    const done = lastValueFrom(h.consumer.metrics$.pipe(toArray()));
    subs.push(h.consumer.metrics$.subscribe((s) => snapshots.push(s)));
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await until(() => snapshots.length >= 3, 'three snapshots');
    await h.consumer.close();
    const all = await done;
    assert.ok(all.length >= 3);
    assert.equal(all[all.length - 1]?.state, 'closed');
    assert.ok(all.every((s, i) => i === 0 || s.at >= all[i - 1]!.at));
  });

  it('enables librdkafka statistics at metricsIntervalMs unless statistics.interval.ms is set', () => {
    const base = { config: { 'bootstrap.servers': 'b:9092', 'group.id': 'g' }, topics: ['t'] };
    const g = (o: object) =>
      (resolveSettings({ ...base, ...o }).globalConfig as Record<string, unknown>)[
        'statistics.interval.ms'
      ];
    assert.equal(g({}), 5000);
    assert.equal(g({ metricsIntervalMs: 1000 }), 1000);
    assert.equal(
      g({ config: { ...base.config, 'statistics.interval.ms': 0 }, metricsIntervalMs: 1000 }),
      0,
    );
  });

  it('validates stallThresholdMs and metricsIntervalMs, naming the key', () => {
    const base = { config: { 'bootstrap.servers': 'b:9092', 'group.id': 'g' }, topics: ['t'] };
    assert.equal(resolveSettings(base).stallThresholdMs, 30_000);
    assert.equal(
      resolveSettings({ ...base, drainTimeoutMs: 10_000 }).stallThresholdMs,
      10_000,
      'capped at drainTimeoutMs',
    );
    assert.equal(resolveSettings({ ...base, stallThresholdMs: 0 }).stallThresholdMs, 0);
    for (const [key, value] of [
      ['stallThresholdMs', -1],
      ['stallThresholdMs', 1.5],
      ['stallThresholdMs', '100'],
      ['metricsIntervalMs', 0],
    ] as const) {
      assert.throws(
        () => resolveSettings({ ...base, [key]: value }),
        (err: unknown) =>
          err instanceof ConfigError && err.key === key && err.message.includes(`\`${key}\``),
      );
    }
  });
});
