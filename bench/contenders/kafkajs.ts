/**
 * KafkaJS 2.x: `eachMessage` and `eachBatch` with a no-op handler, auto-commit on (its default),
 * `partitionsConsumedConcurrently` = KAFKAJS_CONCURRENCY.
 */
import { loadKafkaJs } from '../peers';
import type { Contender, ContenderContext } from './types';

/** Partitions KafkaJS processes concurrently (its default is 1). */
export const KAFKAJS_CONCURRENCY = 4;

async function start(ctx: ContenderContext) {
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
