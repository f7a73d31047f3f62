/**
 * Real-broker helpers for the integration tests: topics, producing, reading back, committed offsets
 * and watermarks, each through its own node-rdkafka client (never through the library under test).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import * as Kafka from 'node-rdkafka';
import type { Message, TopicPartitionOffset } from 'node-rdkafka';

/** Bootstrap servers of the test cluster (`make kafka-up` starts it). */
export const BROKERS =
  process.env.KAFKA_BROKERS_TEST ?? process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';

/**
 * The test cluster's SASL_PLAINTEXT (SCRAM-SHA-512) listener: node 1's plaintext port + 2, as
 * integration/kafka/kafka.sh lays them out, unless KAFKA_SASL_BROKERS_TEST names it.
 */
export function saslBrokers(): string {
  if (process.env.KAFKA_SASL_BROKERS_TEST) return process.env.KAFKA_SASL_BROKERS_TEST;
  const [host, port] = (BROKERS.split(',')[0] ?? '127.0.0.1:9092').split(':');
  return `${host}:${Number(port) + 2}`;
}

/** A listener of node 1 at `offset` from its plaintext port (kafka.sh's layout), or `env`'s value. */
function node1Listener(offset: number, env: string | undefined): string {
  if (env) return env;
  const [host, port] = (BROKERS.split(',')[0] ?? '127.0.0.1:9092').split(':');
  return `${host}:${Number(port) + offset}`;
}

/** The SSL listener (plaintext port + 3), unless KAFKA_SSL_BROKERS_TEST names it. */
export const sslBrokers = (): string => node1Listener(3, process.env.KAFKA_SSL_BROKERS_TEST);
/** The SASL_SSL (SCRAM-SHA-512) listener (+ 4), unless KAFKA_SASL_SSL_BROKERS_TEST names it. */
export const saslSslBrokers = (): string =>
  node1Listener(4, process.env.KAFKA_SASL_SSL_BROKERS_TEST);
/** The OAUTHBEARER (SASL_PLAINTEXT, unsecured JWS) listener (+ 5), unless KAFKA_OAUTH_BROKERS_TEST names it. */
export const oauthBrokers = (): string => node1Listener(5, process.env.KAFKA_OAUTH_BROKERS_TEST);

/** Where kafka.sh writes the test CA (`ca.pem`) and a CA that signed nothing (`untrusted-ca.pem`). */
export const TLS_DIR = process.env.KAFKA_TLS_DIR_TEST ?? join(__dirname, '..', '.kafka', 'tls');

/** The SCRAM user kafka.sh creates. */
export const SASL_USER = process.env.KAFKA_SASL_USER ?? 'test-user';
export const SASL_PASSWORD = process.env.KAFKA_SASL_PASSWORD ?? 'test-secret';

/** A unique, readable name for a topic or group of one test. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

export async function createTopic(
  topic: string,
  partitions: number,
  config: Record<string, string> = {},
  replicationFactor = Number(process.env.KAFKA_REPLICATION_FACTOR ?? 1),
): Promise<void> {
  const admin = Kafka.AdminClient.create({ 'bootstrap.servers': BROKERS });
  try {
    await new Promise<void>((resolve, reject) =>
      admin.createTopic(
        { topic, num_partitions: partitions, replication_factor: replicationFactor, config },
        15_000,
        (err) => (err ? reject(err) : resolve()),
      ),
    );
  } finally {
    admin.disconnect();
  }
  // Wait until every partition has a leader, so producers and consumers see the whole topic.
  await waitFor(async () => (await partitionCount(topic)) === partitions, {
    timeoutMs: 15_000,
    what: `topic ${topic} with ${partitions} partitions to be visible`,
  });
}

export async function deleteTopic(topic: string): Promise<void> {
  const admin = Kafka.AdminClient.create({ 'bootstrap.servers': BROKERS });
  try {
    await new Promise<void>((resolve, reject) =>
      admin.deleteTopic(topic, 15_000, (err) => (err ? reject(err) : resolve())),
    );
  } finally {
    admin.disconnect();
  }
}

async function withProducer<T>(
  config: Record<string, unknown>,
  fn: (producer: Kafka.Producer) => Promise<T>,
): Promise<T> {
  const producer = new Kafka.Producer({
    'bootstrap.servers': BROKERS,
    dr_cb: true,
    'linger.ms': 5,
    ...config,
  } as Kafka.ProducerGlobalConfig);
  await new Promise<void>((resolve, reject) =>
    producer.connect({ timeout: 15_000 }, (err) => (err ? reject(err) : resolve())),
  );
  producer.setPollInterval(20);
  try {
    return await fn(producer);
  } finally {
    // Stop the poll interval first: a poll during the native disconnect can block the main
    // thread for good (lib/testing/kafka-calls.ts, disconnect).
    producer.setPollInterval(0);
    await new Promise<void>((resolve) => producer.disconnect(() => resolve()));
  }
}

export interface Record_ {
  key: string;
  value: string;
  partition?: number;
  headers?: { [key: string]: string | Buffer }[];
}

/** Produces records and resolves once every delivery report arrived without error. */
export async function produce(
  topic: string,
  records: readonly Record_[],
  producerConfig: Record<string, unknown> = {},
): Promise<void> {
  await withProducer(producerConfig, async (producer) => {
    let pending = records.length;
    let failure: unknown;
    const done = new Promise<void>((resolve, reject) => {
      producer.on('delivery-report', (err) => {
        if (err) failure ??= err;
        pending -= 1;
        if (pending === 0) {
          if (failure) reject(failure as Error);
          else resolve();
        }
      });
      if (pending === 0) resolve();
    });
    for (const r of records) {
      for (;;) {
        try {
          producer.produce(
            topic,
            r.partition ?? null,
            Buffer.from(r.value),
            r.key,
            null,
            undefined,
            r.headers,
          );
          break;
        } catch (err) {
          // Local queue full: let delivery reports drain it.
          if ((err as { code?: number }).code !== Kafka.CODES.ERRORS.ERR__QUEUE_FULL) throw err;
          await new Promise((res) => setTimeout(res, 20));
        }
      }
    }
    producer.flush(30_000);
    await withTimeout(done, 60_000, `delivery of ${records.length} records to ${topic}`);
  });
}

/** A plain consumer (never joining a group) for metadata, watermarks and committed offsets. */
async function withInspector<T>(
  groupId: string,
  fn: (consumer: Kafka.KafkaConsumer) => Promise<T>,
  isolation: 'read_committed' | 'read_uncommitted' = 'read_committed',
): Promise<T> {
  const consumer = new Kafka.KafkaConsumer(
    {
      'bootstrap.servers': BROKERS,
      'group.id': groupId,
      'enable.auto.commit': false,
      'isolation.level': isolation,
    },
    {},
  );
  await new Promise<void>((resolve, reject) =>
    consumer.connect({ timeout: 15_000 }, (err) => (err ? reject(err) : resolve())),
  );
  try {
    return await fn(consumer);
  } finally {
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
  }
}

export async function partitionCount(topic: string): Promise<number> {
  return withInspector(
    uniqueName('inspect'),
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

/**
 * End offsets of every partition, read by a separate client: under `read_committed` (librdkafka's
 * default) the last stable offset, which an open transaction holds back; under `read_uncommitted`
 * the high watermark.
 */
export async function highWatermarks(
  topic: string,
  partitions: number,
  isolation: 'read_committed' | 'read_uncommitted' = 'read_committed',
): Promise<number[]> {
  return withInspector(
    uniqueName('inspect'),
    async (c) => {
      const out: number[] = [];
      const read = (p: number): Promise<number> =>
        new Promise<number>((resolve, reject) =>
          c.queryWatermarkOffsets(topic, p, 10_000, (err, w) =>
            err ? reject(err) : resolve(w.highOffset),
          ),
        );
      for (let p = 0; p < partitions; p++) {
        // A leader moving (a broker killed by a chaos test) answers "Not leader for partition"
        // until the metadata catches up: asked again for up to 30 s.
        const by = Date.now() + 30_000;
        for (;;) {
          try {
            out.push(await read(p));
            break;
          } catch (err) {
            if (Date.now() >= by) throw err;
            await new Promise((r) => setTimeout(r, 250));
          }
        }
      }
      return out;
    },
    isolation,
  );
}

/**
 * The group's committed offsets per partition, read by a separate client. `undefined` means
 * nothing is committed (node-rdkafka omits `offset` or returns a negative logical offset then).
 */
export async function committedOffsets(
  groupId: string,
  topic: string,
  partitions: number,
): Promise<(number | undefined)[]> {
  return withInspector(groupId, async (c) => {
    const tps = Array.from({ length: partitions }, (_, partition) => ({ topic, partition }));
    const res = await new Promise<TopicPartitionOffset[]>((resolve, reject) =>
      c.committed(tps, 10_000, (err, r) => (err ? reject(err) : resolve(r))),
    );
    return tps.map(({ partition }) => {
      const o = res.find((r) => r.partition === partition)?.offset;
      return typeof o === 'number' && o >= 0 ? o : undefined;
    });
  });
}

/** Commits offsets for a group from outside it (the group must have no active members). */
export async function commitOffsetsForGroup(
  groupId: string,
  offsets: TopicPartitionOffset[],
): Promise<void> {
  await withInspector(groupId, async (c) => {
    c.commitSync(offsets);
    await waitFor(
      async () => {
        const got = await new Promise<TopicPartitionOffset[]>((resolve, reject) =>
          c.committed(offsets, 10_000, (err, r) => (err ? reject(err) : resolve(r))),
        );
        return offsets.every(
          (o) =>
            got.find((g) => g.partition === o.partition && g.topic === o.topic)?.offset ===
            o.offset,
        );
      },
      { timeoutMs: 15_000, what: `offsets committed for ${groupId}` },
    );
  });
}

/** Every record in the topic, read from the beginning by a separate consumer (no group commits). */
export async function readAll(topic: string, partitions: number): Promise<Message[]> {
  const ends = await highWatermarks(topic, partitions);
  const total = ends.reduce((a, b) => a + b, 0);
  return withInspector(uniqueName('readall'), async (c) => {
    c.assign(
      ends.map((_, partition) => ({
        topic,
        partition,
        offset: -2 /* OFFSET_BEGINNING */,
      })) as never,
    );
    const out: Message[] = [];
    const deadline = Date.now() + 60_000;
    const reached = () => out.length >= total;
    while (!reached()) {
      if (Date.now() > deadline)
        throw new Error(`readAll(${topic}): read ${out.length} of ${total}`);
      const batch = await new Promise<Message[]>((resolve, reject) =>
        c.consume(1000, (err, m) =>
          err && err.code !== Kafka.CODES.ERRORS.ERR__TIMED_OUT ? reject(err) : resolve(m ?? []),
        ),
      );
      out.push(...batch);
    }
    return out;
  });
}

export interface WaitOptions {
  timeoutMs: number;
  what: string;
  intervalMs?: number;
}

/** Polls a condition until it holds or the deadline passes (then throws naming what it waited for). */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  { timeoutMs, what, intervalMs = 50 }: WaitOptions,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    // A probe that fails (a committed() or watermark query timing out while the broker is busy)
    // says "not yet", not "never": asked again until the deadline, which then names its error.
    try {
      if (await condition()) return;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}` +
          (lastError === undefined ? '' : `; the last check failed: ${String(lastError)}`),
        { cause: lastError },
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** A node-rdkafka call that answers through an error-first callback, as a promise. */
export const call = (fn: (cb: (err: unknown) => void) => void): Promise<void> =>
  new Promise((resolve, reject) => fn((err) => (err ? reject(err as Error) : resolve())));

export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
