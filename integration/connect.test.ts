import assert from 'node:assert/strict';
import type { Assignment, LibrdKafkaError } from 'node-rdkafka';
import { resolveSettings } from '../lib/internal/settings/resolve-settings';
import { ConsumerClient } from '../lib/internal/binding/consumer-client';
import type { Message } from '../lib/internal/binding/rdkafka';
import { Code } from '../lib/internal/binding/rdkafka';
import {
  BROKERS,
  committedOffsets,
  createTopic,
  highWatermarks,
  produce,
  readAll,
  uniqueName,
  waitFor,
} from './helpers/kafka';
import { useTestOutput } from './helpers/output';

/**
 * The library's connect path against the real broker: connect, subscribe, consume every record,
 * commit with broker confirmation, and check what Kafka holds afterwards.
 */
describe('connect path (real broker)', () => {
  const output = useTestOutput();

  async function consumeAll(
    topic: string,
    partitions: number,
    expected: number,
  ): Promise<{ messages: Message[]; groupId: string }> {
    const groupId = uniqueName('connect-group');
    const logger = output.logger('consumer');
    const settings = resolveSettings({
      config: { 'bootstrap.servers': BROKERS, 'group.id': groupId },
      topicConfig: { 'auto.offset.reset': 'earliest' },
      topics: [topic],
      logger,
    });
    const client: ConsumerClient = new ConsumerClient(
      settings,
      logger,
      (err: LibrdKafkaError, assignment: Assignment[]) => {
        logger.info({ code: err.code, assignment }, 'rebalance');
        if (err.code === Code.ASSIGN_PARTITIONS) client.raw.assign(assignment);
        else client.raw.unassign();
      },
    );
    await client.connect();
    client.raw.subscribe([topic]);
    const messages: Message[] = [];
    const next = new Map<number, number>();
    try {
      await waitFor(
        async () => {
          const batch = await client.consume(100);
          for (const m of batch) {
            messages.push(m);
            next.set(m.partition, m.offset + 1);
          }
          return messages.length >= expected;
        },
        { timeoutMs: 60_000, what: `${expected} messages from ${topic}`, intervalMs: 0 },
      );
      const offsets = [...next].map(([partition, offset]) => ({ topic, partition, offset }));
      const commit = client.commit(offsets);
      // Commit results are delivered only while consume() runs.
      let confirmed = false;
      void commit.then(() => (confirmed = true));
      await waitFor(
        async () => {
          await client.consume(10);
          return confirmed;
        },
        { timeoutMs: 15_000, what: 'commit confirmation', intervalMs: 0 },
      );
      await commit;
      assert.equal(client.pendingCommitCount, 0);
    } finally {
      await client.disconnect();
    }
    assert.equal(messages.length, expected, `expected exactly ${expected} messages`);
    void partitions;
    return { messages, groupId };
  }

  it('consumes every keyed message and commits offsets equal to the high watermarks', async () => {
    const topic = uniqueName('connect');
    const partitions = 4;
    await createTopic(topic, partitions);
    const records = Array.from({ length: 400 }, (_, i) => ({ key: `k${i}`, value: `v${i}` }));
    await produce(topic, records);

    const { messages, groupId } = await consumeAll(topic, partitions, records.length);

    const keys = messages.map((m) => m.key?.toString());
    assert.equal(new Set(keys).size, records.length, 'no key twice');
    assert.deepEqual(new Set(keys), new Set(records.map((r) => r.key)));
    for (const m of messages) assert.equal(m.value?.toString(), `v${m.key?.toString().slice(1)}`);

    const ends = await highWatermarks(topic, partitions);
    assert.equal(
      ends.reduce((a, b) => a + b, 0),
      records.length,
    );
    assert.ok(
      ends.every((e) => e > 0),
      `every partition got records: ${ends.join(',')}`,
    );
    const committed = await committedOffsets(groupId, topic, partitions);
    assert.ok(
      committed.every((c) => typeof c === 'number'),
      `all committed: ${String(committed)}`,
    );
    assert.deepEqual(committed, ends);
  });

  it('reads a zstd-compressed topic', async () => {
    const topic = uniqueName('zstd');
    await createTopic(topic, 2, { 'compression.type': 'zstd' });
    const value = 'compressible '.repeat(200);
    const records = Array.from({ length: 200 }, (_, i) => ({
      key: `z${i}`,
      value: `${i}:${value}`,
    }));
    await produce(topic, records, { 'compression.codec': 'zstd' });

    // A separate reader sees the records too, so the topic really holds zstd batches we can read.
    assert.equal((await readAll(topic, 2)).length, records.length);
    const { messages, groupId } = await consumeAll(topic, 2, records.length);
    assert.deepEqual(
      new Set(messages.map((m) => m.value?.toString())),
      new Set(records.map((r) => r.value)),
    );
    assert.deepEqual(await committedOffsets(groupId, topic, 2), await highWatermarks(topic, 2));
  });
});
