/** What the mock clients share: librdkafka-shaped errors, partition keys, the group protocol. */
import * as Kafka from 'node-rdkafka';
import type { MockBroker } from './broker';
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
