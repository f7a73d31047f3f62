/**
 * Topic set-up for the bench through plain node-rdkafka clients (never through a contender):
 * create, fill with fixed-size values, read watermarks, delete.
 */
import * as Kafka from 'node-rdkafka';
import { seededRandom } from '../integration/helpers/random';

const ERR_QUEUE_FULL = Kafka.CODES.ERRORS.ERR__QUEUE_FULL;

function adminClient(brokers: string): Kafka.IAdminClient {
  return Kafka.AdminClient.create({ 'bootstrap.servers': brokers });
}

export async function createTopic(
  brokers: string,
  topic: string,
  partitions: number,
): Promise<void> {
  const admin = adminClient(brokers);
  try {
    await new Promise<void>((resolve, reject) =>
      admin.createTopic(
        { topic, num_partitions: partitions, replication_factor: 1 },
        30_000,
        (err) => (err ? reject(err) : resolve()),
      ),
    );
  } finally {
    admin.disconnect();
  }
  const deadline = Date.now() + 30_000;
  while ((await partitionCount(brokers, topic)) !== partitions) {
    if (Date.now() > deadline) throw new Error(`topic ${topic} did not get ${partitions} leaders`);
    await sleep(100);
  }
}

export async function deleteTopic(brokers: string, topic: string): Promise<void> {
  const admin = adminClient(brokers);
  try {
    await new Promise<void>((resolve, reject) =>
      admin.deleteTopic(topic, 30_000, (err) => (err ? reject(err) : resolve())),
    );
  } finally {
    admin.disconnect();
  }
}

async function withInspector<T>(
  brokers: string,
  fn: (c: Kafka.KafkaConsumer) => Promise<T>,
): Promise<T> {
  const consumer = new Kafka.KafkaConsumer(
    {
      'bootstrap.servers': brokers,
      'group.id': `bench-inspect-${process.pid}`,
      'enable.auto.commit': false,
    },
    {},
  );
  await new Promise<void>((resolve, reject) =>
    consumer.connect({ timeout: 30_000 }, (err) => (err ? reject(err) : resolve())),
  );
  try {
    return await fn(consumer);
  } finally {
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
  }
}

/** Partitions with a leader; 0 when the topic does not exist. */
export async function partitionCount(brokers: string, topic: string): Promise<number> {
  return withInspector(
    brokers,
    (c) =>
      new Promise<number>((resolve, reject) =>
        c.getMetadata({ topic, timeout: 10_000 }, (err, md) => {
          if (err) return reject(err);
          const t = md.topics.find((x) => x.name === topic);
          resolve(t ? t.partitions.filter((p) => p.leader >= 0).length : 0);
        }),
      ),
  );
}

export async function topicExists(brokers: string, topic: string): Promise<boolean> {
  return withInspector(
    brokers,
    (c) =>
      new Promise<boolean>((resolve, reject) =>
        c.getMetadata({ timeout: 10_000 }, (err, md) =>
          err ? reject(err) : resolve(md.topics.some((t) => t.name === topic)),
        ),
      ),
  );
}

/** High watermark of each partition. */
export async function highWatermarks(
  brokers: string,
  topic: string,
  partitions: number,
): Promise<number[]> {
  return withInspector(brokers, async (c) => {
    const out: number[] = [];
    for (let p = 0; p < partitions; p++) {
      out.push(
        await new Promise<number>((resolve, reject) =>
          c.queryWatermarkOffsets(topic, p, 10_000, (err, w) =>
            err ? reject(err) : resolve(w.highOffset),
          ),
        ),
      );
    }
    return out;
  });
}

export interface FillProgress {
  (acked: number): void;
}

/**
 * Produces `count` records round-robin over the partitions, values of `valueBytes` pseudo-random
 * bytes (seeded), keys the record index, uncompressed; resolves when every delivery is confirmed.
 */
export async function fillTopic(
  brokers: string,
  topic: string,
  partitions: number,
  count: number,
  valueBytes: number,
  seed: number,
  onProgress: FillProgress = () => undefined,
  /** Distinct keys (`k<i mod keys>`); by default every record has its own key. */
  keys?: number,
): Promise<void> {
  const random = seededRandom(seed);
  const pool = Buffer.alloc(valueBytes + 4096);
  for (let i = 0; i < pool.length; i++) pool[i] = Math.floor(random() * 256);
  const producer = new Kafka.Producer({
    'bootstrap.servers': brokers,
    dr_cb: true,
    'linger.ms': 20,
    'batch.size': 1_000_000,
    'queue.buffering.max.messages': 200_000,
    'compression.codec': 'none',
    acks: 1,
  } as Kafka.ProducerGlobalConfig);
  await new Promise<void>((resolve, reject) =>
    producer.connect({ timeout: 30_000 }, (err) => (err ? reject(err) : resolve())),
  );
  producer.setPollInterval(10);
  let acked = 0;
  let failure: unknown;
  producer.on('delivery-report', (err) => {
    if (err) failure ??= err;
    acked += 1;
    if (acked % 10_000 === 0) onProgress(acked);
  });
  try {
    for (let i = 0; i < count; i++) {
      const start = i % 4096;
      for (;;) {
        try {
          producer.produce(
            topic,
            i % partitions,
            pool.subarray(start, start + valueBytes),
            keys === undefined ? String(i) : `k${i % keys}`,
          );
          break;
        } catch (err) {
          if ((err as { code?: number }).code !== ERR_QUEUE_FULL) throw err;
          await sleep(5);
        }
      }
      if (failure) throw failure;
    }
    const deadline = Date.now() + 120_000;
    while (acked < count) {
      if (failure) throw failure;
      if (Date.now() > deadline) throw new Error(`fill ${topic}: ${acked}/${count} confirmed`);
      await sleep(20);
    }
    if (failure) throw failure;
    onProgress(acked);
  } finally {
    // A poll during the native disconnect can block the main thread for good.
    producer.setPollInterval(0);
    await new Promise<void>((resolve) => producer.disconnect(() => resolve()));
  }
}

/**
 * Makes sure `topic` holds exactly `count` records over `partitions` partitions, reusing it when it
 * already does (a previous run made it), recreating it otherwise.
 */
export async function ensureFilledTopic(
  brokers: string,
  topic: string,
  partitions: number,
  count: number,
  valueBytes: number,
  seed: number,
  onProgress: FillProgress,
): Promise<'reused' | 'filled'> {
  if (await topicExists(brokers, topic)) {
    const parts = await partitionCount(brokers, topic);
    if (parts === partitions) {
      const ends = await highWatermarks(brokers, topic, partitions);
      if (ends.reduce((a, b) => a + b, 0) === count) return 'reused';
    }
    await deleteTopic(brokers, topic);
    await sleep(1000);
  }
  await createTopic(brokers, topic, partitions);
  await fillTopic(brokers, topic, partitions, count, valueBytes, seed, onProgress);
  return 'filled';
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
