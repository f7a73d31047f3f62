import assert from 'node:assert/strict';
import { Subject } from 'rxjs';
import { ReactiveConsumer } from '../../lib';
import type { KafkaMessage, RebalanceEvent } from '../../lib';
import {
  EMBEDDED_PARTITIONS,
  newGroupId,
  nextRebalance,
  startTestCluster,
  waitFor,
} from '../../lib/testing';
import type { TestCluster } from '../../lib/testing';

const total = (offsets: Record<number, number>): number =>
  Object.values(offsets).reduce((a, b) => a + b, 0);

describe('testing kit: TestCluster on the embedded cluster', function () {
  // The embedded cluster asks KIP-848 members to heartbeat every 3 s: a rebalance takes seconds.
  this.timeout(60_000);
  let cluster: TestCluster;
  const consumers: ReactiveConsumer[] = [];

  before(async () => {
    cluster = await startTestCluster();
  });
  afterEach(async () => {
    await Promise.allSettled(consumers.splice(0).map((c) => c.close()));
  });
  after(async () => {
    await cluster.close();
  });

  const consume = (
    topic: string,
    groupId = newGroupId(),
  ): { consumer: ReactiveConsumer; seen: KafkaMessage[]; groupId: string } => {
    const consumer = new ReactiveConsumer(cluster.consumerOptions({ topics: [topic], groupId }));
    consumers.push(consumer);
    const seen: KafkaMessage[] = [];
    consumer.process((m) => void seen.push(m)).subscribe();
    return { consumer, seen, groupId };
  };

  it('starts in-process and says where consumers connect', () => {
    assert.equal(cluster.embedded, true);
    assert.match(cluster.bootstrapServers, /^127\.0\.0\.1:\d+$/);
  });

  it('creates a topic with the embedded partition count and reports where records landed', async () => {
    const topic = await cluster.createTopic();
    assert.equal(topic.partitions, EMBEDDED_PARTITIONS);
    assert.match(topic.name, /^test-topic-[0-9a-f]{8}$/);
    const landed = await cluster.produce(topic.name, [
      { value: 'a', partition: 2 },
      { value: 'b', partition: 2 },
      'c',
    ]);
    assert.deepEqual(landed.slice(0, 2), [
      { topic: topic.name, partition: 2, offset: 0 },
      { topic: topic.name, partition: 2, offset: 1 },
    ]);
    const ends = await cluster.endOffsets(topic.name);
    assert.equal(Object.keys(ends).length, EMBEDDED_PARTITIONS);
    assert.equal(total(ends), 3);
    assert.ok((ends[2] ?? 0) >= 2);
  });

  it('refuses a partition count the embedded cluster cannot create, naming it', async () => {
    await assert.rejects(cluster.createTopic({ partitions: 6 }), /4 partitions.*got partitions: 6/);
  });

  it('delivers keys, values and headers as produced', async () => {
    const { name } = await cluster.createTopic();
    await cluster.produce(name, [
      { key: 'k1', value: 'v1', headers: { trace: 'abc' }, partition: 0 },
      { key: null, value: null, partition: 0 },
    ]);
    const { seen } = consume(name);
    await waitFor(() => seen.length === 2, { what: 'two records consumed' });
    assert.equal(seen[0]?.key?.toString(), 'k1');
    assert.equal(seen[0]?.value?.toString(), 'v1');
    assert.deepEqual(
      seen[0]?.headers.map(([k, v]) => [k, v.toString()]),
      [['trace', 'abc']],
    );
    assert.equal(seen[1]?.key, null);
    assert.equal(seen[1]?.value, null);
  });

  it('readRecords returns what was written, in partition and offset order, keys, values and headers included', async () => {
    const { name: topic } = await cluster.createTopic();
    await cluster.produce(topic, [
      { key: 'a', value: 'one', partition: 1, headers: { trace: 'x' } },
      { key: null, value: null, partition: 0 },
      { key: 'b', value: Buffer.from([0, 255]), partition: 1 },
    ]);
    const records = await cluster.readRecords(topic);
    assert.deepEqual(
      records.map((r) => [r.partition, r.offset, r.key?.toString(), r.value?.toString('hex')]),
      [
        [0, 0, undefined, undefined],
        [1, 0, 'a', Buffer.from('one').toString('hex')],
        [1, 1, 'b', '00ff'],
      ],
    );
    assert.deepEqual(
      records[1]!.headers.map(([k, v]) => [k, v.toString()]),
      [['trace', 'x']],
    );
    assert.deepEqual(await cluster.readRecords((await cluster.createTopic()).name), []);
  });

  it('reads the offsets a consumer committed, without joining its group', async () => {
    const { name } = await cluster.createTopic();
    await cluster.produce(name, [
      ...Array.from({ length: 20 }, (_, i) => ({ value: String(i), partition: 1 })),
      ...Array.from({ length: 5 }, (_, i) => ({ value: String(i), partition: 3 })),
    ]);
    const groupId = newGroupId();
    assert.deepEqual(await cluster.committedOffsets(groupId, name), {});
    assert.deepEqual(await cluster.uncommitted(groupId, name), { 1: 20, 3: 5 });
    const { consumer, seen } = consume(name, groupId);
    await waitFor(() => seen.length === 25, { what: '25 records consumed' });
    await consumer.close();
    assert.deepEqual(await cluster.committedOffsets(groupId, name), { 1: 20, 3: 5 });
    assert.deepEqual(await cluster.uncommitted(groupId, name), {});
  });

  it('a joined member takes partitions from the consumer and gives them back when it leaves', async () => {
    const { name } = await cluster.createTopic();
    const { consumer, groupId } = consume(name);
    await waitFor(() => consumer.positions().length === EMBEDDED_PARTITIONS, {
      what: 'the consumer owning every partition',
    });
    const revoked = nextRebalance(consumer, 'revoked');
    const member = await cluster.joinGroup(groupId, [name]);
    const taken = await member.waitForAssignment();
    const event = await revoked;
    assert.ok(taken.length > 0 && taken.length < EMBEDDED_PARTITIONS);
    assert.deepEqual(
      event.partitions.map((p) => p.partition).sort(),
      taken.map((p) => p.partition).sort(),
    );
    const back = nextRebalance(consumer, 'assigned', { partitions: taken });
    await member.leave();
    await back;
    assert.deepEqual(member.assignment(), []);
    await waitFor(() => consumer.positions().length === EMBEDDED_PARTITIONS, {
      what: 'the consumer owning every partition again',
    });
    await member.leave(); // idempotent
  });
});

describe('testing kit: waits', () => {
  it('waitFor resolves once the condition holds', async () => {
    let n = 0;
    await waitFor(() => ++n === 3, { intervalMs: 1 });
    assert.equal(n, 3);
  });

  it('waitFor rejects naming what it waited for', async () => {
    await assert.rejects(
      waitFor(() => false, { timeoutMs: 30, intervalMs: 5, what: 'the moon' }),
      /the moon did not hold within 30 ms/,
    );
  });

  it('nextRebalance sees only events after the call, of the type and partitions asked for', async () => {
    const rebalances$ = new Subject<RebalanceEvent>();
    const base = { generation: 1, protocol: 'COOPERATIVE' as const, at: 0 };
    const p = (partition: number) => ({ topic: 't', partition });
    const next = nextRebalance({ rebalances$ }, 'assigned', { partitions: [p(2)] });
    rebalances$.next({ ...base, type: 'revoking', partitions: [p(2)] });
    rebalances$.next({ ...base, type: 'assigned', partitions: [p(1)] });
    rebalances$.next({ ...base, type: 'assigned', partitions: [p(1), p(2)], generation: 2 });
    assert.equal((await next).generation, 2);
  });

  it('nextRebalance rejects when no such event comes in time', async () => {
    await assert.rejects(
      nextRebalance({ rebalances$: new Subject<RebalanceEvent>() }, 'lost', { timeoutMs: 20 }),
      /no 'lost' event within 20 ms/,
    );
  });
});

describe('testing kit: closing', function () {
  this.timeout(20_000);
  it('close() is idempotent and later calls fail clearly', async () => {
    const cluster = await startTestCluster({ brokers: 2 });
    assert.equal(cluster.bootstrapServers.split(',').length, 2);
    await cluster.close();
    await cluster.close();
    await assert.rejects(cluster.createTopic(), /the TestCluster is closed/);
  });

  it('rejects options it cannot honour, naming them', async () => {
    await assert.rejects(startTestCluster({ brokers: 0 }), /`brokers`.*got 0/);
    await assert.rejects(
      startTestCluster({ groupProtocol: 'eager' as never }),
      /`groupProtocol`.*got eager/,
    );
  });
});
