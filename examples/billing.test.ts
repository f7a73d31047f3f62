/**
 * How to test your own pipeline with `reactive-rdkafka/testing` (mocha here; node:test and jest
 * read the same): an embedded Kafka cluster in the test process, no broker to start. See
 * docs/testing.md.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { nextRebalance, startTestCluster, waitFor } from 'reactive-rdkafka/testing';
import type { TestCluster } from 'reactive-rdkafka/testing';
import { startBilling } from './billing';
import type { Order, Payments } from './billing';

const orders = (n: number): { key: string; value: string }[] =>
  Array.from({ length: n }, (_, i) => ({
    key: `customer-${i % 7}`,
    value: JSON.stringify({ id: `order-${i}`, amountCents: 100 + i }),
  }));

/** A payment service that records what it charged, optionally holding one order until released. */
function fakePayments(
  options: { hold?: string; delayMs?: number } = {},
): Payments & { charged: string[]; release: () => void } {
  let release = (): void => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  const charged: string[] = [];
  return {
    charged,
    release,
    async charge(order: Order): Promise<void> {
      if (order.id === options.hold) await held;
      await sleep(options.delayMs ?? 2);
      charged.push(order.id);
    },
  };
}

describe('billing pipeline (example of reactive-rdkafka/testing)', function () {
  // A rebalance on the embedded cluster takes a few seconds (KIP-848 heartbeats every 3 s).
  this.timeout(60_000);
  let cluster: TestCluster;
  before(async () => {
    cluster = await startTestCluster();
  });
  after(async () => {
    await cluster.close();
  });

  it('commits only the orders it charged', async () => {
    const { name: topic } = await cluster.createTopic();
    await cluster.produce(
      topic,
      orders(12).map((r) => ({ ...r, partition: 0 })),
    );
    const payments = fakePayments({ hold: 'order-5' });
    const options = cluster.consumerOptions({ topics: [topic] });
    const groupId = options.config['group.id'];
    const billing = startBilling(options, payments);
    try {
      // order-5 hangs: 0–4 are charged and committed, nothing from 5 on.
      await waitFor(async () => (await cluster.committedOffsets(groupId, topic))[0] === 5, {
        what: 'offset 5 committed on partition 0',
      });
      assert.deepEqual(payments.charged, ['order-0', 'order-1', 'order-2', 'order-3', 'order-4']);
      assert.deepEqual(await cluster.uncommitted(groupId, topic), { 0: 7 });

      payments.release();
      await waitFor(() => payments.charged.length === 12, { what: 'every order charged' });
    } finally {
      await billing.close();
    }
    assert.deepEqual(await cluster.uncommitted(groupId, topic), {});
  });

  it('survives a rebalance: no order lost, none charged twice', async () => {
    const { name: topic } = await cluster.createTopic();
    const N = 600;
    await cluster.produce(topic, orders(N));
    const payments = fakePayments({ delayMs: 20 }); // slow enough for the rebalance to land mid-stream
    const options = cluster.consumerOptions({ topics: [topic] });
    const groupId = options.config['group.id'];
    const billing = startBilling(options, payments);
    try {
      await waitFor(() => payments.charged.length >= 30, { what: '30 orders charged' });

      // Another member joins: billing drains, commits and hands over some partitions...
      const revoked = nextRebalance(billing, 'revoked');
      const member = await cluster.joinGroup(groupId, [topic]);
      await member.waitForAssignment();
      const { partitions } = await revoked;
      assert.ok(payments.charged.length < N, 'the rebalance came after the work');
      const byPartition = (a: { partition: number }, b: { partition: number }): number =>
        a.partition - b.partition;
      assert.deepEqual(member.assignment().sort(byPartition), [...partitions].sort(byPartition));
      // ...and gets them back, from where it committed, when the member leaves.
      const back = nextRebalance(billing, 'assigned', { partitions });
      await member.leave();
      await back;

      await waitFor(() => payments.charged.length >= N, { what: 'every order charged' });
    } finally {
      await billing.close();
    }
    const counts = new Map<string, number>();
    for (const id of payments.charged) counts.set(id, (counts.get(id) ?? 0) + 1);
    assert.equal(counts.size, N, 'orders lost');
    assert.deepEqual(
      [...counts].filter(([, n]) => n > 1),
      [],
      'orders charged twice',
    );
    assert.deepEqual(await cluster.uncommitted(groupId, topic), {});
  });
});
