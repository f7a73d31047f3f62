/**
 * A group member under test: a `ReactiveConsumer` running `process()`, with everything it saw
 * recorded (messages, rebalance events, consumer events, its final error) for assertions.
 */
import type { Logger } from 'pino';
import { ReactiveConsumer } from './binding';
import type {
  ConsumerEvent,
  KafkaMessage,
  RebalanceEvent,
  ReactiveConsumerOptions,
} from '../../lib';
import { BROKERS } from './kafka';

export interface SeenRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly value: string;
}

export interface Member {
  readonly name: string;
  readonly consumer: ReactiveConsumer;
  readonly records: SeenRecord[];
  readonly rebalances: RebalanceEvent[];
  readonly events: ConsumerEvent[];
  /** The error `process()` ended with, if any. */
  error(): unknown;
  /** True once `process()` completed or errored. */
  ended(): boolean;
  /** `topic:partition` keys this member owns now, from its `assigned`/`revoked`/`lost` events. */
  owned(): Set<string>;
  close(): Promise<void>;
}

export const tp = (topic: string, partition: number): string => `${topic}:${partition}`;

/** Starts a member; `config` is layered over `bootstrap.servers`. */
export function startMember(
  name: string,
  options: Omit<Partial<ReactiveConsumerOptions>, 'config'> & {
    config: Record<string, unknown>;
    topics: readonly string[];
  },
  logger: Logger,
): Member {
  const consumer = new ReactiveConsumer({
    topicConfig: { 'auto.offset.reset': 'earliest' },
    logger,
    commitIntervalMs: 200,
    ...options,
    config: { 'bootstrap.servers': BROKERS, 'client.id': name, ...options.config },
  } as ReactiveConsumerOptions);
  const records: SeenRecord[] = [];
  const rebalances: RebalanceEvent[] = [];
  const events: ConsumerEvent[] = [];
  let error: unknown;
  let ended = false;
  consumer.rebalances$.subscribe((e) => rebalances.push(e));
  consumer.events$.subscribe((e) => events.push(e));
  consumer
    .process((m: KafkaMessage) => {
      records.push({
        topic: m.topic,
        partition: m.partition,
        offset: m.offset,
        value: m.value?.toString() ?? '',
      });
    })
    .subscribe({
      error: (err: unknown) => {
        error = err;
        ended = true;
      },
      complete: () => {
        ended = true;
      },
    });
  return {
    name,
    consumer,
    records,
    rebalances,
    events,
    error: () => error,
    ended: () => ended,
    owned() {
      const owned = new Set<string>();
      for (const e of rebalances) {
        const keys = e.partitions.map((p) => tp(p.topic, p.partition));
        if (e.type === 'assigned') keys.forEach((k) => owned.add(k));
        if (e.type === 'revoked' || e.type === 'lost') keys.forEach((k) => owned.delete(k));
      }
      return owned;
    },
    close: () => consumer.close(),
  };
}
