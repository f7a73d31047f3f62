import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { evaluateHealth } from '../lib/health';
import type { HealthInputs } from '../lib/health';
import { T, harness, tp, until } from './helpers/harness';
import { statsEvent } from './helpers/observability';

const busy = (ms: number): void => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // block the event loop: the consume loop cannot return
  }
};

describe('health()', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  const running = async (options = {}) => {
    const h = harness(options);
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await until(() => h.consumer.metrics().lastPollAt > 0, 'first poll');
    return h;
  };

  it('is healthy when running, connected, assigned, polling and without stalls', async () => {
    const h = await running();
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.consumer.metrics().partitions.length === 1, 'assigned');
    const health = h.consumer.health();
    assert.deepEqual(health.checks, {
      connected: true,
      member: true,
      pollingRecently: true,
      noStalledPartitions: true,
    });
    assert.equal(health.healthy, true);
    assert.deepEqual(health.details.reasons, []);
    assert.equal(health.details.assignedPartitions, 1);
  });

  it('counts a member still waiting for its first assignment as a member', async () => {
    const h = await running();
    const health = h.consumer.health();
    assert.equal(health.checks.member, true);
    assert.equal(health.healthy, true);
  });

  it('fails `connected` before the consumer runs and after it closed', async () => {
    const h = harness();
    let health = h.consumer.health();
    assert.equal(health.healthy, false);
    assert.equal(health.checks.connected, false);
    assert.equal(health.details.state, 'idle');
    assert.match(health.details.reasons[0]!, /idle/);
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await h.consumer.close();
    health = h.consumer.health();
    assert.equal(health.checks.connected, false);
    assert.equal(health.details.state, 'closed');
  });

  it('fails `connected` when librdkafka reports no broker up', async () => {
    const h = await running();
    h.fake().emit('event.stats', statsEvent(T, [], { brokersUp: false }));
    const health = h.consumer.health();
    assert.equal(health.checks.connected, false);
    assert.equal(health.healthy, false);
    assert.ok(health.details.reasons.some((r) => r.includes('no broker')));
    h.fake().emit('event.stats', statsEvent(T, []));
    assert.equal(h.consumer.health().checks.connected, true);
  });

  it('fails `member` once the member was dropped from the group, until it is assigned again', async () => {
    const h = await running();
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.consumer.metrics().partitions.length === 1, 'assigned');
    h.fake().emit('event.log', { severity: 4, fac: 'SESSTMOUT', message: 'session timed out' });
    const health = h.consumer.health();
    assert.equal(health.checks.member, false);
    assert.match(health.details.membershipLost!, /SESSTMOUT/);
    assert.ok(health.details.reasons.some((r) => r.includes('dropped from the group')));
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'lost'), 'lost');
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.consumer.health().checks.member, 'member again');
  });

  it('fails `pollingRecently` when the consume loop has not returned for maxPollAgeMs', async () => {
    const h = await running();
    busy(60);
    const health = h.consumer.health({ maxPollAgeMs: 30 });
    assert.equal(health.checks.pollingRecently, false);
    assert.ok(health.details.lastPollAgeMs! >= 60);
    assert.ok(health.details.reasons.some((r) => r.includes('consume loop last returned')));
    await until(() => h.consumer.health({ maxPollAgeMs: 30 }).checks.pollingRecently, 'polling');
  });

  it('fails `noStalledPartitions` while a handler runs past stallThresholdMs, and recovers when it ends', async () => {
    const h = harness({ stallThresholdMs: 40 });
    let release!: () => void;
    subs.push(
      h.consumer
        .process((m) => (m.offset === 1 ? new Promise<void>((r) => (release = r)) : undefined))
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => !h.consumer.health().checks.noStalledPartitions, 'a stall');
    const health = h.consumer.health();
    assert.equal(health.healthy, false);
    assert.deepEqual(
      health.details.stalledHandlers.map((s) => [s.topic, s.partition, s.offset]),
      [[T, 0, 1]],
    );
    assert.ok(health.details.reasons.some((r) => r.includes(`${T}[0]@1`)));
    release();
    await until(() => h.consumer.health().healthy, 'healthy again');
  });
});

describe('evaluateHealth', () => {
  const base: HealthInputs = {
    now: 100_000,
    state: 'running',
    clientConnected: true,
    assignedPartitions: 0,
    rebalancing: false,
    waitingSince: 90_000,
    maxPollIntervalMs: 300_000,
    lastPollAt: 99_990,
    maxPollAgeMs: 30_000,
    membershipLost: undefined,
    stats: undefined,
    stalledHandlers: [],
    stallThresholdMs: 30_000,
    binding: {
      name: 'node-rdkafka',
      version: '3.6.1',
      librdkafkaVersion: '2.12.0',
      batchConversion: false,
      sharedBatchBuffers: false,
    },
  };

  it('fails `member` after max.poll.interval.ms without partitions, unless librdkafka reports the group joined', () => {
    const waiting = { ...base, waitingSince: 100_000 - 300_001 };
    const alone = evaluateHealth(waiting);
    assert.equal(alone.checks.member, false);
    assert.match(alone.details.reasons[0]!, /no partitions and no rebalance/);
    const stats = { groupState: 'up', joinState: 'steady', brokersUp: 1, brokers: 1 };
    assert.equal(
      evaluateHealth({ ...waiting, stats }).checks.member,
      true,
      'more members than partitions',
    );
    assert.equal(
      evaluateHealth({ ...waiting, stats: { ...stats, joinState: 'wait-join' } }).checks.member,
      false,
    );
    assert.equal(evaluateHealth({ ...waiting, rebalancing: true }).checks.member, true);
  });

  it('fails `pollingRecently` before the first poll returned', () => {
    const h = evaluateHealth({ ...base, lastPollAt: 0 });
    assert.equal(h.checks.pollingRecently, false);
    assert.equal(h.details.lastPollAgeMs, undefined);
  });

  it('fails `connected` when the client is not connected', () => {
    const h = evaluateHealth({ ...base, clientConnected: false });
    assert.equal(h.checks.connected, false);
    assert.equal(h.healthy, false);
  });
});
