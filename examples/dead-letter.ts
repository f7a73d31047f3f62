/**
 * Typed JSON values, retries with backoff, and a dead-letter topic for what still fails: the
 * failed record is written there (with headers saying where it came from and why), and only when
 * the broker confirmed that write does its offset count as done.
 *
 * Run (needs a broker, the topic and the dead-letter topic):
 *   KAFKA_BROKERS=127.0.0.1:9092 TOPIC=orders npx tsx examples/dead-letter.ts
 */
import pino from 'pino';
import { ErrorCode, ReactiveConsumer, deserializers, hasErrorCode } from 'reactive-rdkafka';

interface Order {
  id: string;
  amountCents: number;
}

/** A schema check: a value that fails it is a DeserializationError, never retried. */
const isOrder = (v: unknown): v is Order =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as Order).id === 'string' &&
  Number.isInteger((v as Order).amountCents);

export function main(): ReactiveConsumer {
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' });
  const topic = process.env.TOPIC ?? 'orders';
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': process.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
      'group.id': 'billing',
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [topic],
    logger,
  });

  consumer.events$.subscribe((event) => {
    if (event.type === 'dead-lettered') logger.warn({ ...event }, 'dead-lettered');
    if (event.type === 'offset-reset') logger.error({ ...event }, 'records were skipped');
  });

  consumer
    .process<Order | null>(
      async (message) => {
        const order = message.value;
        if (order === null) return 'tombstone';
        if (order.amountCents < 0) throw new Error(`negative amount on ${order.id}`);
        return `charged ${order.id}`;
      },
      {
        value: deserializers.json(isOrder),
        retry: { count: 3, initialDelayMs: 200, maxDelayMs: 2000 },
        deadLetter: { topic: `${topic}.dlq` },
      },
    )
    .subscribe({
      next: (done) => logger.debug({ ...done }, done.status),
      error: (err: unknown) => {
        // The dead-letter write itself failed: the consumer stopped rather than skip the record.
        if (hasErrorCode(err, ErrorCode.DeadLetter))
          logger.fatal({ err }, 'dead-letter topic unavailable');
        else logger.error({ err }, 'consumer stopped');
        process.exitCode = 1;
      },
    });

  process.once('SIGINT', () => void consumer.close());
  process.once('SIGTERM', () => void consumer.close());
  return consumer;
}

if (require.main === module) main();
