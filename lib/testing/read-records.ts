/**
 * Reading a topic back for assertions (`TestCluster.readRecords`): a helper consumer outside any
 * group, of the isolation level asked for, takes the end of each partition when the read begins
 * (the last stable offset under `read_committed`, before any transaction still open; the high
 * watermark under `read_uncommitted`), assigns every partition from its first offset and reads
 * until its position reaches that end — under `read_committed`, past the aborted records and
 * transaction markers it never delivers.
 */
import * as Kafka from 'node-rdkafka';
import type { KafkaMessage } from '../types';
import { toHeaders, toKey } from '../internal/binding/message-conversion';
import { connect, disconnect } from './kafka-calls';

/** A record as read back: the fields of a message a handler gets that the record itself holds. */
export type ReadRecord = Pick<
  KafkaMessage,
  'topic' | 'partition' | 'offset' | 'key' | 'value' | 'headers' | 'timestamp'
>;

export interface ReadRecordsOptions {
  /**
   * `read_committed` (default) returns what a transactional consumer sees now: records of
   * committed transactions and non-transactional ones, never those of aborted transactions, and
   * nothing from the first record of a transaction still open on. `read_uncommitted` returns
   * every record written.
   */
  isolation?: 'read_committed' | 'read_uncommitted';
  /** How long the read may take before it fails, naming the partitions not read to their end. @default 30000 */
  timeoutMs?: number;
}

/** Reads the `partitions` of `topic` up to where each ended when the read began. */
export async function readRecords(
  bootstrapServers: string,
  topic: string,
  partitions: number,
  options: ReadRecordsOptions = {},
): Promise<ReadRecord[]> {
  const isolation = options.isolation ?? 'read_committed';
  if (isolation !== 'read_committed' && isolation !== 'read_uncommitted') {
    throw new RangeError(
      `Expected \`isolation\` to be 'read_committed' or 'read_uncommitted', got ${String(isolation)}`,
    );
  }
  const timeoutMs = options.timeoutMs ?? 30_000;
  const reader = new Kafka.KafkaConsumer(
    {
      'bootstrap.servers': bootstrapServers,
      'group.id': `reactive-rdkafka-testing-reader-${process.pid}-${Date.now()}`,
      'enable.auto.commit': false,
      'isolation.level': isolation,
      'client.id': 'reactive-rdkafka-testing-reader',
    },
    { 'auto.offset.reset': 'earliest' },
  );
  await connect(reader);
  const out: ReadRecord[] = [];
  try {
    // The reader's own isolation level decides where a partition ends now.
    const ends = new Map<number, number>();
    for (let partition = 0; partition < partitions; partition++) {
      const end = await new Promise<number>((resolve, reject) =>
        reader.queryWatermarkOffsets(topic, partition, timeoutMs, (err, w) =>
          err ? reject(err) : resolve(w.highOffset),
        ),
      );
      if (end > 0) ends.set(partition, end);
    }
    const wanted = [...ends].map(([partition, end]) => ({ partition, end }));
    if (wanted.length === 0) return [];
    reader.assign(wanted.map((p) => ({ topic, partition: p.partition, offset: 0 })));
    const deadline = Date.now() + timeoutMs;
    let left = wanted;
    while (left.length > 0) {
      if (Date.now() > deadline) {
        const at = reader.position(left.map((p) => ({ topic, partition: p.partition })));
        throw new Error(
          `readRecords(${topic}): not read to the end within ${timeoutMs} ms: ${left
            .map((p) => {
              const pos = at.find((x) => x.partition === p.partition)?.offset;
              return `partition ${p.partition} at ${String(pos)} of ${p.end}`;
            })
            .join(', ')}`,
        );
      }
      const batch = await new Promise<Kafka.Message[]>((resolve, reject) =>
        reader.consume(500, (err, messages) => (err ? reject(err) : resolve(messages))),
      );
      for (const m of batch) {
        const end = ends.get(m.partition) ?? 0;
        if (m.offset >= end) continue; // written after the read began
        out.push({
          topic: m.topic,
          partition: m.partition,
          offset: m.offset,
          key: toKey(m.key),
          value: m.value ?? null,
          headers: toHeaders(m.headers),
          timestamp: m.timestamp,
        });
      }
      // The position passes what is never delivered (aborted records, transaction markers).
      const positions = reader.position(left.map((p) => ({ topic, partition: p.partition })));
      left = left.filter((p) => {
        const pos = positions.find((x) => x.partition === p.partition)?.offset;
        return pos === undefined || pos < p.end;
      });
    }
  } finally {
    await disconnect(reader);
  }
  return out.sort((a, b) => a.partition - b.partition || a.offset - b.offset);
}
