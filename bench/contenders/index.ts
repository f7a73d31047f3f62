/** The throughput contenders, in report order, and which package each needs. */
import {
  kafkajsEachBatch,
  kafkajsEachBatchTuned,
  kafkajsEachMessage,
  kafkajsEachMessageTuned,
  KAFKAJS_CONCURRENCY,
  KAFKAJS_TUNED_CONCURRENCY,
  TUNED_COMMIT_INTERVAL_MS,
} from './kafkajs';
import { platformaticStream, platformaticStreamTuned } from './platformatic';
import {
  FAST_FETCH,
  fastBindingMissing,
  loadFastBinding,
  rawRdkafka,
  rawRdkafkaDefaults,
  rawRdkafkaFast,
  rawRdkafkaFastViews8k,
  rawRdkafkaFastShared,
} from './raw-rdkafka';
import {
  reactivePartitions,
  reactivePartitionsFast,
  reactivePartitionsFastViews8k,
  reactivePartitionsFastViews,
  reactivePartitionsTuned,
  reactiveProcess,
  reactiveProcessBatch,
  reactiveProcessBatchFast,
  reactiveProcessBatchFastViews8k,
  reactiveProcessBatchFastViews,
  reactiveProcessFast,
  reactiveProcessFastViews8k,
  reactiveProcessFastViews,
  reactiveProcessTuned,
} from './reactive';
import { loadKafkaJs, loadLibrary, loadPlatformatic } from '../peers';
import type { Contender } from './types';

export type ContenderId =
  | 'raw-rdkafka'
  | 'raw-rdkafka-defaults'
  | 'raw-rdkafka-fast'
  | 'raw-rdkafka-patched'
  | 'raw-rdkafka-fast-views8k'
  | 'reactive-process-fast'
  | 'reactive-process-fast-views8k'
  | 'reactive-process-fast-views'
  | 'reactive-partitions-fast'
  | 'reactive-partitions-fast-views8k'
  | 'reactive-partitions-fast-views'
  | 'reactive-process-batch-fast'
  | 'reactive-process-batch-fast-views8k'
  | 'reactive-process-batch-fast-views'
  | 'reactive-process'
  | 'reactive-partitions'
  | 'reactive-process-batch'
  | 'reactive-process-tuned'
  | 'reactive-partitions-tuned'
  | 'kafkajs-eachMessage'
  | 'kafkajs-eachBatch'
  | 'kafkajs-eachMessage-tuned'
  | 'kafkajs-eachBatch-tuned'
  | 'platformatic-stream'
  | 'platformatic-stream-tuned';

export interface ContenderInfo {
  id: ContenderId;
  label: string;
  /** The package it needs; peers live in bench/node_modules. */
  pkg: string;
  kind: 'ceiling' | 'reference' | 'library' | 'peer';
  settings: string;
  run: Contender;
  /**
   * Loads the client library (modules only, no client), so that a child can do it before it starts
   * counting CPU time; the contender's own later load is then a cache hit. The released binding is
   * loaded by this module's imports already.
   */
  load?: () => unknown;
  /** Why it cannot run here (e.g. an optional build is missing); undefined when it can. */
  missing?: () => string | undefined;
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
    id: 'raw-rdkafka-fast',
    label: 'node-rdkafka consume(n) (companion binding)',
    pkg: 'node-rdkafka',
    kind: 'reference',
    settings:
      'the raw loop and settings above on the companion binding (`fast-binding/`: batch conversion on the worker thread, values and keys copied per message as the stock binding gives them)',
    run: rawRdkafkaFast,
    load: loadFastBinding,
    missing: fastBindingMissing,
  },
  {
    id: 'raw-rdkafka-patched',
    label: 'node-rdkafka consume(n) (companion binding, shared views)',
    pkg: 'node-rdkafka',
    kind: 'reference',
    settings:
      'as above with `setBatchBufferSharing(true)`: values and keys as views of one batch buffer, no per-message copy (see "The binding ceiling")',
    run: rawRdkafkaFastShared,
    load: loadFastBinding,
    missing: fastBindingMissing,
  },
  {
    id: 'raw-rdkafka-fast-views8k',
    label: 'node-rdkafka consume(n) (companion binding, 8 KiB views)',
    pkg: 'node-rdkafka',
    kind: 'reference',
    settings:
      'as above with `setBatchBufferSharing(8192)`: values and keys as views of buffers of at most 8 KiB, each holding messages of one partition (a kept value pins at most 8 KiB), no per-message copy',
    run: rawRdkafkaFastViews8k,
    load: loadFastBinding,
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-process',
    label: 'reactive-rdkafka process()',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings:
      'no-op handler returning a plain value; `concurrency` 64, `partitionConcurrency` 1 (defaults); default buffers and commit interval',
    run: reactiveProcess,
    load: loadLibrary,
  },
  {
    id: 'reactive-partitions',
    label: 'reactive-rdkafka partitions$',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: '`mergeMap(p => p.messages$.pipe(tap(noop), p.acknowledge()))`; defaults otherwise',
    run: reactivePartitions,
    load: loadLibrary,
  },
  {
    id: 'reactive-process-batch',
    label: 'reactive-rdkafka processBatch()',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings:
      'no-op batch handler returning a plain value; `maxSize` 100, `maxWaitMs` 100 (defaults); `concurrency` 64, `partitionConcurrency` 1; default buffers and commit interval',
    run: reactiveProcessBatch,
    load: loadLibrary,
  },
  {
    id: 'reactive-process-tuned',
    label: 'reactive-rdkafka process() (fetch backoff tuned)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: `as process() above, plus ${fastFetch} (the proposed default)`,
    run: reactiveProcessTuned,
    load: loadLibrary,
  },
  {
    id: 'reactive-partitions-tuned',
    label: 'reactive-rdkafka partitions$ (fetch backoff tuned)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: `as partitions$ above, plus ${fastFetch}`,
    run: reactivePartitionsTuned,
    load: loadLibrary,
  },
  {
    id: 'reactive-process-fast',
    label: 'reactive-rdkafka process() (companion binding)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: `as process() above on the companion binding (\`binding\` option), plus ${fastFetch}`,
    run: reactiveProcessFast,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-process-fast-views8k',
    label: 'reactive-rdkafka process() (companion binding, 8 KiB views)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings:
      'as process() on the companion binding, with `sharedBatchBuffers: 8192` (values and keys views of buffers of at most 8 KiB)',
    run: reactiveProcessFastViews8k,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-process-fast-views',
    label: 'reactive-rdkafka process() (companion binding, shared views)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: `as process() on the companion binding, with \`sharedBatchBuffers: true\` (values and keys views of the batch buffers, no per-message copy)`,
    run: reactiveProcessFastViews,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-partitions-fast',
    label: 'reactive-rdkafka partitions$ (companion binding)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: `as partitions$ above on the companion binding, plus ${fastFetch}`,
    run: reactivePartitionsFast,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-partitions-fast-views8k',
    label: 'reactive-rdkafka partitions$ (companion binding, 8 KiB views)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: 'as partitions$ on the companion binding, with `sharedBatchBuffers: 8192`',
    run: reactivePartitionsFastViews8k,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-partitions-fast-views',
    label: 'reactive-rdkafka partitions$ (companion binding, shared views)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: 'as partitions$ on the companion binding, with `sharedBatchBuffers: true`',
    run: reactivePartitionsFastViews,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-process-batch-fast',
    label: 'reactive-rdkafka processBatch() (companion binding)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: `as processBatch() above on the companion binding, plus ${fastFetch}`,
    run: reactiveProcessBatchFast,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-process-batch-fast-views8k',
    label: 'reactive-rdkafka processBatch() (companion binding, 8 KiB views)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: 'as processBatch() on the companion binding, with `sharedBatchBuffers: 8192`',
    run: reactiveProcessBatchFastViews8k,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'reactive-process-batch-fast-views',
    label: 'reactive-rdkafka processBatch() (companion binding, shared views)',
    pkg: 'reactive-rdkafka',
    kind: 'library',
    settings: 'as processBatch() on the companion binding, with `sharedBatchBuffers: true`',
    run: reactiveProcessBatchFastViews,
    load: () => [loadLibrary(), loadFastBinding()],
    missing: fastBindingMissing,
  },
  {
    id: 'kafkajs-eachMessage',
    label: 'KafkaJS eachMessage',
    pkg: 'kafkajs',
    kind: 'peer',
    settings: `no-op async handler, \`partitionsConsumedConcurrently\` ${KAFKAJS_CONCURRENCY}, auto-commit (defaults)`,
    run: kafkajsEachMessage,
    load: loadKafkaJs,
  },
  {
    id: 'kafkajs-eachBatch',
    label: 'KafkaJS eachBatch',
    pkg: 'kafkajs',
    kind: 'peer',
    settings: `loop over \`batch.messages\`, \`partitionsConsumedConcurrently\` ${KAFKAJS_CONCURRENCY}, auto-resolve and auto-commit (defaults)`,
    run: kafkajsEachBatch,
    load: loadKafkaJs,
  },
  {
    id: 'kafkajs-eachMessage-tuned',
    label: 'KafkaJS eachMessage (tuned)',
    pkg: 'kafkajs',
    kind: 'peer',
    settings: `no-op async handler that records each partition's next offset; \`autoCommit: false\`, a timer commits them (\`consumer.commitOffsets\`) every ${TUNED_COMMIT_INTERVAL_MS} ms; \`partitionsConsumedConcurrently\` ${KAFKAJS_TUNED_CONCURRENCY}; fetch sizes at their defaults`,
    run: kafkajsEachMessageTuned,
    load: loadKafkaJs,
  },
  {
    id: 'kafkajs-eachBatch-tuned',
    label: 'KafkaJS eachBatch (tuned)',
    pkg: 'kafkajs',
    kind: 'peer',
    settings: `loop over \`batch.messages\`, then \`await commitOffsetsIfNecessary()\`; \`autoCommit: false\`, \`autoCommitInterval: ${TUNED_COMMIT_INTERVAL_MS}\` (auto-resolve on), \`partitionsConsumedConcurrently\` ${KAFKAJS_TUNED_CONCURRENCY}; fetch sizes at their defaults`,
    run: kafkajsEachBatchTuned,
    load: loadKafkaJs,
  },
  {
    id: 'platformatic-stream',
    label: '@platformatic/kafka stream',
    pkg: '@platformatic/kafka',
    kind: 'peer',
    settings:
      "`consume({ mode: 'earliest', autocommit: true })`, a 'data' listener (defaults otherwise)",
    run: platformaticStream,
    load: loadPlatformatic,
  },
  {
    id: 'platformatic-stream-tuned',
    label: '@platformatic/kafka stream (tuned)',
    pkg: '@platformatic/kafka',
    kind: 'peer',
    settings: `as above with \`autocommit: ${TUNED_COMMIT_INTERVAL_MS}\` (a timer commits every ${TUNED_COMMIT_INTERVAL_MS} ms instead of once per fetch response); fetch sizes at their defaults`,
    run: platformaticStreamTuned,
    load: loadPlatformatic,
  },
];

export function contender(id: string): ContenderInfo {
  const found = CONTENDERS.find((c) => c.id === id);
  if (!found) throw new Error(`unknown contender ${id}`);
  return found;
}
