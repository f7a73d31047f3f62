/**
 * `maxBufferedBytesTotal`: the bytes all partitions of a consumer hold, shared out equally among
 * the partitions owned. Each partition is paused at its share and resumes below its threshold; a
 * share, not a pool, so that what one partition holds (a hung handler, an unfinished
 * `bufferCount`) never pauses another, and steady traffic on one never starves another.
 */
import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import { bufferCount, concatMap, mergeMap } from 'rxjs';
import type { Subscription } from 'rxjs';
import type { KafkaMessage, PartitionStream } from '../lib';
import { MESSAGE_OVERHEAD_BYTES } from '../lib/internal/partition/held-bytes';
import { T, gate, harness, tp, until } from './helpers/harness';

/** What the fake's message at `offset` counts: a 10-byte value, key `k<offset>`, the overhead. */
const bytesAt = (offset: number): number => 10 + `k${offset}`.length + MESSAGE_OVERHEAD_BYTES;

describe('maxBufferedBytesTotal (the byte budget shared out among partitions)', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('pauses each partition at its share of the budget and resumes them all once they drained', async () => {
    const share = 6 * bytesAt(0);
    const h = harness({ maxBufferedBytesTotal: 3 * share, consumeBatchSize: 1 });
    const open = gate();
    const seen: string[] = [];
    subs.push(
      h.consumer
        .process(
          async (m: KafkaMessage) => {
            await open.promise;
            seen.push(`${m.partition}@${m.offset}`);
          },
          { concurrency: 100, partitionConcurrency: 100 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    for (const p of [0, 1, 2]) h.fake().produce(T, p, 30);
    h.fake().rebalanceAssign([tp(0), tp(1), tp(2)]);
    await until(() => [0, 1, 2].every((p) => h.fake().isPaused(T, p)), 'every partition paused');
    for (const p of h.consumer.metrics().partitions) {
      // Paused at the first message that reached the share (one consume batch of 1 overshoots).
      assert.ok(p.bufferedBytes >= share, `partition ${p.partition} holds ${p.bufferedBytes}`);
      assert.ok(
        p.bufferedBytes < share + bytesAt(99),
        `partition ${p.partition}: ${p.bufferedBytes}`,
      );
      assert.ok(p.buffered < 30, `partition ${p.partition} held back the rest of its backlog`);
    }
    open.open();
    await until(() => seen.length === 90, 'every message processed', 10_000);
    assert.deepEqual(
      [0, 1, 2].filter((p) => h.fake().isPaused(T, p)),
      [],
    );
    await h.consumer.close();
  });

  it('a partition whose handler hangs holds its own share and pauses no other partition', async () => {
    // 10 KiB values, two partitions of 1 MiB each: partition 0 fills its share and stays full.
    const h = harness({ maxBufferedBytesTotal: 2 * 1024 * 1024, consumeBatchSize: 10 });
    const stuck = gate();
    let p1 = 0;
    subs.push(
      h.consumer
        .process(async (m: KafkaMessage) => {
          if (m.partition === 0) return stuck.promise;
          p1 += 1;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 600, 10 * 1024);
    h.fake().produce(T, 1, 2000, 10 * 1024);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => p1 === 2000, 'partition 1 processed all 2000 messages', 10_000);
    const p0 = h.consumer.metrics().partitions.find((p) => p.partition === 0)!;
    assert.equal(p0.paused, true);
    // Paused at its share, overshot by at most one consume batch (10 messages).
    assert.ok(
      p0.bufferedBytes <= 1024 * 1024 + 120 * 1024,
      `partition 0 holds ${p0.bufferedBytes}`,
    );
    stuck.open();
    await h.consumer.close();
  });

  it('steady traffic on one partition does not starve another', async () => {
    const h = harness(
      { maxBufferedBytesTotal: 60 * bytesAt(0), consumeBatchSize: 10 },
      { protocol: 'COOPERATIVE' },
    );
    const waiting = new Map<number, () => void>();
    let p0 = 0;
    let traffic: NodeJS.Timeout | undefined;
    subs.push(
      h.consumer
        .process(
          async (m: KafkaMessage) => {
            if (m.partition === 0) {
              p0 += 1;
              return;
            }
            // Partition 1: each message finishes when the 22nd after it arrives (latency × rate).
            waiting.get(m.offset - 22)?.();
            waiting.delete(m.offset - 22);
            await new Promise<void>((r) => waiting.set(m.offset, r));
          },
          { concurrency: 200, partitionConcurrency: 100 },
        )
        .subscribe(),
    );
    try {
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 1, 22);
      h.fake().rebalanceAssign([tp(1)]);
      await until(() => waiting.size === 22, '22 messages of partition 1 in flight');
      traffic = setInterval(() => h.fake().produce(T, 1, 1), 5);
      h.fake().produce(T, 0, 200);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => p0 === 200, 'partition 0 processed its 200 messages', 5000);
    } finally {
      clearInterval(traffic);
      for (const open of waiting.values()) open();
      await h.consumer.close();
    }
  });

  it('a partition paused at its share resumes when partitions go and its share grows', async () => {
    // bufferCount(15) of 10 KiB messages does not fit a quarter of 200 KiB, but fits all of it.
    const h = harness(
      { maxBufferedBytesTotal: 200 * 1024, consumeBatchSize: 5 },
      { protocol: 'COOPERATIVE' },
    );
    const done = new Map<number, number>();
    subs.push(
      h.consumer.partitions$
        .pipe(
          mergeMap((p: PartitionStream) =>
            p.messages$.pipe(
              bufferCount(15),
              concatMap(async (batch) => batch),
              mergeMap((batch) => batch),
              p.acknowledge(),
            ),
          ),
        )
        .subscribe((m: KafkaMessage) => done.set(m.partition, (done.get(m.partition) ?? 0) + 1)),
    );
    await until(() => h.fake().isConnected(), 'connect');
    for (const p of [0, 1, 2, 3]) h.fake().produce(T, p, 60, 10 * 1024);
    h.fake().rebalanceAssign([tp(0), tp(1), tp(2), tp(3)]);
    await until(() => [0, 1, 2, 3].every((p) => h.fake().isPaused(T, p)), 'all paused at 50 KiB');
    h.fake().rebalanceRevoke([tp(1), tp(2), tp(3)]);
    await until(() => (done.get(0) ?? 0) === 60, 'partition 0 processed everything', 10_000);
    await h.consumer.close();
  });

  it('partitions$ batching 100 messages per partition (bufferCount) fits the default shares of 12 partitions', async () => {
    const h = harness({ consumeBatchSize: 30 });
    const n = 12;
    let done = 0;
    subs.push(
      h.consumer.partitions$
        .pipe(
          mergeMap((p: PartitionStream) =>
            p.messages$.pipe(
              bufferCount(100),
              concatMap(async (batch) => {
                await new Promise((r) => setImmediate(r));
                return batch;
              }),
              mergeMap((batch) => batch),
              p.acknowledge(),
            ),
          ),
        )
        .subscribe(() => (done += 1)),
    );
    await until(() => h.fake().isConnected(), 'connect');
    for (let p = 0; p < n; p++) h.fake().produce(T, p, 200, 10 * 1024);
    h.fake().rebalanceAssign(Array.from({ length: n }, (_, p) => tp(p)));
    await until(() => done === n * 200, 'every message processed', 10_000);
    await h.consumer.close();
  });

  it('with sharedBatchBuffers, messages held back (bufferCount) do not keep their partition paused for their whole batch', async () => {
    // The companion binding's sharing, on the fake: values views of one buffer per partition batch.
    class SharingConsumer extends Kafka.KafkaConsumer {
      setBatchBufferSharing(): void {}
    }
    const h = harness({
      binding: { ...Kafka, KafkaConsumer: SharingConsumer },
      sharedBatchBuffers: true,
      maxBufferedBytes: 1024 * 1024,
      maxBufferedMessages: 10_000,
      consumeBatchSize: 170,
    });
    const done: number[] = [];
    subs.push(
      h.consumer.partitions$
        .pipe(
          mergeMap((p: PartitionStream) =>
            p.messages$.pipe(
              // 200 × 4 KiB (0.8 MiB own bytes) fits the 1 MiB limit, as with copies; a tail
              // held back pins two batches of 170 (above the limit in whole batches)
              bufferCount(200),
              mergeMap((batch) => batch),
              p.acknowledge(),
            ),
          ),
        )
        .subscribe((m) => done.push(m.offset)),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2000, 4096);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => done.length === 2000, `2000 done (${done.length})`, 10_000);
    assert.equal(h.consumer.metrics().partitions[0]?.bufferedBytes, 0, 'nothing left counted');
    await h.consumer.close();
  });
});
