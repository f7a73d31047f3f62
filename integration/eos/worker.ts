/**
 * An exactly-once worker process for the integration test: `processTransactional()` reading
 * EOS_TOPIC and writing 1–3 records per input (`partition:offset:i`) to EOS_OUT_A / EOS_OUT_B. It
 * stops gracefully on SIGTERM (close, then exit 0); SIGKILL is the crash the test inflicts.
 */
import pino from 'pino';
import { ReactiveConsumer } from '../../lib';
import type { KafkaMessage, OutputRecord } from '../../lib';
import { fanOut } from './scenario';
import type { EosWriting } from './scenario';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is required`);
  return v;
};

const logger = pino(
  { level: process.env.EOS_LOG_LEVEL ?? 'info', base: { pid: process.pid } },
  pino.destination({ dest: env('EOS_LOG'), sync: true }),
);
const consumer = new ReactiveConsumer({
  config: {
    'bootstrap.servers': env('EOS_BROKERS'),
    'group.id': env('EOS_GROUP'),
    'client.id': `eos-${process.pid}`,
    ...(JSON.parse(process.env.EOS_CONFIG ?? '{}') as Record<string, unknown>),
  },
  topicConfig: { 'auto.offset.reset': 'earliest' },
  topics: [env('EOS_TOPIC')],
  logger,
  // The 20 s transaction.timeout.ms below must be above maxMs + 3 × commitTimeoutMs = maxMs +
  // 12000: a killed member's open transaction blocks the outputs until 20 s after its first record
  // (plus up to the broker's 10 s scan for timed-out transactions).
  drainTimeoutMs: 12_000,
  commitTimeoutMs: 4000,
});

const writing = JSON.parse(process.env.EOS_WRITING ?? '{}') as EosWriting;
const outA = env('EOS_OUT_A');
const outB = env('EOS_OUT_B');
consumer
  .processTransactional(
    async (m: KafkaMessage): Promise<OutputRecord[]> => {
      await new Promise((r) => setTimeout(r, 4 + (m.offset % 5)));
      return Array.from({ length: fanOut(m.offset, m.partition, writing.records) }, (_, i) => ({
        topic: i % 2 === 0 ? outA : outB,
        key: m.key,
        value: `${m.partition}:${m.offset}:${i}`,
      }));
    },
    {
      transactionalId: env('EOS_TXN_ID'),
      concurrency: 16,
      partitionConcurrency: 1,
      maxMs: writing.maxMs ?? 100,
      producerConfig: { 'transaction.timeout.ms': 20_000, ...writing.producerConfig },
    },
  )
  .subscribe({
    error: (err: unknown) => {
      logger.error({ err }, 'pipeline failed');
      process.exit(2);
    },
  });

// The test waits for this line before it goes on (a signal before it would kill the loader).
consumer.rebalances$.subscribe((e) => {
  if (e.type === 'assigned') process.stdout.write(`assigned ${process.pid}\n`);
});

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  void consumer.close().then(
    () => {
      logger.info({ metrics: consumer.metrics().transactions }, 'worker closed');
      process.exit(0);
    },
    (err: unknown) => {
      logger.error({ err }, 'close failed');
      process.exit(3);
    },
  );
});
