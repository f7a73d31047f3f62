import { randomBytes } from 'node:crypto';
import * as Kafka from 'node-rdkafka';
import type { KafkaBinding } from '../binding';
import type { ReactiveConsumerOptions } from '../config';
import { toHeaders } from '../internal/binding/message-conversion';
import { MockBroker, partitionKey } from './mock/broker';
import type { Isolation, MockTxn } from './mock/broker';
import { MockClient } from './mock/client-parts';
import { mockConsumerClass } from './mock/consumer';
import { keyHash, mockProducerClass } from './mock/producer';
import { GroupMember } from './group-member';
import type { JoinGroupOptions, TestGroupProtocol } from './group-member';
import { kitConsumerOptions } from './group-member';
import type { ReadRecord, ReadRecordsOptions } from './read-records';
import { produceArgs } from './records';
import type { OffsetsByPartition, ProducedRecord, TestRecord, TestTopic } from './test-cluster';

export interface MockKafkaOptions {
  /** Partitions of `createTopic()` when it is not told. @default 4 */
  partitions?: number;
  /**
   * The group protocol of `consumerOptions()` and `joinGroup()`: `'consumer'` (KIP-848) or
   * `'classic'` (with the cooperative-sticky assignor; for an eager group set
   * `partition.assignment.strategy` in the consumers' config and in `joinGroup()`'s).
   * @default 'consumer'
   */
  groupProtocol?: TestGroupProtocol;
}

/** How `produce()` writes its records: outside a transaction (default), or inside one. */
export interface MockProduceOptions {
  /**
   * Write the records in one transaction and commit it, abort it (`read_committed` consumers never
   * see them), or leave it open (they hold back everything after them until the
   * {@link MockKafka} closes).
   */
  transaction?: 'commit' | 'abort' | 'open';
}

/** A planned failure of a group's next commits (see {@link MockKafka.failCommits}). */
export interface MockCommitFailure {
  /** How many commits fail. @default 1 */
  count?: number;
  /** The librdkafka error code they fail with. @default 7 (REQUEST_TIMED_OUT) */
  code?: number;
  /**
   * The broker applies them anyway: the answer was a timeout of a request that still reached the
   * broker (docs/rebalance-semantics.md, "Commits of unknown outcome"). @default false
   */
  appliedAnyway?: boolean;
}

/**
 * Kafka in memory, for fast, deterministic unit tests of a pipeline (as Java's MockConsumer): its
 * {@link MockKafka.binding} is a node-rdkafka-compatible module that `ReactiveConsumer` takes as its
 * `binding` option (`consumerOptions()` sets it), so the real library — its revoke protocol,
 * commits, dead letters and transactions — runs against topics, consumer groups and transactions
 * held in this object. No broker, no native client, no network: a test takes milliseconds, and with
 * a {@link VirtualClock} installed, hours of backoff and commit intervals pass at once.
 *
 * Its members have the same names as {@link TestCluster}'s, so a test can move between the two.
 * What it does not model: replication, broker failures, quotas, compaction, `rememberCompleted`
 * (it has no AdminClient), and timing of the network — a test that needs them runs against
 * `startTestCluster()` or a real broker.
 */
export class MockKafka implements AsyncDisposable {
  /** Pass as the `binding` option of a `ReactiveConsumer` (`consumerOptions()` does). */
  readonly binding: KafkaBinding;
  readonly groupProtocol: TestGroupProtocol;
  private readonly broker = new MockBroker();
  private readonly defaultPartitions: number;
  private readonly members = new Set<GroupMember>();
  private readonly openTxns: { abort(): void }[] = [];
  private rr = 0;
  private closed = false;

  constructor(options: MockKafkaOptions = {}) {
    const partitions = options.partitions ?? 4;
    assertPartitions(partitions);
    this.defaultPartitions = partitions;
    const protocol = options.groupProtocol ?? 'consumer';
    if (protocol !== 'consumer' && protocol !== 'classic') {
      throw new RangeError(
        `Expected \`groupProtocol\` to be 'consumer' or 'classic', got ${String(protocol)}`,
      );
    }
    this.groupProtocol = protocol;
    // One base class for this cluster's clients: its consumer and producer are of one module.
    class Client extends MockClient {}
    const Producer = mockProducerClass(this.broker, new Map(), Client);
    this.binding = Object.freeze({
      KafkaConsumer: mockConsumerClass(this.broker, Client),
      Producer,
      AdminClient: {
        create(): never {
          throw new Error(
            'MockKafka has no AdminClient: `rememberCompleted` needs startTestCluster() or a real cluster',
          );
        },
      } as unknown as typeof Kafka.AdminClient,
      librdkafkaVersion: Kafka.librdkafkaVersion,
      features: Kafka.features,
      name: 'reactive-rdkafka/testing MockKafka',
      version: '1',
    });
  }

  /** Creates a topic (a random name unless `name` is given) of `partitions` partitions. */
  async createTopic(options: { name?: string; partitions?: number } = {}): Promise<TestTopic> {
    this.assertOpen();
    const name = options.name ?? `test-topic-${randomBytes(4).toString('hex')}`;
    const partitions = options.partitions ?? this.defaultPartitions;
    assertPartitions(partitions);
    this.broker.createTopic(name, partitions);
    return { name, partitions };
  }

  /**
   * Appends the records in order (each to its `partition`, else by its key's hash, else
   * round-robin) and resolves with where each landed. Fails, writing nothing, when the topic or a
   * partition does not exist.
   */
  async produce(
    topic: string,
    records: readonly (TestRecord | string | Buffer)[],
    options: MockProduceOptions = {},
  ): Promise<ProducedRecord[]> {
    this.assertOpen();
    const t = options.transaction;
    if (t !== undefined && t !== 'commit' && t !== 'abort' && t !== 'open') {
      throw new RangeError(
        `Expected \`transaction\` to be 'commit', 'abort' or 'open', got ${String(t)}`,
      );
    }
    const n = this.broker.partitionCount(topic);
    const args = records.map((r) => produceArgs(r));
    for (const a of args) {
      if (n === 0 || (a.partition !== null && (a.partition < 0 || a.partition >= n))) {
        throw new Error(
          `MockKafka: no partition ${a.partition ?? ''} of topic ${topic} (it has ${n})`,
        );
      }
    }
    // Written straight to the logs: no client, no timer (it works the same under a VirtualClock).
    const txn: MockTxn | undefined =
      options.transaction === undefined ? undefined : { status: 'open' };
    const touched = new Set<string>();
    const landed = args.map((a, i) => {
      const partition =
        a.partition ?? (a.key !== undefined ? keyHash(Buffer.from(a.key)) % n : (this.rr + i) % n);
      const offset = this.broker.append(topic, partition, {
        key: a.key === undefined ? null : Buffer.from(a.key),
        value: a.value,
        headers: a.headers ?? [],
        timestamp: a.timestamp ?? Date.now(),
        txn,
      });
      touched.add(partitionKey(topic, partition));
      return { topic, partition, offset };
    });
    this.rr += args.length;
    if (txn !== undefined && options.transaction === 'commit') {
      this.broker.endTxn(txn, 'committed', touched);
    } else if (txn !== undefined && options.transaction === 'abort') {
      this.broker.endTxn(txn, 'aborted', touched);
    } else if (txn !== undefined) {
      this.openTxns.push({ abort: () => this.broker.endTxn(txn, 'aborted', touched) });
    }
    return landed;
  }

  /**
   * Options for a `ReactiveConsumer` of this mock: its `binding`, a `group.id` (random unless
   * given), the group protocol and `auto.offset.reset: earliest`. Spread your own on top.
   */
  consumerOptions(options: {
    topics: readonly string[];
    groupId?: string;
  }): ReactiveConsumerOptions & { config: { 'group.id': string }; binding: KafkaBinding } {
    return {
      ...kitConsumerOptions('mock:9092', this.groupProtocol, options),
      binding: this.binding,
    };
  }

  /**
   * Joins `groupId` with a bare member that takes its share of `topics`' partitions and does
   * nothing with them; `leave()` it to force the next rebalance (see {@link GroupMember}).
   */
  async joinGroup(
    groupId: string,
    topics: readonly string[],
    options: JoinGroupOptions = {},
  ): Promise<GroupMember> {
    this.assertOpen();
    const member = await GroupMember.join(
      'mock:9092',
      groupId,
      topics,
      this.groupProtocol,
      options,
      this.binding.KafkaConsumer,
    );
    this.members.add(member);
    return member;
  }

  /** The offsets `groupId` committed on `topic` (the next offset to read), by partition. */
  async committedOffsets(groupId: string, topic: string): Promise<OffsetsByPartition> {
    const committed = this.broker.group(groupId).committed;
    const out: OffsetsByPartition = {};
    for (let p = 0; p < this.broker.partitionCount(topic); p++) {
      const offset = committed.get(partitionKey(topic, p));
      if (offset !== undefined) out[p] = offset;
    }
    return out;
  }

  /** The end offset (the offset the next record gets) of every partition of `topic`. */
  async endOffsets(topic: string): Promise<OffsetsByPartition> {
    const out: OffsetsByPartition = {};
    for (let p = 0; p < this.broker.partitionCount(topic); p++) {
      out[p] = this.broker.end(topic, p, 'read_uncommitted');
    }
    return out;
  }

  /** Records of `topic` that `groupId` has not committed past, by partition (`{}`: none). */
  async uncommitted(groupId: string, topic: string): Promise<OffsetsByPartition> {
    const committed = await this.committedOffsets(groupId, topic);
    const ends = await this.endOffsets(topic);
    const out: OffsetsByPartition = {};
    for (const [p, end] of Object.entries(ends)) {
      const left = end - (committed[Number(p)] ?? 0);
      if (left !== 0) out[Number(p)] = left;
    }
    return out;
  }

  /**
   * Every record of `topic`, in partition and offset order: under `read_committed` (default)
   * without aborted transactions' records and up to the first record of a transaction still open.
   */
  async readRecords(topic: string, options: ReadRecordsOptions = {}): Promise<ReadRecord[]> {
    const isolation: Isolation = options.isolation ?? 'read_committed';
    if (isolation !== 'read_committed' && isolation !== 'read_uncommitted') {
      throw new RangeError(
        `Expected \`isolation\` to be 'read_committed' or 'read_uncommitted', got ${String(isolation)}`,
      );
    }
    const out: ReadRecord[] = [];
    for (let partition = 0; partition < this.broker.partitionCount(topic); partition++) {
      const log = this.broker.log(topic, partition) ?? [];
      const end = this.broker.end(topic, partition, isolation);
      for (const e of log.slice(0, end)) {
        if (!MockBroker.delivers(e, isolation)) continue;
        out.push({
          topic,
          partition,
          offset: e.offset,
          key: e.key,
          value: e.value,
          headers: toHeaders(e.headers),
          timestamp: e.timestamp,
        });
      }
    }
    return out;
  }

  /**
   * The next commits of `groupId` fail (after the commits already answered): `count` of them,
   * with `code`, applied by the broker anyway with `appliedAnyway` — to test what a pipeline does
   * when a commit times out or is refused. Consumer commits only: `processTransactional()`
   * commits its offsets with its transactions, which this does not touch.
   */
  failCommits(groupId: string, failure: MockCommitFailure = {}): void {
    const count = failure.count ?? 1;
    if (!Number.isInteger(count) || count < 1) {
      throw new RangeError(`Expected \`count\` to be a positive integer, got ${String(count)}`);
    }
    this.broker.group(groupId).failures.push({
      code: failure.code ?? 7,
      remaining: count,
      appliedAnyway: failure.appliedAnyway === true,
    });
  }

  /** Makes the members of `joinGroup()` leave and aborts what `produce()` left open. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.members].map((m) => m.leave()));
    for (const t of this.openTxns.splice(0)) t.abort();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the MockKafka is closed');
  }
}

function assertPartitions(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > 10_000) {
    throw new RangeError(
      `Expected \`partitions\` to be an integer from 1 to 10000, got ${String(n)}`,
    );
  }
}
