/** What the mock clients share: librdkafka-shaped errors, partition keys, the group protocol. */
import { EventEmitter } from 'node:events';
import * as Kafka from 'node-rdkafka';
import type { Isolation, LogEntry, MockBroker } from './broker';
import type { GroupProtocolKind } from './group';

const E = Kafka.CODES.ERRORS;
export type Tp = { topic: string; partition: number };

/** An error as node-rdkafka hands it over (`code`, `errno`, `origin` and librdkafka's flags). */
export function kafkaError(
  code: number,
  message: string,
  flags: Record<string, boolean> = {},
): Error {
  return Object.assign(new Error(message), {
    code,
    errno: code,
    origin: 'kafka',
    isFatal: false,
    isRetriable: false,
    isTxnRequiresAbort: false,
    ...flags,
  });
}

/** librdkafka's description of the codes a mock commit fails with. */
const DESCRIPTIONS: Readonly<Record<number, string>> = {
  7: 'Broker: Request timed out',
  15: 'Broker: Coordinator not available',
  16: 'Broker: Not coordinator',
  22: 'Broker: Specified group generation id is not valid',
  25: 'Broker: Unknown member',
  27: 'Broker: Group rebalance in progress',
  113: 'Broker: The member epoch is stale',
  [E.ERR__NO_OFFSET]: 'Local: No offset stored',
  [E.ERR__TIMED_OUT]: 'Local: Timed out',
};
export const describe = (code: number): string => DESCRIPTIONS[code] ?? `Broker: error ${code}`;

export const keyOf = (k: string): Tp => {
  const at = k.lastIndexOf('[');
  return { topic: k.slice(0, at), partition: Number(k.slice(at + 1, -1)) };
};

export const protocolOf = (config: Record<string, unknown>): GroupProtocolKind => {
  if (config['group.protocol'] === 'consumer') return 'consumer';
  const strategy = String(config['partition.assignment.strategy'] ?? '');
  return strategy.includes('cooperative-sticky') ? 'cooperative' : 'eager';
};

/** The cluster's metadata as getMetadata() answers it: one broker, the leader of every partition. */
export function metadataOf(broker: MockBroker, topic: string | undefined): Kafka.Metadata {
  const names = topic !== undefined ? [topic] : broker.topicNames();
  return {
    orig_broker_id: 1,
    orig_broker_name: 'mock:9092/1',
    brokers: [{ id: 1, host: 'mock', port: 9092 }],
    topics: names
      .filter((t) => broker.partitionCount(t) > 0)
      .map((name) => ({
        name,
        partitions: Array.from({ length: broker.partitionCount(name) }, (_, id) => ({
          id,
          leader: 1,
          replicas: [1],
          isrs: [1],
        })),
      })),
  };
}

/** A log entry as consume() gives it: copies, so a handler writing into them changes no record. */
export function messageOf(topic: string, partition: number, e: LogEntry): Kafka.Message {
  return {
    topic,
    partition,
    offset: e.offset,
    key: e.key === null ? undefined : Buffer.from(e.key),
    value: e.value === null ? null : Buffer.from(e.value),
    size: e.value?.length ?? 0,
    timestamp: e.timestamp,
    headers: e.headers.length > 0 ? copyHeaders(e.headers) : undefined,
  } as Kafka.Message;
}

/** offsetsForTimes(): per partition, the first offset whose record is at or after the time. */
export function offsetsForTimesOf(
  broker: MockBroker,
  tps: readonly Kafka.TopicPartitionOffset[],
): Kafka.TopicPartitionOffset[] {
  return tps.map((tp) => {
    const hit = broker
      .log(tp.topic, tp.partition)
      ?.find((e) => !e.control && e.timestamp >= tp.offset);
    return { topic: tp.topic, partition: tp.partition, offset: hit ? hit.offset : -1 };
  });
}

/**
 * A consume() call's wait: `answer(false)` is tried at once and at each change of the broker,
 * `answer(true)` at the timeout; it returns true once it answered (then nothing more is tried).
 */
export function waitForAnswer(
  broker: MockBroker,
  timeoutMs: number,
  answer: (force: boolean) => boolean,
): void {
  let settled = false;
  let stop: () => void = () => undefined;
  const attempt = (force: boolean): void => {
    if (settled || !answer(force)) return;
    settled = true;
    stop();
    clearTimeout(timer);
  };
  const timer = setTimeout(() => attempt(true), Math.max(0, timeoutMs));
  setImmediate(() => {
    attempt(false);
    if (!settled) stop = broker.onChange(() => setImmediate(() => attempt(false)));
  });
}

/**
 * Where a consumer starts reading a partition: the offset given (-2 the first, -1 the end), else
 * the committed one, else `auto.offset.reset` (for `error`, past the end: the first fetch reports
 * it). A position past the end of the log is reset by the next fetch.
 */
export function startOffset(
  broker: MockBroker,
  reset: string,
  isolation: Isolation,
  at: {
    topic: string;
    partition: number;
    given: number | undefined;
    committed: number | undefined;
  },
): number {
  const { topic, partition, given, committed } = at;
  if (given === -2) return 0;
  if (given === -1) return broker.end(topic, partition, isolation);
  if (typeof given === 'number' && given >= 0) return given;
  if (committed !== undefined) return committed;
  const offset = resetOffset(broker, reset, isolation, topic, partition);
  return offset < 0 ? Number.MAX_SAFE_INTEGER : offset;
}

/** `auto.offset.reset`'s offset: the first, the end, or -1 for `error`. */
export function resetOffset(
  broker: MockBroker,
  reset: string,
  isolation: Isolation,
  topic: string,
  partition: number,
): number {
  if (/^(earliest|smallest|beginning)$/.test(reset)) return 0;
  if (reset === 'error') return -1;
  return broker.end(topic, partition, isolation);
}

/** What the mock clients share: connecting (answered asynchronously, as a binding does). */
export class MockClient extends EventEmitter {
  protected connected = false;

  connect(_opts: unknown, cb?: (err: Error | null, data?: unknown) => void): this {
    setImmediate(() => {
      this.connected = true;
      this.onConnected();
      this.emit('ready', { name: 'mock' }, {});
      cb?.(null, { name: 'mock' });
    });
    return this;
  }

  isConnected(): boolean {
    return this.connected;
  }

  /** Called once connected, before `ready` and the callback. */
  protected onConnected(): void {}
}

/** Headers in node-rdkafka's shape, each value a Buffer of its own (a string becomes its bytes). */
export function copyHeaders(headers: readonly Kafka.MessageHeader[]): Kafka.MessageHeader[] {
  return headers.map((h) =>
    Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Buffer.from(v as never)])),
  );
}
