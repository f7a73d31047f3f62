/**
 * The shortest useful consumer: `process()` runs one handler per message, at most `concurrency` at
 * once across partitions and one at a time within a partition (offset order). The library commits
 * what the handlers finished, and on a rebalance drains and commits before releasing partitions.
 *
 * Run (needs a broker and the topic):
 *   KAFKA_BROKERS=127.0.0.1:9092 TOPIC=orders npx tsx examples/basic-process.ts
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { ReactiveConsumer } from 'reactive-rdkafka';
import type { KafkaMessage } from 'reactive-rdkafka';

interface Order {
  id: string;
  amountCents: number;
}

/** Stands in for real I/O. It honours `signal`: aborted when the work no longer counts. */
async function charge(order: Order, signal: AbortSignal): Promise<string> {
  await sleep(10, undefined, { signal });
  return `charged ${order.id}: ${order.amountCents} cents`;
}

export function main(): ReactiveConsumer {
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' });
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': process.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
      'group.id': 'billing',
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [process.env.TOPIC ?? 'orders'],
    logger,
  });

  // The handler may return a Promise, an Observable or a plain value. The message counts as
  // processed when the Promise resolves; a rejection stops the consumer (after committing what
  // is contiguous) and errors the stream below with a HandlerError.
  const handle = (message: KafkaMessage): Promise<string> =>
    charge(JSON.parse(message.value?.toString() ?? '{}') as Order, message.signal);

  consumer.process(handle, { concurrency: 32, partitionConcurrency: 1 }).subscribe({
    next: (done) => logger.debug({ ...done }, 'processed'),
    error: (err: unknown) => {
      logger.error({ err }, 'consumer stopped');
      process.exitCode = 1;
    },
    complete: () => logger.info('consumer closed'),
  });

  process.once('SIGINT', () => void consumer.close());
  process.once('SIGTERM', () => void consumer.close());
  return consumer;
}

// Runs only when executed, not when imported or type-checked.
if (require.main === module) main();
