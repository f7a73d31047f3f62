/**
 * KafkaJS 2.x: `eachMessage` and `eachBatch` with a no-op handler, twice each.
 *
 * - Defaults: auto-commit on (its default), `partitionsConsumedConcurrently` = KAFKAJS_CONCURRENCY.
 *   With auto-commit on, KafkaJS's runner awaits an OffsetCommit round-trip after *every* batch
 *   (`runner.js` `handleBatch` → `autoCommitOffsets()`), whatever `autoCommitInterval` says; on
 *   this machine that is ~5 ms per ~1,000-message batch and dominates the run.
 * - Tuned (what a user who read the runner gets): auto-commit off, every partition consumed
 *   concurrently, and the offsets committed at most once per TUNED_COMMIT_INTERVAL_MS (the
 *   library's own `commitIntervalMs` default), so the commit cadence matches the library's.
 */
import { loadKafkaJs } from '../peers';
import type { KafkaJsConsumer } from '../peers';
import type { Contender, ContenderContext } from './types';

/** Partitions KafkaJS processes concurrently in the default rows (its own default is 1). */
export const KAFKAJS_CONCURRENCY = 4;
/** The tuned rows consume every partition of the bench topics at once. */
export const KAFKAJS_TUNED_CONCURRENCY = 12;
/** Commit cadence of the tuned peer rows: the library's `commitIntervalMs` default. */
export const TUNED_COMMIT_INTERVAL_MS = 1000;

async function start(ctx: ContenderContext): Promise<KafkaJsConsumer> {
  const { Kafka, logLevel } = loadKafkaJs();
  const kafka = new Kafka({
    clientId: 'bench',
    brokers: ctx.brokers.split(','),
    logLevel: logLevel.NOTHING,
  });
  const consumer = kafka.consumer({ groupId: ctx.groupId });
  await consumer.connect();
  await consumer.subscribe({ topics: [ctx.topic], fromBeginning: true });
  return consumer;
}

export const kafkajsEachMessage: Contender = async (ctx) => {
  const consumer = await start(ctx);
  const { meter } = ctx;
  await consumer.run({
    partitionsConsumedConcurrently: KAFKAJS_CONCURRENCY,
    eachMessage: async ({ message }) => {
      meter.add(1, message.value?.length ?? 0);
    },
  });
  return () => consumer.disconnect();
};

export const kafkajsEachBatch: Contender = async (ctx) => {
  const consumer = await start(ctx);
  const { meter } = ctx;
  await consumer.run({
    partitionsConsumedConcurrently: KAFKAJS_CONCURRENCY,
    eachBatch: async ({ batch }) => {
      let bytes = 0;
      for (const message of batch.messages) bytes += message.value?.length ?? 0;
      meter.add(batch.messages.length, bytes);
    },
  });
  return () => consumer.disconnect();
};

/**
 * eachMessage without auto-commit: the handler records each partition's next offset and a timer
 * commits them every TUNED_COMMIT_INTERVAL_MS (KafkaJS offers no commit-what-was-resolved call to
 * `eachMessage`, so this is what a user writes).
 */
export const kafkajsEachMessageTuned: Contender = async (ctx) => {
  const consumer = await start(ctx);
  const { meter, topic } = ctx;
  const next = new Map<number, string>();
  const commit = async (): Promise<void> => {
    if (next.size === 0) return;
    const offsets = [...next].map(([partition, offset]) => ({ topic, partition, offset }));
    next.clear();
    await consumer.commitOffsets(offsets);
  };
  const timer = setInterval(() => void commit().catch(() => undefined), TUNED_COMMIT_INTERVAL_MS);
  await consumer.run({
    autoCommit: false,
    partitionsConsumedConcurrently: KAFKAJS_TUNED_CONCURRENCY,
    eachMessage: async ({ partition, message }) => {
      meter.add(1, message.value?.length ?? 0);
      next.set(partition, (BigInt(message.offset) + 1n).toString());
    },
  });
  return async () => {
    clearInterval(timer);
    await consumer.disconnect();
  };
};

/**
 * eachBatch without auto-commit: batches auto-resolve (the default) and the handler calls
 * `commitOffsetsIfNecessary()`, which commits the resolved offsets once `autoCommitInterval` has
 * passed.
 */
export const kafkajsEachBatchTuned: Contender = async (ctx) => {
  const consumer = await start(ctx);
  const { meter } = ctx;
  await consumer.run({
    autoCommit: false,
    autoCommitInterval: TUNED_COMMIT_INTERVAL_MS,
    partitionsConsumedConcurrently: KAFKAJS_TUNED_CONCURRENCY,
    eachBatch: async ({ batch, commitOffsetsIfNecessary }) => {
      let bytes = 0;
      for (const message of batch.messages) bytes += message.value?.length ?? 0;
      meter.add(batch.messages.length, bytes);
      await commitOffsetsIfNecessary();
    },
  });
  return () => consumer.disconnect();
};
