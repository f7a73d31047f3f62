/**
 * This library, from its build: `process()` with a no-op handler and the default concurrency
 * (64 across partitions, 1 within a partition), `processBatch()` with a no-op batch handler and its
 * default batches (100 messages, 100 ms), and the `partitions$` low-level path with the
 * `acknowledge()` operator and nothing else. Each with the library's defaults, and again with
 * `fetch.queue.backoff.ms` lowered to 10 ms (FAST_FETCH): with the library's small prefetch bounds,
 * librdkafka's default of 1000 ms stalls each partition's fetching for a second whenever a bound
 * is reached (see docs/benchmarks.md).
 */
import { mergeMap, tap } from 'rxjs';
import { loadLibrary } from '../peers';
import { FAST_FETCH, loadFastBinding } from './raw-rdkafka';
import type { Contender, ContenderContext } from './types';

/**
 * How a contender on the companion binding (fast-binding/) gets values and keys: copies of their
 * own (the default), views of buffers of at most 8 KiB (`sharedBatchBuffers: 8192`) or views of
 * one buffer per partition and batch (`sharedBatchBuffers: true`). On it, always with FAST_FETCH
 * like its raw loop.
 */
export type FastMode = false | 'copies' | 'views8k' | 'views';

/** The bound of the bounded-views contenders (`sharedBatchBuffers`), in bytes. */
export const VIEW_BOUND_BYTES = 8192;

const SHARING = { copies: false, views8k: VIEW_BOUND_BYTES, views: true } as const;

function consumer(
  { brokers, topic, groupId }: ContenderContext,
  tuned: boolean,
  fast: FastMode = false,
) {
  const { ReactiveConsumer } = loadLibrary();
  return new ReactiveConsumer({
    config: {
      'bootstrap.servers': brokers,
      'group.id': groupId,
      ...(tuned || fast ? FAST_FETCH : {}),
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [topic],
    ...(fast ? { binding: loadFastBinding() as never } : {}),
    ...(fast && fast !== 'copies' ? { sharedBatchBuffers: SHARING[fast] } : {}),
  });
}

const processContender =
  (tuned: boolean, fast: FastMode = false): Contender =>
  async (ctx) => {
    const c = consumer(ctx, tuned, fast);
    const { meter } = ctx;
    c.process((message) => {
      meter.add(1, message.size);
      return undefined;
    }).subscribe({ error: (err: unknown) => console.error('process() failed', err) });
    return () => c.close();
  };

const processBatchContender =
  (fast: FastMode): Contender =>
  async (ctx) => {
    const c = consumer(ctx, false, fast);
    const { meter } = ctx;
    c.processBatch((batch) => {
      let bytes = 0;
      for (const m of batch.messages) bytes += m.size;
      meter.add(batch.messages.length, bytes);
      return undefined;
    }).subscribe({ error: (err: unknown) => console.error('processBatch() failed', err) });
    return () => c.close();
  };

const partitionsContender =
  (tuned: boolean, fast: FastMode = false): Contender =>
  async (ctx) => {
    const c = consumer(ctx, tuned, fast);
    const { meter } = ctx;
    c.partitions$
      .pipe(
        mergeMap((partition) =>
          partition.messages$.pipe(
            tap((message) => meter.add(1, message.size)),
            partition.acknowledge(),
          ),
        ),
      )
      .subscribe({ error: (err: unknown) => console.error('partitions$ failed', err) });
    return () => c.close();
  };

export const reactiveProcess = processContender(false);
export const reactiveProcessTuned = processContender(true);
export const reactiveProcessBatch = processBatchContender(false);
export const reactiveProcessFast = processContender(true, 'copies');
export const reactiveProcessFastViews8k = processContender(true, 'views8k');
export const reactiveProcessFastViews = processContender(true, 'views');
export const reactivePartitionsFast = partitionsContender(true, 'copies');
export const reactivePartitionsFastViews8k = partitionsContender(true, 'views8k');
export const reactivePartitionsFastViews = partitionsContender(true, 'views');
export const reactiveProcessBatchFast = processBatchContender('copies');
export const reactiveProcessBatchFastViews8k = processBatchContender('views8k');
export const reactiveProcessBatchFastViews = processBatchContender('views');
export const reactivePartitions = partitionsContender(false);
export const reactivePartitionsTuned = partitionsContender(true);
