/**
 * This library, from its build: `process()` with a no-op handler and the default concurrency
 * (64 across partitions, 1 within a partition), and the `partitions$` low-level path with the
 * `acknowledge()` operator and nothing else. Each with the library's defaults, and again with
 * `queued.min.messages` raised to librdkafka's default (TUNED_PREFETCH): the library's default of
 * 10000 starves the fetch pipeline with small messages (see docs/benchmarks.md).
 */
import { mergeMap, tap } from 'rxjs';
import { loadLibrary } from '../peers';
import type { Contender, ContenderContext } from './types';

/** The prefetch override of the "tuned" variants (librdkafka's own default). */
export const TUNED_PREFETCH = { 'queued.min.messages': 100_000 } as const;

function consumer({ brokers, topic, groupId }: ContenderContext, tuned: boolean) {
  const { ReactiveConsumer } = loadLibrary();
  return new ReactiveConsumer({
    config: {
      'bootstrap.servers': brokers,
      'group.id': groupId,
      ...(tuned ? TUNED_PREFETCH : {}),
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [topic],
  });
}

const processContender =
  (tuned: boolean): Contender =>
  async (ctx) => {
    const c = consumer(ctx, tuned);
    const { meter } = ctx;
    c.process((message) => {
      meter.add(1, message.size);
      return undefined;
    }).subscribe({ error: (err: unknown) => console.error('process() failed', err) });
    return () => c.close();
  };

const partitionsContender =
  (tuned: boolean): Contender =>
  async (ctx) => {
    const c = consumer(ctx, tuned);
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
export const reactivePartitions = partitionsContender(false);
export const reactivePartitionsTuned = partitionsContender(true);
