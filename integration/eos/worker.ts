/**
 * An exactly-once worker process for the integration test: `processTransactional()` reading
 * EOS_TOPIC and writing 1–3 records per input (`partition:offset:i`) to EOS_OUT_A / EOS_OUT_B. It
 * stops gracefully on SIGTERM (close, then exit 0); SIGKILL is the crash the test inflicts.
 *
 * Optional: EOS_RUN (JSON, see EosRun in scenario.ts) sets the identity (explicit transactionalId,
 * `instanceId`, or none: a random id) and the commit and drain deadlines; EOS_TRACE names a file
 * that gets one JSON line per rebalance event, per first message handled of each partition after
 * each assignment (`first`), the transactional id once ready, the transaction counters twice a
 * second (`txn`), and the error that stopped the pipeline (`error`), so the test can hold them against what the broker committed.
 */
import { appendFileSync } from 'node:fs';
import pino from 'pino';
import { ReactiveConsumer } from '../helpers/binding';
import type { KafkaMessage, OutputRecord } from '../../lib';
import { fanOut } from './scenario';
import type { EosRun, EosWriting } from './scenario';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is required`);
  return v;
};

const logger = pino(
  { level: process.env.EOS_LOG_LEVEL ?? 'info', base: { pid: process.pid } },
  pino.destination({ dest: env('EOS_LOG'), sync: true }),
);
const run = JSON.parse(process.env.EOS_RUN ?? '{}') as EosRun;
const tracePath = process.env.EOS_TRACE;
const trace = (entry: Record<string, unknown>): void => {
  if (tracePath !== undefined) {
    appendFileSync(
      tracePath,
      `${JSON.stringify({ pid: process.pid, at: Date.now(), ...entry })}\n`,
    );
  }
};
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
  // The default 20 s transaction.timeout.ms below must be above maxMs + 3 × commitTimeoutMs = maxMs +
  // 12000: a killed member's open transaction blocks the outputs until 20 s after its first record
  // (plus up to the broker's 10 s scan for timed-out transactions).
  drainTimeoutMs: run.drainTimeoutMs ?? 12_000,
  commitTimeoutMs: run.commitTimeoutMs ?? 4000,
});

const writing = JSON.parse(process.env.EOS_WRITING ?? '{}') as EosWriting;
const outA = env('EOS_OUT_A');
const outB = env('EOS_OUT_B');
const identity =
  run.identity === 'random'
    ? {}
    : run.identity === 'instance'
      ? { instanceId: env('EOS_NAME') }
      : { transactionalId: env('EOS_TXN_ID') };
/** Partitions assigned whose first message is still to be handled. */
const awaitingFirst = new Set<number>();
consumer
  .processTransactional(
    async (m: KafkaMessage): Promise<OutputRecord[]> => {
      if (awaitingFirst.delete(m.partition)) {
        trace({ type: 'first', partition: m.partition, offset: m.offset });
      }
      await new Promise((r) => setTimeout(r, 4 + (m.offset % 5)));
      return Array.from({ length: fanOut(m.offset, m.partition, writing.records) }, (_, i) => ({
        topic: i % 2 === 0 ? outA : outB,
        key: m.key,
        value: `${m.partition}:${m.offset}:${i}`,
      }));
    },
    {
      ...identity,
      concurrency: 16,
      partitionConcurrency: 1,
      maxMs: writing.maxMs ?? 100,
      producerConfig: { 'transaction.timeout.ms': 20_000, ...writing.producerConfig },
    },
  )
  .subscribe({
    error: (err: unknown) => {
      const e = err as { name?: string; code?: string; message?: string };
      trace({ type: 'error', name: e.name, code: e.code, message: e.message });
      logger.error({ err }, 'pipeline failed');
      process.exit(2);
    },
  });

// The test waits for this line before it goes on (a signal before it would kill the loader).
// The transaction counters, twice a second (a commit stalled by a frozen coordinator shows there).
if (tracePath !== undefined) {
  setInterval(() => {
    const t = consumer.metrics().transactions;
    if (t !== undefined) {
      trace({ type: 'txn', committed: t.committed, aborted: t.aborted, state: t.state });
    }
  }, 500).unref();
}
let ready = false;
consumer.rebalances$.subscribe((e) => {
  if (e.type === 'assigned') for (const tp of e.partitions) awaitingFirst.add(tp.partition);
  if (e.type === 'revoking' || e.type === 'lost') {
    for (const tp of e.partitions) awaitingFirst.delete(tp.partition);
  }
  trace({ ...e });
  if (!ready && e.type === 'assigned') {
    ready = true;
    trace({ type: 'ready', transactionalId: consumer.metrics().transactions?.transactionalId });
  }
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
