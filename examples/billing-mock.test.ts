/**
 * The billing pipeline's tests again, on `MockKafka` (Kafka in memory, no native client) and a
 * `VirtualClock`: the same assertions as billing.test.ts, in milliseconds instead of seconds, and a
 * payment outage whose retries wait minutes passes at once. See docs/testing.md.
 */
import assert from 'node:assert/strict';
import { MockKafka, VirtualClock, nextRebalance, waitFor } from 'reactive-rdkafka/testing';
import { startBilling } from './billing';
import type { Order, Payments } from './billing';

const orders = (n: number): { key: string; value: string }[] =>
  Array.from({ length: n }, (_, i) => ({
    key: `customer-${i % 7}`,
    value: JSON.stringify({ id: `order-${i}`, amountCents: 100 + i }),
  }));

/**
 * A payment service that records what it charged. Its waits use the global `setTimeout`, which the
 * clock serves (not `node:timers/promises`, which it does not see).
 */
function fakePayments(
  options: { delayMs?: number; failFirst?: number } = {},
): Payments & { charged: string[]; attempts: number } {
  const charged: string[] = [];
  const service = {
    charged,
    attempts: 0,
    async charge(order: Order): Promise<void> {
      service.attempts += 1;
      await new Promise((resolve) => setTimeout(resolve, options.delayMs ?? 2));
      if (service.attempts <= (options.failFirst ?? 0)) throw new Error('payments unavailable');
      charged.push(order.id);
    },
  };
  return service;
}

describe('billing pipeline on MockKafka and virtual time', () => {
  let clock: VirtualClock;
  let kafka: MockKafka;
  beforeEach(() => {
    clock = new VirtualClock({ autoAdvance: true });
    clock.install();
    kafka = new MockKafka();
  });
  afterEach(async () => {
    await kafka.close();
    clock.uninstall();
  });

  it('survives a rebalance: no order lost, none charged twice', async () => {
    const { name: topic } = await kafka.createTopic({ partitions: 6 });
    const N = 600;
    await kafka.produce(topic, orders(N));
    const payments = fakePayments({ delayMs: 20 });
    const options = kafka.consumerOptions({ topics: [topic] });
    const groupId = options.config['group.id'];
    const billing = startBilling(options, payments);
    try {
      await waitFor(() => payments.charged.length >= 30, { what: '30 orders charged' });
      const revoked = nextRebalance(billing, 'revoked');
      const member = await kafka.joinGroup(groupId, [topic]);
      await member.waitForAssignment();
      const { partitions } = await revoked;
      assert.ok(payments.charged.length < N, 'the rebalance came after the work');
      const back = nextRebalance(billing, 'assigned', { partitions });
      await member.leave();
      await back;
      await waitFor(() => payments.charged.length >= N, { what: 'every order charged' });
    } finally {
      await billing.close();
    }
    assert.equal(new Set(payments.charged).size, N, 'orders lost');
    assert.equal(payments.charged.length, N, 'orders charged twice');
    assert.deepEqual(await kafka.uncommitted(groupId, topic), {});
  });

  it('rides out a payment outage: its retries wait minutes of virtual time, then it goes on', async () => {
    const { name: topic } = await kafka.createTopic({ partitions: 1 });
    await kafka.produce(topic, orders(3));
    const payments = fakePayments({ failFirst: 2 });
    const options = kafka.consumerOptions({ topics: [topic] });
    const startedAt = Date.now(); // virtual: the clock serves Date.now()
    const billing = startBilling(options, payments);
    try {
      // waitFor's deadline is on the clock too: give it an hour of virtual time.
      await waitFor(() => payments.charged.length === 3, {
        what: 'every order charged',
        timeoutMs: 3_600_000,
      });
    } finally {
      await billing.close();
    }
    assert.deepEqual(payments.charged, ['order-0', 'order-1', 'order-2']);
    // Two failed attempts: backoffs of about 1 and 2 minutes (±20% jitter) passed.
    assert.ok(Date.now() - startedAt >= 144_000, 'the library backed off between attempts');
    assert.deepEqual(await kafka.uncommitted(options.config['group.id'], topic), {});
  });
});
