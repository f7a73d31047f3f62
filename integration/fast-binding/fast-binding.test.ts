/**
 * The companion binding (fast-binding/) against the stock node-rdkafka, on the real broker, both
 * loaded in one process: every field the library reads (value, key, size, topic, partition,
 * offset, timestamp, headers, partition-EOF events) byte for byte the same from both, on a plain
 * and a zstd-compressed topic; values and keys copies of their own by default, views of one
 * untransferable buffer per partition and batch when shared; and a ReactiveConsumer on it commits
 * what it processed.
 */
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import * as Stock from 'node-rdkafka';
import type { Message } from 'node-rdkafka';
import { ReactiveConsumer } from '../../lib';
import type { KafkaBinding } from '../../lib';
import { BROKERS, committedOffsets, createTopic, uniqueName, waitFor } from '../helpers/kafka';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const fast = require('../../fast-binding') as typeof Stock &
  KafkaBinding & { readonly batchConversion: boolean; err2str(code: number): string };

type Eof = { topic: string; partition: number; offset: number };

const PARTITIONS = 3;

/** Records with every shape a field can take: null and empty values and keys, headers or not. */
function records(n: number): {
  value: Buffer | null;
  key: Buffer | null;
  headers?: { [k: string]: Buffer | string }[];
}[] {
  return Array.from({ length: n }, (_, i) => ({
    value:
      i % 7 === 0
        ? null
        : i % 11 === 0
          ? Buffer.alloc(0)
          : Buffer.from(`value-${i}-`.repeat(i % 50)),
    key:
      i % 5 === 0 ? null : i % 13 === 0 ? Buffer.alloc(0) : Buffer.from([i & 255, 0, 255, i >> 8]),
    headers:
      i % 3 === 0
        ? undefined
        : ([{ h1: `v${i}` }, { h2: Buffer.from([0, 1, 2, i & 255]) }, { h1: 'again' }] as {
            [k: string]: Buffer | string;
          }[]),
  }));
}

async function produceAll(topic: string, n: number, compression: string): Promise<void> {
  const producer = new Stock.Producer({
    'bootstrap.servers': BROKERS,
    dr_cb: true,
    'compression.codec': compression,
    'linger.ms': 5,
  } as Stock.ProducerGlobalConfig);
  await new Promise<void>((resolve, reject) =>
    producer.connect({ timeout: 15_000 }, (err) => (err ? reject(err) : resolve())),
  );
  producer.setPollInterval(20);
  let pending = n;
  const done = new Promise<void>((resolve, reject) =>
    producer.on('delivery-report', (err) => {
      if (err) reject(err);
      else if (--pending === 0) resolve();
    }),
  );
  records(n).forEach((r, i) =>
    producer.produce(
      topic,
      i % PARTITIONS,
      r.value,
      r.key,
      1_700_000_000_000 + i,
      undefined,
      r.headers,
    ),
  );
  await done;
  await new Promise<void>((resolve) => producer.disconnect(() => resolve()));
}

/** Everything in the topic, read by a consumer of `binding`, with the EOF events seen. */
async function readWith(
  binding: typeof Stock,
  topic: string,
  n: number,
  shared: boolean | number = false,
): Promise<{ messages: Message[]; eofs: Eof[]; consumer: Stock.KafkaConsumer }> {
  const c = new binding.KafkaConsumer(
    {
      'bootstrap.servers': BROKERS,
      'group.id': uniqueName('fast-binding'),
      'enable.auto.commit': false,
      'enable.partition.eof': true,
    },
    { 'auto.offset.reset': 'earliest' },
  );
  if (shared !== false)
    (c as unknown as { setBatchBufferSharing(s: boolean | number): void }).setBatchBufferSharing(
      shared,
    );
  await new Promise<void>((resolve, reject) =>
    c.connect({ timeout: 15_000 }, (err) => (err ? reject(err) : resolve())),
  );
  c.assign(Array.from({ length: PARTITIONS }, (_, partition) => ({ topic, partition, offset: 0 })));
  const messages: Message[] = [];
  const eofs: Eof[] = [];
  c.on('partition.eof', (e: Eof) =>
    eofs.push({ topic: e.topic, partition: e.partition, offset: e.offset }),
  );
  await waitFor(
    async () => {
      const batch = await new Promise<Message[]>((resolve, reject) =>
        c.consume(100, (err, m) => (err && err.code !== -185 ? reject(err) : resolve(m ?? []))),
      );
      messages.push(...batch);
      return messages.length >= n && new Set(eofs.map((e) => e.partition)).size === PARTITIONS;
    },
    { timeoutMs: 60_000, what: `${n} messages and every partition's EOF`, intervalMs: 0 },
  );
  return { messages, eofs, consumer: c };
}

const disconnect = (c: Stock.KafkaConsumer): Promise<void> =>
  new Promise((resolve) => c.disconnect(() => resolve()));

/**
 * A postMessage transfer of a shared value's buffer leaves the value (and so every message sharing
 * its buffer) intact: the buffer is untransferable.
 */
function assertNotDetachedByTransfer(value: Buffer): void {
  const before = value.toString('hex');
  const { port1, port2 } = new MessageChannel();
  try {
    port1.postMessage(value.buffer, [value.buffer as ArrayBuffer]);
  } catch {
    // Node refuses to transfer an untransferable buffer (newer versions) or copies it.
  }
  port1.close();
  port2.close();
  assert.equal(value.toString('hex'), before, 'the buffer was not detached by a transfer');
}

/** The fields the library reads, in a comparable form (buffers as hex, `null` kept). */
function fields(m: Message): unknown {
  const hex = (b: unknown): unknown => (Buffer.isBuffer(b) ? b.toString('hex') : b);
  return {
    topic: m.topic,
    partition: m.partition,
    offset: m.offset,
    timestamp: m.timestamp,
    size: m.size,
    value: hex(m.value),
    key: hex(m.key),
    headers: m.headers?.map((h) =>
      Object.fromEntries(Object.entries(h).map(([k, v]) => [k, hex(v)])),
    ),
    // The same properties in the same order (JSON.stringify and hidden classes see it).
    keys: Object.keys(m).join(','),
  };
}

const order = (a: Message, b: Message): number => a.partition - b.partition || a.offset - b.offset;

describe('companion binding (fast-binding/) against the stock node-rdkafka (real broker)', function () {
  this.timeout(120_000);

  it('is a separate librdkafka, with batch conversion and the features the library needs', () => {
    assert.equal(fast.batchConversion, true);
    for (const f of ['zstd', 'lz4', 'ssl', 'sasl_scram']) assert.ok(fast.features.includes(f), f);
    const c = new fast.KafkaConsumer({ 'group.id': 'g', 'bootstrap.servers': BROKERS }, {});
    assert.equal(
      typeof (c as unknown as { _client: { consumeBatch?: unknown } })._client.consumeBatch,
      'function',
    );
    assert.equal(fast.err2str(-185), 'Local: Timed out');
  });

  for (const compression of ['none', 'zstd']) {
    it(`gives every field byte for byte as the stock binding does (${compression})`, async () => {
      const topic = uniqueName(`fast-binding-${compression}`);
      const n = 600;
      await createTopic(topic, PARTITIONS, {
        'compression.type': compression === 'none' ? 'producer' : 'zstd',
      });
      await produceAll(topic, n, compression);
      const [stock, mine] = await Promise.all([
        readWith(Stock, topic, n),
        readWith(fast, topic, n),
      ]);
      await Promise.all([disconnect(stock.consumer), disconnect(mine.consumer)]);
      assert.equal(stock.messages.length, n);
      assert.deepEqual(
        mine.messages.sort(order).map(fields),
        stock.messages.sort(order).map(fields),
      );
      const eof = (e: Eof[]): Eof[] =>
        [...e].sort((a, b) => a.partition - b.partition || a.offset - b.offset).slice(-PARTITIONS);
      assert.deepEqual(eof(mine.eofs), eof(stock.eofs));
      // Copies of their own, as the stock conversion gives: each its own memory, never a slice
      // of a batch (nor of Node's shared Buffer pool).
      const own = mine.messages
        .flatMap((m) => [m.value, m.key])
        .filter((v): v is Buffer => Buffer.isBuffer(v) && v.length > 0);
      assert.ok(own.length > 0);
      for (const v of own) {
        assert.equal(v.byteOffset, 0, 'a copy starts its own memory');
        assert.equal(v.buffer.byteLength, v.length, 'a copy is all of its memory');
      }
    });
  }

  it('bounds the shared buffers when asked (a number of bytes): the same bytes, views of buffers of one partition within the bound', async () => {
    const topic = uniqueName('fast-binding-bounded');
    const n = 300;
    const bound = 1024; // every record here (value, key and headers) fits in it
    await createTopic(topic, PARTITIONS, { 'compression.type': 'zstd' });
    await produceAll(topic, n, 'zstd');
    const stock = await readWith(Stock, topic, n);
    const mine = await readWith(fast, topic, n, bound);
    await Promise.all([disconnect(stock.consumer), disconnect(mine.consumer)]);
    assert.deepEqual(mine.messages.sort(order).map(fields), stock.messages.sort(order).map(fields));
    const shared = mine.messages.flatMap((m) =>
      [m.value, m.key, ...(m.headers ?? []).flatMap((h) => Object.values(h))]
        .filter((v): v is Buffer => Buffer.isBuffer(v) && v.length > 0)
        .map((v) => ({ v, partition: m.partition })),
    );
    assert.ok(shared.length > n / 2, `values, keys and headers (${shared.length})`);
    const partitionsOf = new Map<ArrayBufferLike, Set<number>>();
    for (const { v, partition } of shared) {
      assert.ok(v.buffer.byteLength <= bound, `a buffer within the bound (${v.buffer.byteLength})`);
      partitionsOf.set(v.buffer, (partitionsOf.get(v.buffer) ?? new Set()).add(partition));
    }
    assert.ok(
      [...partitionsOf.values()].every((p) => p.size === 1),
      'no buffer holds two partitions',
    );
    assert.ok(
      partitionsOf.size < shared.length,
      `views share buffers (${partitionsOf.size} for ${shared.length})`,
    );
    // More buffers than partitions: a batch of one partition is split at the bound.
    assert.ok(partitionsOf.size > PARTITIONS, `split at the bound (${partitionsOf.size} buffers)`);
    assertNotDetachedByTransfer(shared[0]!.v);

    // A bound below some messages' size: each of those has a buffer of its own (never split),
    // the same bytes still.
    const small = 64;
    const tight = await readWith(fast, topic, n, small);
    await disconnect(tight.consumer);
    assert.deepEqual(
      tight.messages.sort(order).map(fields),
      stock.messages.sort(order).map(fields),
    );
    const owners = new Map<ArrayBufferLike, Set<number>>();
    for (const m of tight.messages) {
      for (const v of [m.value, m.key]) {
        if (Buffer.isBuffer(v) && v.length > 0)
          owners.set(
            v.buffer,
            (owners.get(v.buffer) ?? new Set()).add(m.offset * 100 + m.partition),
          );
      }
    }
    const large = tight.messages.filter((m) => (m.value?.length ?? 0) > small);
    assert.ok(large.length > 0, 'some values exceed the bound');
    for (const m of large) {
      assert.equal(
        owners.get(m.value!.buffer)!.size,
        1,
        'a message over the bound alone in its buffer',
      );
    }
  });

  it('shares one untransferable buffer per partition and batch among values, keys and headers when asked', async () => {
    const topic = uniqueName('fast-binding-shared');
    const n = 200;
    await createTopic(topic, PARTITIONS);
    await produceAll(topic, n, 'none');
    const stock = await readWith(Stock, topic, n);
    const mine = await readWith(fast, topic, n, true);
    await Promise.all([disconnect(stock.consumer), disconnect(mine.consumer)]);
    assert.deepEqual(mine.messages.sort(order).map(fields), stock.messages.sort(order).map(fields));
    const withValue = mine.messages.filter((m) => m.value !== null && m.value.length > 0);
    const batches = new Set(withValue.map((m) => (m.value as Buffer).buffer));
    // One buffer per partition per batch: a slow partition's kept values pin only its own bytes.
    const partitionsOf = new Map<ArrayBufferLike, Set<number>>();
    for (const m of withValue) {
      const b = (m.value as Buffer).buffer;
      partitionsOf.set(b, (partitionsOf.get(b) ?? new Set()).add(m.partition));
    }
    assert.ok(
      [...partitionsOf.values()].every((p) => p.size === 1),
      'no batch buffer holds two partitions',
    );
    assert.ok(
      batches.size < withValue.length,
      `views share batch buffers (${batches.size} for ${withValue.length})`,
    );
    assertNotDetachedByTransfer(withValue[0]!.value as Buffer);
  });

  for (const sharedBatchBuffers of [false, 8192, true] as const) {
    it(`runs a ReactiveConsumer: everything processed once and committed${sharedBatchBuffers === true ? ' (sharedBatchBuffers: values are views of batch buffers)' : sharedBatchBuffers === 8192 ? ' (sharedBatchBuffers: 8192, views of buffers of at most 8 KiB)' : ''}`, async () => {
      const topic = uniqueName('fast-binding-rc');
      const n = 300;
      await createTopic(topic, PARTITIONS);
      await produceAll(topic, n, 'zstd');
      const group = uniqueName('fast-binding-rc-group');
      const consumer = new ReactiveConsumer({
        config: { 'bootstrap.servers': BROKERS, 'group.id': group },
        topicConfig: { 'auto.offset.reset': 'earliest' },
        topics: [topic],
        binding: fast,
        sharedBatchBuffers,
      });
      assert.deepEqual(
        {
          name: consumer.health().details.binding.name,
          batch: consumer.health().details.binding.batchConversion,
          shared: consumer.health().details.binding.sharedBatchBuffers,
        },
        { name: 'reactive-rdkafka-fast-binding', batch: true, shared: sharedBatchBuffers },
      );
      const seen: string[] = [];
      const expected = records(n);
      let views = 0;
      const sub = consumer
        .process((m) => {
          seen.push(`${m.partition}:${m.offset}`);
          // produceAll wrote record i to partition i % PARTITIONS, at offset ⌊i / PARTITIONS⌋.
          const want = expected[m.offset * PARTITIONS + m.partition]?.value ?? null;
          // (null and empty as the byte-for-byte spec above compares them with the stock binding)
          assert.equal(m.value?.toString('hex') ?? '', want?.toString('hex') ?? '');
          if (
            m.value !== null &&
            m.value.length > 0 &&
            m.value.buffer.byteLength > m.value.length
          ) {
            views += 1;
          }
        })
        .subscribe();
      try {
        await waitFor(() => seen.length >= n, {
          timeoutMs: 60_000,
          what: `${n} messages processed`,
        });
        await consumer.commit();
      } finally {
        sub.unsubscribe();
        await consumer.close();
      }
      assert.equal(new Set(seen).size, n, 'each once');
      assert.equal(seen.length, n, 'none twice');
      // Copies: each value all of its memory. Views (bounded or not): values are slices of
      // buffers they share with other messages.
      if (sharedBatchBuffers !== false)
        assert.ok(views > n / 2, `values share memory (${views} of ${n})`);
      else assert.equal(views, 0, 'values are copies of their own');
      const ends = Array.from({ length: PARTITIONS }, (_, p) => Math.ceil((n - p) / PARTITIONS));
      assert.deepEqual(await committedOffsets(group, topic, PARTITIONS), ends);
    });
  }
});
