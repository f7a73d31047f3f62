/**
 * The demo's Kafka side, through plain node-rdkafka clients (never through the library): the
 * broker (librdkafka's embedded mock cluster, or `KAFKA_BROKERS`), the topic, the producer, and the
 * end offsets and committed offsets the verification compares.
 */
import * as Kafka from 'node-rdkafka';
import type { Metadata, TopicPartitionOffset } from 'node-rdkafka';

export interface DemoCluster {
  /** What consumers put in `bootstrap.servers`. */
  readonly bootstrap: string;
  /** True when the broker is librdkafka's mock cluster living inside `producer`. */
  readonly embedded: boolean;
  /**
   * Produces the demo's messages. With the embedded broker it also owns the mock cluster: the
   * cluster lives exactly as long as this client, so it is disconnected last.
   */
  readonly producer: Kafka.Producer;
  close(): Promise<void>;
}

const TIMEOUT_MS = 15_000;

/**
 * Connects a producer to `KAFKA_BROKERS`, or, without it, creates a producer with
 * `test.mock.num.brokers: 1`: librdkafka then starts a mock cluster inside that client, listening on
 * 127.0.0.1 on a random port, and points the client's `bootstrap.servers` at it. The metadata the
 * client receives names the mock broker's host and port, which other clients can connect to.
 */
export async function startCluster(brokers: string | undefined): Promise<DemoCluster> {
  const embedded = brokers === undefined || brokers.trim() === '';
  const config: Record<string, unknown> = {
    'client.id': 'reactive-rdkafka-demo',
    dr_cb: true,
    'linger.ms': 5,
    // The producer retries on its own; idempotence keeps a retry from writing a message twice,
    // which the verification would count as a duplicate.
    'enable.idempotence': true,
  };
  if (embedded) config['test.mock.num.brokers'] = 1;
  else config['bootstrap.servers'] = brokers;
  const producer = new Kafka.Producer(config as Kafka.ProducerGlobalConfig);
  const metadata = await new Promise<Metadata>((resolve, reject) =>
    producer.connect({ timeout: TIMEOUT_MS }, (err, md) => (err ? reject(err) : resolve(md))),
  );
  producer.setPollInterval(20);
  const bootstrap = embedded
    ? metadata.brokers.map((b) => `${b.host}:${b.port}`).join(',')
    : (brokers as string);
  if (bootstrap === '') throw new Error('the mock cluster reported no broker');
  return {
    bootstrap,
    embedded,
    producer,
    close: () => new Promise<void>((resolve) => producer.disconnect(() => resolve())),
  };
}

function metadataOf(producer: Kafka.Producer, topic: string): Promise<Metadata> {
  return new Promise((resolve, reject) =>
    producer.getMetadata({ topic, timeout: TIMEOUT_MS }, (err, md) =>
      err ? reject(err) : resolve(md),
    ),
  );
}

/** Partitions of `topic` that have a leader (0 when the topic is unknown). */
async function partitionsWithLeader(producer: Kafka.Producer, topic: string): Promise<number> {
  const md = await metadataOf(producer, topic);
  const t = md.topics.find((x) => x.name === topic);
  return t ? t.partitions.filter((p) => p.leader >= 0).length : 0;
}

/**
 * Creates the topic and returns its partition count. The mock cluster has no CreateTopics API: it
 * creates a topic with 4 partitions the first time a client asks for its metadata. A real cluster
 * gets `partitions` partitions through the admin client.
 */
export async function createTopic(
  cluster: DemoCluster,
  topic: string,
  partitions: number,
): Promise<number> {
  if (!cluster.embedded) {
    const admin = Kafka.AdminClient.create({ 'bootstrap.servers': cluster.bootstrap });
    try {
      await new Promise<void>((resolve, reject) =>
        admin.createTopic(
          {
            topic,
            num_partitions: partitions,
            replication_factor: Number(process.env.KAFKA_REPLICATION_FACTOR ?? 1),
          },
          TIMEOUT_MS,
          (err) => (err ? reject(err) : resolve()),
        ),
      );
    } finally {
      admin.disconnect();
    }
  }
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const n = await partitionsWithLeader(cluster.producer, topic);
    if (n > 0 && (cluster.embedded || n === partitions)) return n;
    if (Date.now() > deadline) throw new Error(`topic ${topic} did not appear within 15 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Deletes the demo's topic from a real cluster (the embedded one disappears with its owner). */
export async function deleteTopic(cluster: DemoCluster, topic: string): Promise<void> {
  if (cluster.embedded) return;
  const admin = Kafka.AdminClient.create({ 'bootstrap.servers': cluster.bootstrap });
  try {
    await new Promise<void>((resolve, reject) =>
      admin.deleteTopic(topic, TIMEOUT_MS, (err) => (err ? reject(err) : resolve())),
    );
  } finally {
    admin.disconnect();
  }
}

/**
 * Produces `count` keyed messages whose value is their sequence number, and resolves when every
 * delivery report arrived. Keys spread the messages over the partitions.
 */
export async function produceNumbered(
  producer: Kafka.Producer,
  topic: string,
  count: number,
): Promise<void> {
  let pending = count;
  let failure: Kafka.LibrdKafkaError | undefined;
  const delivered = new Promise<void>((resolve, reject) => {
    const onReport = (err: Kafka.LibrdKafkaError | null): void => {
      if (err) failure ??= err;
      pending -= 1;
      if (pending > 0) return;
      producer.removeListener('delivery-report', onReport);
      if (failure) reject(new Error(`delivery failed: ${failure.message}`, { cause: failure }));
      else resolve();
    };
    producer.on('delivery-report', onReport);
  });
  for (let id = 0; id < count; id++) {
    for (;;) {
      try {
        producer.produce(topic, null, Buffer.from(String(id)), `customer-${id % 97}`);
        break;
      } catch (err) {
        if ((err as { code?: number }).code !== Kafka.CODES.ERRORS.ERR__QUEUE_FULL) throw err;
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  }
  producer.flush(TIMEOUT_MS);
  await delivered;
}

/** End offset (high watermark) of every partition. */
export async function endOffsets(
  producer: Kafka.Producer,
  topic: string,
  partitions: number,
): Promise<number[]> {
  const ends: number[] = [];
  for (let p = 0; p < partitions; p++) {
    ends.push(
      await new Promise<number>((resolve, reject) =>
        producer.queryWatermarkOffsets(topic, p, TIMEOUT_MS, (err, w) =>
          err ? reject(err) : resolve(w.highOffset),
        ),
      ),
    );
  }
  return ends;
}

/**
 * The group's committed offsets, read by a plain consumer that never joins the group.
 * `undefined` where nothing is committed.
 */
export async function committedOffsets(
  bootstrap: string,
  groupId: string,
  topic: string,
  partitions: number,
): Promise<(number | undefined)[]> {
  const consumer = new Kafka.KafkaConsumer(
    { 'bootstrap.servers': bootstrap, 'group.id': groupId, 'enable.auto.commit': false },
    {},
  );
  await new Promise<void>((resolve, reject) =>
    consumer.connect({ timeout: TIMEOUT_MS }, (err) => (err ? reject(err) : resolve())),
  );
  try {
    const tps = Array.from({ length: partitions }, (_, partition) => ({ topic, partition }));
    const got = await new Promise<TopicPartitionOffset[]>((resolve, reject) =>
      consumer.committed(tps, TIMEOUT_MS, (err, r) => (err ? reject(err) : resolve(r))),
    );
    return tps.map(({ partition }) => {
      const o = got.find((r) => r.partition === partition)?.offset;
      return typeof o === 'number' && o >= 0 ? o : undefined;
    });
  } finally {
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
  }
}
