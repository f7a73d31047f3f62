import { randomBytes } from 'node:crypto';
import * as Kafka from 'node-rdkafka';
import type { ReactiveConsumerOptions } from '../config';
import { produceArgs } from './records';
import { GroupMember } from './group-member';
import { readRecords } from './read-records';
import type { ReadRecord, ReadRecordsOptions } from './read-records';
import type { JoinGroupOptions, TestGroupProtocol } from './group-member';
import { kitConsumerOptions } from './group-member';
export { newGroupId } from './group-member';
import {
  committed,
  connect,
  createTopic,
  deleteTopic,
  disconnect,
  metadata,
  sleep,
  watermarks,
  CALL_TIMEOUT_MS,
} from './kafka-calls';

/** Partitions of every topic the embedded cluster creates (librdkafka's mock has no CreateTopics). */
export const EMBEDDED_PARTITIONS = 4;

export interface TestClusterOptions {
  /**
   * Connect to this existing cluster (`host:port,…`) instead of starting the embedded one, for
   * example `process.env.KAFKA_BROKERS`. Topics are then created through the admin API and deleted
   * by `close()`.
   * @default undefined (the embedded cluster)
   */
  bootstrapServers?: string;
  /**
   * Brokers of the embedded cluster (librdkafka's mock cluster, in this process).
   * @default 1
   */
  brokers?: number;
  /**
   * The group protocol of `consumerOptions()` and `joinGroup()`. The embedded cluster's classic
   * protocol refuses commits while a group rebalances and stalls rebalances for ~45 s, so keep
   * `'consumer'` (KIP-848) there.
   * @default 'consumer'
   */
  groupProtocol?: TestGroupProtocol;
}

/** A record to produce. A string or Buffer alone is a value without a key. */
export interface TestRecord {
  value: string | Buffer | null;
  key?: string | Buffer | null;
  /** @default chosen by the producer's partitioner from the key */
  partition?: number;
  headers?: Readonly<Record<string, string | Buffer>>;
  /** Milliseconds since the epoch. @default now */
  timestamp?: number;
}

/** Where a produced record landed. */
export interface ProducedRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
}

export interface TestTopic {
  readonly name: string;
  readonly partitions: number;
}

/** Offsets by partition number: `{ 0: 12, 3: 7 }`. */
export type OffsetsByPartition = Record<number, number>;

/**
 * A Kafka cluster for tests: librdkafka's embedded mock cluster (no broker to install or start:
 * it runs inside a helper client of this process) or an existing cluster. Start it with
 * {@link startTestCluster}; close it when the tests end (`after(() => cluster.close())`).
 */
export class TestCluster implements AsyncDisposable {
  private readonly topics = new Set<string>();
  private readonly members = new Set<GroupMember>();
  private closed = false;

  private constructor(
    /** What consumers put in `bootstrap.servers`. */
    readonly bootstrapServers: string,
    /** True when this is the embedded mock cluster. */
    readonly embedded: boolean,
    /** The group protocol `consumerOptions()` and `joinGroup()` use. */
    readonly groupProtocol: TestGroupProtocol,
    /** Produces; with the embedded cluster it also hosts the mock cluster (closed last). */
    private readonly producer: Kafka.Producer,
  ) {}

  /** @internal Use {@link startTestCluster}. */
  static async start(options: TestClusterOptions = {}): Promise<TestCluster> {
    const external = options.bootstrapServers?.trim();
    const embedded = external === undefined || external === '';
    const brokers = options.brokers ?? 1;
    if (!Number.isInteger(brokers) || brokers < 1 || brokers > 10) {
      throw new RangeError(`Expected \`brokers\` to be an integer from 1 to 10, got ${brokers}`);
    }
    const groupProtocol = options.groupProtocol ?? 'consumer';
    if (groupProtocol !== 'consumer' && groupProtocol !== 'classic') {
      throw new RangeError(
        `Expected \`groupProtocol\` to be 'consumer' or 'classic', got ${String(groupProtocol)}`,
      );
    }
    const config: Record<string, unknown> = {
      'client.id': 'reactive-rdkafka-testing',
      dr_cb: true,
      'linger.ms': 1,
      // A retried send must not write a record twice: tests count records.
      'enable.idempotence': true,
    };
    if (embedded) config['test.mock.num.brokers'] = brokers;
    else config['bootstrap.servers'] = external;
    const producer = new Kafka.Producer(config as Kafka.ProducerGlobalConfig);
    const md = await connect(producer);
    producer.setPollInterval(10);
    // The mock cluster points its host client at itself; the metadata names its brokers' addresses.
    const bootstrap = embedded ? md.brokers.map((b) => `${b.host}:${b.port}`).join(',') : external;
    if (bootstrap === '') {
      await disconnect(producer);
      throw new Error('the embedded cluster reported no broker');
    }
    return new TestCluster(bootstrap, embedded, groupProtocol, producer);
  }

  /**
   * Creates a topic (a random name unless `name` is given) and waits until every partition has a
   * leader. The embedded cluster always creates {@link EMBEDDED_PARTITIONS} partitions; asking it
   * for another count is an error.
   */
  async createTopic(options: { name?: string; partitions?: number } = {}): Promise<TestTopic> {
    this.assertOpen();
    const name = options.name ?? `test-topic-${randomBytes(4).toString('hex')}`;
    const partitions = options.partitions ?? EMBEDDED_PARTITIONS;
    if (this.embedded && partitions !== EMBEDDED_PARTITIONS) {
      throw new RangeError(
        `The embedded cluster creates topics with ${EMBEDDED_PARTITIONS} partitions (librdkafka's mock has no CreateTopics API), got partitions: ${partitions}`,
      );
    }
    if (!this.embedded) await createTopic(this.bootstrapServers, name, partitions, 1);
    this.topics.add(name);
    // The embedded cluster creates the topic on this first metadata request.
    const deadline = Date.now() + CALL_TIMEOUT_MS;
    for (;;) {
      const n = await this.partitionCount(name);
      if (n === partitions) return { name, partitions };
      if (Date.now() > deadline) {
        throw new Error(
          `topic ${name} has ${n} of ${partitions} partitions with a leader after 15 s`,
        );
      }
      await sleep(50);
    }
  }

  /**
   * Produces the records in order and resolves once the cluster confirmed each of them, with where
   * each landed (in the same order).
   */
  async produce(
    topic: string,
    records: readonly (TestRecord | string | Buffer)[],
  ): Promise<ProducedRecord[]> {
    this.assertOpen();
    const landed: (ProducedRecord | undefined)[] = new Array(records.length);
    let pending = records.length;
    if (pending === 0) return [];
    let failure: Error | undefined;
    const done = new Promise<void>((resolve, reject) => {
      const onReport = (err: Kafka.LibrdKafkaError | null, report: Kafka.DeliveryReport): void => {
        const index = report.opaque as unknown;
        if (typeof index !== 'object' || index === null || !('testingIndex' in index)) return;
        const i = (index as { testingIndex: number }).testingIndex;
        if (err)
          failure ??= new Error(`delivery to ${topic} failed: ${err.message}`, { cause: err });
        else landed[i] = { topic, partition: report.partition, offset: report.offset };
        pending -= 1;
        if (pending > 0) return;
        this.producer.removeListener('delivery-report', onReport);
        if (failure) reject(failure);
        else resolve();
      };
      this.producer.on('delivery-report', onReport);
    });
    for (let i = 0; i < records.length; i++) {
      const r = produceArgs(records[i] as TestRecord | string | Buffer);
      for (;;) {
        try {
          this.producer.produce(
            topic,
            r.partition,
            r.value,
            r.key,
            r.timestamp,
            { testingIndex: i },
            r.headers,
          );
          break;
        } catch (err) {
          if ((err as { code?: number }).code !== Kafka.CODES.ERRORS.ERR__QUEUE_FULL) throw err;
          await sleep(5);
        }
      }
    }
    this.producer.flush(CALL_TIMEOUT_MS);
    await done;
    return landed as ProducedRecord[];
  }

  /**
   * Options for a `ReactiveConsumer` of this cluster: `bootstrap.servers`, a `group.id` (random
   * unless given), the cluster's group protocol and `auto.offset.reset: earliest`. Spread them into
   * your own and override what your pipeline sets.
   */
  consumerOptions(options: {
    topics: readonly string[];
    groupId?: string;
  }): ReactiveConsumerOptions & { config: { 'group.id': string } } {
    return kitConsumerOptions(this.bootstrapServers, this.groupProtocol, options);
  }

  /**
   * Joins `groupId` with a bare member that takes its share of `topics`' partitions and does nothing
   * with them (see {@link GroupMember}); `leave()` it to force the next rebalance. `close()` makes
   * every member still there leave.
   */
  async joinGroup(
    groupId: string,
    topics: readonly string[],
    options: JoinGroupOptions = {},
  ): Promise<GroupMember> {
    this.assertOpen();
    const member = await GroupMember.join(
      this.bootstrapServers,
      groupId,
      topics,
      this.groupProtocol,
      options,
    );
    this.members.add(member);
    return member;
  }

  /**
   * The offsets `groupId` has committed on `topic` (the next offset to read, per partition), read
   * without joining the group. Partitions without a commit are absent.
   */
  async committedOffsets(groupId: string, topic: string): Promise<OffsetsByPartition> {
    this.assertOpen();
    const n = await this.partitionCount(topic);
    const reader = new Kafka.KafkaConsumer(
      {
        'bootstrap.servers': this.bootstrapServers,
        'group.id': groupId,
        'enable.auto.commit': false,
        'client.id': 'reactive-rdkafka-testing-offsets',
      },
      {},
    );
    await connect(reader);
    try {
      const got = await committed(
        reader,
        Array.from({ length: n }, (_, partition) => ({ topic, partition })),
      );
      const out: OffsetsByPartition = {};
      for (const r of got)
        if (typeof r.offset === 'number' && r.offset >= 0) out[r.partition] = r.offset;
      return out;
    } finally {
      await disconnect(reader);
    }
  }

  /** The end offset (high watermark: the offset the next record gets) of every partition of `topic`. */
  async endOffsets(topic: string): Promise<OffsetsByPartition> {
    this.assertOpen();
    const n = await this.partitionCount(topic);
    const out: OffsetsByPartition = {};
    for (let p = 0; p < n; p++) out[p] = (await watermarks(this.producer, topic, p)).high;
    return out;
  }

  /**
   * Every record of `topic` written before the call, read back in partition and offset order:
   * to assert what a pipeline wrote (its dead letters, its transactional outputs). Under
   * `read_committed` (the default) as a transactional consumer sees them now: aborted
   * transactions' records are absent, and so is everything from a transaction still open on.
   */
  async readRecords(topic: string, options: ReadRecordsOptions = {}): Promise<ReadRecord[]> {
    this.assertOpen();
    const n = await this.partitionCount(topic);
    return readRecords(this.bootstrapServers, topic, n, options);
  }

  /**
   * Records of `topic` that `groupId` has not committed past, per partition: the end offset minus
   * the committed offset (minus the partition's first offset where nothing is committed).
   * Partitions with nothing left are absent, so `{}` means everything is committed:
   * `assert.deepEqual(await cluster.uncommitted(groupId, topic), {})`.
   */
  async uncommitted(groupId: string, topic: string): Promise<OffsetsByPartition> {
    const committedNow = await this.committedOffsets(groupId, topic);
    const n = await this.partitionCount(topic);
    const out: OffsetsByPartition = {};
    for (let p = 0; p < n; p++) {
      const { low, high } = await watermarks(this.producer, topic, p);
      const left = high - (committedNow[p] ?? low);
      if (left !== 0) out[p] = left;
    }
    return out;
  }

  /**
   * Makes the members of `joinGroup()` leave, deletes the topics it created on an existing cluster,
   * and disconnects; the embedded cluster stops with it. Close your consumers first. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.members].map((m) => m.leave()));
    if (!this.embedded) {
      await Promise.allSettled([...this.topics].map((t) => deleteTopic(this.bootstrapServers, t)));
    }
    await disconnect(this.producer);
  }

  /** `await using cluster = await startTestCluster()` closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private async partitionCount(topic: string): Promise<number> {
    const md = await metadata(this.producer, topic);
    const t = md.topics.find((x) => x.name === topic);
    return t ? t.partitions.filter((p) => p.leader >= 0).length : 0;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the TestCluster is closed');
  }
}

/**
 * Starts a cluster for tests: by default librdkafka's embedded mock cluster (no broker needed),
 * or connects to `bootstrapServers`.
 *
 * @example
 * const cluster = await startTestCluster();
 * const { name: topic } = await cluster.createTopic();
 * await cluster.produce(topic, ['a', 'b', 'c']);
 * const consumer = new ReactiveConsumer(cluster.consumerOptions({ topics: [topic] }));
 */
export function startTestCluster(options?: TestClusterOptions): Promise<TestCluster> {
  return TestCluster.start(options);
}
