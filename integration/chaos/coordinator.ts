/**
 * Finding a consumer group's coordinator the way Kafka does: the leader of partition
 * `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` of `__consumer_offsets`
 * (`GroupCoordinator.partitionFor`; the same for classic and KIP-848 groups). The leader comes from
 * the cluster metadata, read by one long-lived client, so a lookup at the moment of a kill takes
 * milliseconds.
 */
import * as Kafka from 'node-rdkafka';
import { BROKERS, uniqueName } from '../helpers/kafka';

/** Java's `String.hashCode()`: `s[0]*31^(n-1) + … + s[n-1]` over UTF-16 code units, in int32. */
export function javaStringHashCode(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
  return h;
}

/**
 * Kafka's `Utils.abs`: `n == Integer.MIN_VALUE ? 0 : Math.abs(n)`. Not `n & 0x7fffffff` (that is
 * `Utils.toPositive`, the producer partitioner's): for a negative hash code the two pick different
 * partitions (the cross-check against the cluster's FindCoordinator answer caught that).
 */
export function kafkaAbs(n: number): number {
  return n === -2147483648 ? 0 : Math.abs(n);
}

/** The `__consumer_offsets` partition that holds `group` (`GroupCoordinatorService.partitionFor`). */
export function coordinatorPartition(group: string, offsetsPartitions: number): number {
  return kafkaAbs(javaStringHashCode(group)) % offsetsPartitions;
}

export interface CoordinatorLookup {
  /** The `__consumer_offsets` partition of the group. */
  partition: number;
  /** How many partitions `__consumer_offsets` has (from the metadata). */
  offsetsPartitions: number;
  /** Its leader's broker id (-1: no leader now). */
  leader: number;
  /** Its replicas and in-sync replicas (broker ids), as the metadata lists them now. */
  replicas: number[];
  isrs: number[];
  /** The leader's advertised address. */
  address: string | undefined;
  at: number;
}

/** A plain client (never joining a group) kept connected for fast metadata lookups. */
export class MetadataProbe {
  private constructor(private readonly client: Kafka.KafkaConsumer) {}

  static async connect(brokers = BROKERS): Promise<MetadataProbe> {
    const client = new Kafka.KafkaConsumer(
      {
        'bootstrap.servers': brokers,
        'group.id': uniqueName('probe'),
        'enable.auto.commit': false,
        'topic.metadata.refresh.interval.ms': 1000,
      },
      {},
    );
    await new Promise<void>((resolve, reject) =>
      client.connect({ timeout: 15_000 }, (err) => (err ? reject(err) : resolve())),
    );
    return new MetadataProbe(client);
  }

  /** The group's coordinator (and its offsets partition's replicas) according to the metadata now. */
  coordinatorOf(group: string, timeoutMs = 5000): Promise<CoordinatorLookup> {
    return new Promise((resolve, reject) =>
      this.client.getMetadata({ topic: '__consumer_offsets', timeout: timeoutMs }, (err, md) => {
        if (err) return reject(err);
        const topic = md.topics.find((t) => t.name === '__consumer_offsets');
        if (!topic || topic.partitions.length === 0)
          return reject(new Error('no __consumer_offsets in the metadata (no group yet?)'));
        const partition = coordinatorPartition(group, topic.partitions.length);
        const info = topic.partitions.find((p) => p.id === partition);
        const leader = info?.leader ?? -1;
        const broker = md.brokers.find((b) => b.id === leader);
        resolve({
          partition,
          offsetsPartitions: topic.partitions.length,
          leader,
          replicas: [...(info?.replicas ?? [])],
          isrs: [...(info?.isrs ?? [])],
          address: broker ? `${broker.host}:${broker.port}` : undefined,
          at: Date.now(),
        });
      }),
    );
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.client.disconnect(() => resolve()));
  }
}
