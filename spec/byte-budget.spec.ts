/**
 * `maxBufferedBytesTotal`: the bytes every partition of a consumer holds together. Each partition
 * that receives more once the total reached it is paused; all resume once the total falls to
 * `resumeThreshold` of it — also a partition that drained while the total was still high (no ack
 * of its own will come), and also when the total falls because a partition was lost.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import type { KafkaMessage } from '../lib';
import { MESSAGE_OVERHEAD_BYTES } from '../lib/internal/partition/held-bytes';
import { T, gate, harness, tp, until } from './helpers/harness';

/** What the fake's message at `offset` counts: a 10-byte value, key `k<offset>`, the overhead. */
const bytesAt = (offset: number): number => 10 + `k${offset}`.length + MESSAGE_OVERHEAD_BYTES;

describe('maxBufferedBytesTotal (the consumer-wide byte budget)', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('pauses each partition that receives more once all hold the budget, and resumes them all when the total falls', async () => {
    const budget = 6 * bytesAt(0);
    const h = harness({ maxBufferedBytesTotal: budget, consumeBatchSize: 1 });
    const open = gate();
    const seen: string[] = [];
    let maxHeld = 0;
    subs.push(
      h.consumer
        .process(
          async (m: KafkaMessage) => {
            const held = h.consumer.metrics().partitions.reduce((s, p) => s + p.bufferedBytes, 0);
            maxHeld = Math.max(maxHeld, held);
            await open.promise;
            seen.push(`${m.partition}@${m.offset}`);
          },
          { concurrency: 100, partitionConcurrency: 100 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 30);
    h.fake().produce(T, 1, 30);
    h.fake().produce(T, 2, 30);
    h.fake().rebalanceAssign([tp(0), tp(1), tp(2)]);
    await until(
      () => [0, 1, 2].every((p) => h.fake().isPaused(T, p)),
      'every partition paused by the budget',
    );
    const m = h.consumer.metrics();
    const held = m.partitions.reduce((s, p) => s + p.bufferedBytes, 0);
    // One message per partition may arrive after the total reached the budget (it pauses that one).
    assert.ok(held >= budget, `held ${held} of ${budget}`);
    assert.ok(held <= budget + 3 * bytesAt(99), `held ${held}, budget ${budget}`);
    assert.ok(m.buffered < 90, `${m.buffered} buffered: the budget held most of the backlog back`);
    open.open();
    await until(() => seen.length === 90, 'every message processed', 10_000);
    assert.deepEqual(
      [0, 1, 2].filter((p) => h.fake().isPaused(T, p)),
      [],
    );
    assert.ok(maxHeld <= budget + 3 * bytesAt(99), `at most ${maxHeld} held at a handler's start`);
    await h.consumer.close();
  });

  it('resumes a partition that drained while the total was still above the threshold', async () => {
    // Partition 1 fills its own limit (3 messages) and drains while partition 0 still holds 3:
    // the total (3 messages) is above half the budget, so partition 1 waits — and no ack of its own
    // will come. Partition 0's acks must resume it.
    const budget = 5 * bytesAt(0);
    const h = harness({
      maxBufferedBytesTotal: budget,
      maxBufferedMessages: 3,
      consumeBatchSize: 1,
    });
    const gates = new Map([
      [0, gate()],
      [1, gate()],
    ]);
    const seen: string[] = [];
    subs.push(
      h.consumer
        .process(
          async (m: KafkaMessage) => {
            await gates.get(m.partition)!.promise;
            seen.push(`${m.partition}@${m.offset}`);
          },
          { concurrency: 100, partitionConcurrency: 100 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().produce(T, 1, 10);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => h.fake().isPaused(T, 0) && h.fake().isPaused(T, 1), 'both partitions paused');
    gates.get(1)!.open();
    await until(() => seen.some((s) => s.startsWith('1@')), 'partition 1 drained');
    await until(
      () => h.consumer.metrics().partitions.find((p) => p.partition === 1)!.buffered === 0,
      'partition 1 empty',
    );
    assert.ok(h.fake().isPaused(T, 0), 'partition 0 still holds its messages');
    gates.get(0)!.open();
    await until(() => seen.length === 20, 'every message of both partitions processed', 10_000);
    assert.deepEqual(
      seen.filter((s) => s.startsWith('1@')),
      Array.from({ length: 10 }, (_, i) => `1@${i}`),
    );
    await h.consumer.close();
  });

  it('resumes the partitions waiting for the total when the partition holding it is lost', async () => {
    const budget = 4 * bytesAt(0);
    const h = harness(
      { maxBufferedBytesTotal: budget, consumeBatchSize: 1 },
      { protocol: 'COOPERATIVE' },
    );
    const stuck = gate();
    const seen: string[] = [];
    subs.push(
      h.consumer
        .process(
          async (m: KafkaMessage) => {
            if (m.partition === 0) await stuck.promise;
            seen.push(`${m.partition}@${m.offset}`);
          },
          { concurrency: 100, partitionConcurrency: 100 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().isPaused(T, 0), 'partition 0 holds the budget');
    h.fake().produce(T, 1, 10);
    h.fake().rebalanceAssign([tp(1)]);
    await until(() => seen.some((s) => s.startsWith('1@')), 'partition 1 gets one message in');
    await until(() => h.fake().isPaused(T, 1), 'partition 1 paused by the budget');
    h.fake().rebalanceRevoke([tp(0)], { lost: true });
    await until(() => seen.filter((s) => s.startsWith('1@')).length === 10, 'partition 1 done');
    stuck.open();
    await h.consumer.close();
  });
});
