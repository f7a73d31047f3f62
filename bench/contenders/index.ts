/** The throughput contenders, in report order, and which package each needs. */
import { kafkajsEachBatch, kafkajsEachMessage, KAFKAJS_CONCURRENCY } from './kafkajs';
import { platformaticStream } from './platformatic';
import { FAST_FETCH, rawRdkafka, rawRdkafkaDefaults } from './raw-rdkafka';
import {
  reactivePartitions,
  reactivePartitionsTuned,
  reactiveProcess,
  reactiveProcessTuned,
} from './reactive';
import type { Contender } from './types';

export type ContenderId =
  | 'raw-rdkafka'
  | 'raw-rdkafka-defaults'
  | 'reactive-process'
  | 'reactive-partitions'
  | 'reactive-process-tuned'
  | 'reactive-partitions-tuned'
  | 'kafkajs-eachMessage'
  | 'kafkajs-eachBatch'
  | 'platformatic-stream';

export interface ContenderInfo {
  id: ContenderId;
  label: string;
  /** The package it needs; peers live in bench/node_modules. */
  pkg: string;
  kind: 'ceiling' | 'reference' | 'library' | 'peer';
  settings: string;
  run: Contender;
}

const fastFetch = Object.entries(FAST_FETCH)
  .map(([k, v]) => `\`'${k}': ${v}\``)
  .join(', ');

export const CONTENDERS: readonly ContenderInfo[] = [
  {
    id: 'raw-rdkafka',
    label: 'node-rdkafka consume(n) (raw)',
    pkg: 'node-rdkafka',
    kind: 'ceiling',
    settings: `\`consume(500)\` in a loop, 1 ms per-message timeout, no commits, librdkafka's assignment and default prefetch bounds, ${fastFetch}`,
    run: rawRdkafka,
  },
  {
    id: 'raw-rdkafka-defaults',
    label: 'node-rdkafka consume(n) (raw, librdkafka defaults)',
    pkg: 'node-rdkafka',
    kind: 'reference',
    settings: 'as above, every librdkafka setting at its default (`fetch.queue.backoff.ms` 1000)',
    run: rawRdkafkaDefaults,
  },
  {
    id: 'reactive-process',
    label: 'reactive-rdkafka process()',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings:
      'no-op handler returning a plain value; `concurrency` 64, `partitionConcurrency` 1 (defaults); default buffers and commit interval',
    run: reactiveProcess,
  },
  {
    id: 'reactive-partitions',
    label: 'reactive-rdkafka partitions$',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: '`mergeMap(p => p.messages$.pipe(tap(noop), p.acknowledge()))`; defaults otherwise',
    run: reactivePartitions,
  },
  {
    id: 'reactive-process-tuned',
    label: 'reactive-rdkafka process() (fetch backoff tuned)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: `as process() above, plus ${fastFetch} (the proposed default)`,
    run: reactiveProcessTuned,
  },
  {
    id: 'reactive-partitions-tuned',
    label: 'reactive-rdkafka partitions$ (fetch backoff tuned)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: `as partitions$ above, plus ${fastFetch}`,
    run: reactivePartitionsTuned,
  },
  {
    id: 'kafkajs-eachMessage',
    label: 'KafkaJS eachMessage',
    pkg: 'kafkajs',
    kind: 'peer',
    settings: `no-op async handler, \`partitionsConsumedConcurrently\` ${KAFKAJS_CONCURRENCY}, auto-commit (defaults)`,
    run: kafkajsEachMessage,
  },
  {
    id: 'kafkajs-eachBatch',
    label: 'KafkaJS eachBatch',
    pkg: 'kafkajs',
    kind: 'peer',
    settings: `loop over \`batch.messages\`, \`partitionsConsumedConcurrently\` ${KAFKAJS_CONCURRENCY}, auto-resolve and auto-commit (defaults)`,
    run: kafkajsEachBatch,
  },
  {
    id: 'platformatic-stream',
    label: '@platformatic/kafka stream',
    pkg: '@platformatic/kafka',
    kind: 'peer',
    settings:
      "`consume({ mode: 'earliest', autocommit: true })`, a 'data' listener (defaults otherwise)",
    run: platformaticStream,
  },
];

export function contender(id: string): ContenderInfo {
  const found = CONTENDERS.find((c) => c.id === id);
  if (!found) throw new Error(`unknown contender ${id}`);
  return found;
}
