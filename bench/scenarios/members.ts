/**
 * Consumer-group members for the rebalance scenarios: this library's `process()` or KafkaJS's
 * `eachMessage`, each recording every processed message (member, partition, offset, completion
 * time) and the partitions it owns.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { RebalanceEvent } from '../../lib';
import { loadKafkaJs, loadLibrary } from '../peers';
import { KAFKAJS_CONCURRENCY } from '../contenders/kafkajs';
import { protocolConfig } from '../settings';
import type { ProtocolName } from '../settings';

export interface Processing {
  member: number;
  partition: number;
  offset: number;
  /** `performance.now()` when the handler finished. */
  at: number;
}

export interface MemberOptions {
  brokers: string;
  topic: string;
  groupId: string;
  protocol: ProtocolName;
  index: number;
  /** How long one handler takes, in ms (0: returns at once). */
  handlerMs: () => number;
  log: Processing[];
  onEvent?: (event: RebalanceEvent) => void;
}

export interface GroupMember {
  readonly index: number;
  /** Partitions this member owns now. */
  readonly owned: ReadonlySet<number>;
  /** `performance.now()` when it was first assigned partitions (undefined before). */
  readonly firstAssignedAt: number | undefined;
  start(): Promise<void>;
  close(): Promise<void>;
}

export function reactiveMember(options: MemberOptions): GroupMember {
  const { ReactiveConsumer } = loadLibrary();
  const owned = new Set<number>();
  let firstAssignedAt: number | undefined;
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': options.brokers,
      'group.id': options.groupId,
      ...protocolConfig(options.protocol),
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [options.topic],
  });
  consumer.rebalances$.subscribe((event) => {
    if (event.type === 'assigned' && event.partitions.length > 0)
      firstAssignedAt ??= performance.now();
    if (event.type === 'assigned') for (const tp of event.partitions) owned.add(tp.partition);
    if (event.type === 'revoked' || event.type === 'lost')
      for (const tp of event.partitions) owned.delete(tp.partition);
    options.onEvent?.(event);
  });
  return {
    index: options.index,
    owned,
    get firstAssignedAt() {
      return firstAssignedAt;
    },
    start: async () => {
      consumer
        .process(
          async (message) => {
            const ms = options.handlerMs();
            if (ms > 0) await sleep(ms);
            options.log.push({
              member: options.index,
              partition: message.partition,
              offset: message.offset,
              at: performance.now(),
            });
          },
          { concurrency: 64, partitionConcurrency: 1 },
        )
        .subscribe({ error: (err: unknown) => console.error(`member ${options.index}`, err) });
    },
    close: () => consumer.close(),
  };
}

export function kafkajsMember(options: MemberOptions): GroupMember {
  const { Kafka, logLevel } = loadKafkaJs();
  const owned = new Set<number>();
  let firstAssignedAt: number | undefined;
  const kafka = new Kafka({
    clientId: `bench-join-${options.index}`,
    brokers: options.brokers.split(','),
    logLevel: logLevel.NOTHING,
  });
  // The same classic timeouts as the librdkafka members (KafkaJS defaults: 30000 / 3000).
  const consumer = kafka.consumer({
    groupId: options.groupId,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
  });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const assignment = (e.payload.memberAssignment ?? {}) as Record<string, number[]>;
    owned.clear();
    for (const p of assignment[options.topic] ?? []) owned.add(p);
    if (owned.size > 0) firstAssignedAt ??= performance.now();
  });
  return {
    index: options.index,
    owned,
    get firstAssignedAt() {
      return firstAssignedAt;
    },
    start: async () => {
      await consumer.connect();
      await consumer.subscribe({ topics: [options.topic], fromBeginning: true });
      await consumer.run({
        partitionsConsumedConcurrently: KAFKAJS_CONCURRENCY,
        eachMessage: async ({ partition, message }) => {
          const ms = options.handlerMs();
          if (ms > 0) await sleep(ms);
          options.log.push({
            member: options.index,
            partition,
            offset: Number(message.offset),
            at: performance.now(),
          });
        },
      });
    },
    close: async () => {
      owned.clear();
      await consumer.disconnect();
    },
  };
}

/** Polls `condition` every 50 ms; throws naming `what` after `timeoutMs`. */
export async function waitUntil(
  condition: () => boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}
