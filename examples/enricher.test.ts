/**
 * Testing a `processTransactional()` pipeline with the testing kit: MockKafka's transactions (an
 * input transaction that aborted, outputs visible only once committed) and `readRecords()` to
 * assert what the pipeline wrote, as a `read_committed` reader sees it. See docs/testing.md.
 */
import assert from 'node:assert/strict';
import { MockKafka, VirtualClock, nextRebalance, waitFor } from 'reactive-rdkafka/testing';
import { startEnricher } from './enricher';

const order = (i: number) => ({
  key: `o${i}`,
  value: JSON.stringify({ id: `o${i}`, amount: i * 100 }),
});

describe('enricher (exactly once) on MockKafka', () => {
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

  it('writes each order once, across a rebalance, and skips an input transaction that aborted', async () => {
    const { name: orders } = await kafka.createTopic({ partitions: 4 });
    const { name: enriched } = await kafka.createTopic({ partitions: 4 });
    const { name: large } = await kafka.createTopic({ partitions: 1 });
    await kafka.produce(
      orders,
      Array.from({ length: 30 }, (_, i) => order(i)),
    );
    // A producer of the input aborted these: a read_committed consumer never sees them.
    await kafka.produce(orders, [order(900), order(901)], { transaction: 'abort' });
    await kafka.produce(
      orders,
      Array.from({ length: 30 }, (_, i) => order(30 + i)),
    );
    const options = kafka.consumerOptions({ topics: [orders] });
    const groupId = options.config['group.id'];
    const enricher = startEnricher(options, { enriched, large });
    try {
      await nextRebalance(enricher, 'assigned'); // it holds every partition, then a member joins
      const revoked = nextRebalance(enricher, 'revoked');
      const member = await kafka.joinGroup(groupId, [orders]);
      await member.waitForAssignment();
      await revoked;
      await member.leave();
      await waitFor(
        async () =>
          (await kafka.uncommitted(groupId, orders)).constructor === Object &&
          Object.keys(await kafka.uncommitted(groupId, orders)).length === 0,
        {
          what: 'every input committed',
        },
      );
    } finally {
      await enricher.close();
    }
    const written = (await kafka.readRecords(enriched)).map((r) => r.key!.toString());
    assert.equal(written.length, 60, 'each order once');
    assert.deepEqual(new Set(written), new Set(Array.from({ length: 60 }, (_, i) => `o${i}`)));
    const big = (await kafka.readRecords(large)).map((r) => r.key!.toString()).sort();
    assert.deepEqual(big, Array.from({ length: 49 }, (_, i) => `o${i + 11}`).sort());
  });
});
