import { randomBytes } from 'node:crypto';
import * as Kafka from 'node-rdkafka';
import type { ReactiveConsumerOptions } from '../config';
import type { TopicPartition } from '../types';
import { connect, disconnect } from './kafka-calls';
import { waitFor } from './wait';
import type { WaitOptions } from './wait';

/** The group protocol of the kit's consumers: KIP-848 (`consumer`) or the classic one. */
export type TestGroupProtocol = 'consumer' | 'classic';

/**
 * The kit's `consumerOptions()`: `bootstrap.servers`, the group (random unless given), the
 * protocol with the assignor `joinGroup()`'s members use (the members of one group must share a
 * protocol), `auto.offset.reset: earliest`. @internal
 */
export function kitConsumerOptions(
  bootstrapServers: string,
  protocol: TestGroupProtocol,
  options: { topics: readonly string[]; groupId?: string },
): ReactiveConsumerOptions & { config: { 'group.id': string } } {
  const config: ReactiveConsumerOptions['config'] & { 'group.id': string } = {
    'bootstrap.servers': bootstrapServers,
    'group.id': options.groupId ?? newGroupId(),
  };
  if (protocol === 'consumer') config['group.protocol'] = 'consumer';
  else config['partition.assignment.strategy'] = 'cooperative-sticky';
  return {
    config,
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [...options.topics],
  };
}

/** A fresh random consumer group id. */
export function newGroupId(prefix = 'test-group'): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export interface JoinGroupOptions {
  /**
   * librdkafka settings of the member on top of the kit's: its assignor must be the group's, e.g.
   * `{ 'partition.assignment.strategy': 'range' }` in a group of eager consumers (the members of
   * one group must share a protocol).
   */
  config?: Record<string, unknown>;
}

/**
 * A bare member of a consumer group, there to force rebalances: it joins, takes its share of the
 * partitions, never reads, processes or commits anything, and gives them back when it leaves. What
 * it held is processed afterwards by the remaining members, from the offsets committed before it
 * came.
 */
export class GroupMember implements AsyncDisposable {
  private left = false;

  private constructor(
    /** The group it joined. */
    readonly groupId: string,
    private readonly client: Kafka.KafkaConsumer,
  ) {}

  /** @internal Use `TestCluster.joinGroup()`. */
  static async join(
    bootstrapServers: string,
    groupId: string,
    topics: readonly string[],
    protocol: TestGroupProtocol,
    options: JoinGroupOptions = {},
    KafkaConsumer: typeof Kafka.KafkaConsumer = Kafka.KafkaConsumer,
  ): Promise<GroupMember> {
    const config: Kafka.ConsumerGlobalConfig = {
      'bootstrap.servers': bootstrapServers,
      'group.id': groupId,
      'client.id': 'reactive-rdkafka-testing-member',
      'enable.auto.commit': false,
      'enable.auto.offset.store': false,
    };
    if (protocol === 'consumer') config['group.protocol'] = 'consumer';
    else config['partition.assignment.strategy'] = 'cooperative-sticky';
    Object.assign(config, options.config);
    // No rebalance_cb: librdkafka applies assignments itself, without the member ever polling.
    const client = new KafkaConsumer(config, {});
    await connect(client);
    client.subscribe([...topics]);
    return new GroupMember(groupId, client);
  }

  /** The partitions this member holds now. */
  assignment(): TopicPartition[] {
    if (this.left) return [];
    return this.client.assignments().map((a) => ({ topic: a.topic, partition: a.partition }));
  }

  /**
   * Resolves with the member's partitions once it holds at least `count` (default 1): the group has
   * rebalanced and the other members gave them up.
   */
  async waitForAssignment(count = 1, options: WaitOptions = {}): Promise<TopicPartition[]> {
    await waitFor(() => this.assignment().length >= count, {
      what: `group member of ${this.groupId} holding ${count} partition(s)`,
      ...options,
    });
    return this.assignment();
  }

  /** Leaves the group (its partitions go back to the others) and disconnects. Idempotent. */
  async leave(): Promise<void> {
    if (this.left) return;
    this.left = true;
    try {
      this.client.unsubscribe();
    } catch {
      // already disconnected: the group has dropped the member anyway
    }
    await disconnect(this.client);
  }

  /** `await using member = await cluster.joinGroup(…)` leaves at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.leave();
  }
}
