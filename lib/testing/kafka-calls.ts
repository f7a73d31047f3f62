/**
 * Promise forms of the node-rdkafka calls the testing kit makes through its own helper clients
 * (never through a ReactiveConsumer).
 */
import * as Kafka from 'node-rdkafka';
import type { Metadata, TopicPartitionOffset } from 'node-rdkafka';

/** The longest any single helper call may take. */
export const CALL_TIMEOUT_MS = 15_000;

export function connect<C extends Kafka.Producer | Kafka.KafkaConsumer>(
  client: C,
): Promise<Metadata> {
  return new Promise((resolve, reject) =>
    client.connect({ timeout: CALL_TIMEOUT_MS }, (err, md) => (err ? reject(err) : resolve(md))),
  );
}

export function disconnect(client: Kafka.Producer | Kafka.KafkaConsumer): Promise<void> {
  return new Promise((resolve) => {
    if (!client.isConnected()) return resolve();
    // node-rdkafka's poll interval goes on calling poll() while disconnect() destroys the client
    // on a worker thread (it stops only at 'disconnected'): a poll then locks freed memory and
    // blocks the main thread for good. Seen as a hung test process.
    if ('setPollInterval' in client) client.setPollInterval(0);
    client.disconnect(() => resolve());
  });
}

export function metadata(client: Kafka.Producer, topic: string): Promise<Metadata> {
  return new Promise((resolve, reject) =>
    client.getMetadata({ topic, timeout: CALL_TIMEOUT_MS }, (err, md) =>
      err ? reject(err) : resolve(md),
    ),
  );
}

export function watermarks(
  client: Kafka.Producer,
  topic: string,
  partition: number,
): Promise<{ low: number; high: number }> {
  return new Promise((resolve, reject) =>
    client.queryWatermarkOffsets(topic, partition, CALL_TIMEOUT_MS, (err, w) =>
      err ? reject(err) : resolve({ low: w.lowOffset, high: w.highOffset }),
    ),
  );
}

export function committed(
  consumer: Kafka.KafkaConsumer,
  partitions: { topic: string; partition: number }[],
): Promise<TopicPartitionOffset[]> {
  return new Promise((resolve, reject) =>
    consumer.committed(partitions, CALL_TIMEOUT_MS, (err, r) => (err ? reject(err) : resolve(r))),
  );
}

export function createTopic(
  bootstrapServers: string,
  topic: string,
  partitions: number,
  replicationFactor: number,
): Promise<void> {
  const admin = Kafka.AdminClient.create({ 'bootstrap.servers': bootstrapServers });
  return new Promise<void>((resolve, reject) =>
    admin.createTopic(
      { topic, num_partitions: partitions, replication_factor: replicationFactor },
      CALL_TIMEOUT_MS,
      (err) => (err ? reject(err) : resolve()),
    ),
  ).finally(() => admin.disconnect());
}

export function deleteTopic(bootstrapServers: string, topic: string): Promise<void> {
  const admin = Kafka.AdminClient.create({ 'bootstrap.servers': bootstrapServers });
  return new Promise<void>((resolve, reject) =>
    admin.deleteTopic(topic, CALL_TIMEOUT_MS, (err) => (err ? reject(err) : resolve())),
  ).finally(() => admin.disconnect());
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
