/**
 * A chaos-suite worker: one consumer process using only the library's public API. It records
 * every processed message (`R partition offset key pid`) and every broker-confirmed commit
 * (`C partition offset pid`) to its own output file with synchronous writes, closes gracefully on
 * SIGTERM and exits 0 after a clean close.
 *
 * Settings come from the environment (see the driver): CHAOS_BROKERS, CHAOS_TOPIC, CHAOS_GROUP,
 * CHAOS_CONFIG (JSON librdkafka settings), CHAOS_OUT, CHAOS_LOG, CHAOS_SEED, CHAOS_STUCK_KEY,
 * CHAOS_STUCK_MS, CHAOS_DRAIN_TIMEOUT_MS, CHAOS_PARTITION_CONCURRENCY, CHAOS_ORDERING,
 * CHAOS_REMEMBER_COMPLETED.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import type { PathLike } from 'node:fs';
import pino from 'pino';
import { ReactiveConsumer } from '../../lib';
import type { KafkaMessage } from '../../lib';
import { seededRandom } from '../helpers/random';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is required`);
  return v;
};

const out = openSync(env('CHAOS_OUT'), 'a');
const logger = pino(
  { level: process.env.CHAOS_LOG_LEVEL ?? 'info', base: { pid: process.pid } },
  pino.destination({ dest: env('CHAOS_LOG'), sync: true }),
);
const random = seededRandom(Number(env('CHAOS_SEED')));
const stuckKey = process.env.CHAOS_STUCK_KEY;
const stuckMs = Number(process.env.CHAOS_STUCK_MS ?? 20_000);
const stuckFile = process.env.CHAOS_STUCK_FILE;

/** Only the first worker to meet the stuck key hangs on it (an exclusive marker file). */
function claimStuck(file: PathLike | undefined): boolean {
  if (file === undefined) return false;
  try {
    closeSync(openSync(file, 'wx'));
    return true;
  } catch {
    return false;
  }
}
const drainTimeoutMs = process.env.CHAOS_DRAIN_TIMEOUT_MS
  ? Number(process.env.CHAOS_DRAIN_TIMEOUT_MS)
  : undefined;

const consumer = new ReactiveConsumer({
  config: {
    'bootstrap.servers': env('CHAOS_BROKERS'),
    'group.id': env('CHAOS_GROUP'),
    'client.id': `chaos-${process.pid}`,
    ...(JSON.parse(process.env.CHAOS_CONFIG ?? '{}') as Record<string, unknown>),
  },
  topicConfig: { 'auto.offset.reset': 'earliest' },
  topics: [env('CHAOS_TOPIC')],
  logger,
  commitIntervalMs: 500,
  ...(drainTimeoutMs === undefined ? {} : { drainTimeoutMs }),
  ...(process.env.CHAOS_REMEMBER_COMPLETED === '1'
    ? { rememberCompleted: { topic: `${env('CHAOS_TOPIC')}.completed` } }
    : {}),
});

consumer.rebalances$.subscribe((e) => {
  if (e.type === 'committed') {
    for (const r of e.results) {
      if (r.status === 'committed') writeSync(out, `C ${r.partition} ${r.offset} ${process.pid}\n`);
      if (r.status === 'failed' || r.status === 'lost')
        writeSync(out, `F ${r.partition} ${r.status} ${process.pid}\n`);
    }
  }
  if (e.type === 'assigned' || e.type === 'revoked' || e.type === 'lost') {
    writeSync(
      out,
      `E ${e.type} ${Date.now()} ${e.partitions.map((p) => p.partition).join(',')} ${e.type === 'revoked' ? e.totalMs : ''}\n`,
    );
  }
});

async function handle(m: KafkaMessage): Promise<void> {
  const key = m.key?.toString() ?? '';
  if (key === stuckKey && claimStuck(stuckFile)) {
    writeSync(out, `S ${m.partition} ${m.offset} ${Date.now()}\n`);
    await new Promise((r) => setTimeout(r, stuckMs));
  } else {
    // Mostly 0–5 ms, with a heavy tail so that revokes find work in flight.
    const r = random();
    const ms = r < 0.95 ? r * 5 : 20 + (r - 0.95) * 4000;
    if (ms >= 1) await new Promise((res) => setTimeout(res, ms));
  }
  writeSync(out, `R ${m.partition} ${m.offset} ${key} ${process.pid} ${Date.now()}\n`);
}

let closing = false;
process.on('SIGTERM', () => {
  if (closing) return;
  closing = true;
  logger.info('SIGTERM: closing');
  void consumer.close();
});

writeSync(out, `E ready ${Date.now()}\n`);
const partitionConcurrency = Number(process.env.CHAOS_PARTITION_CONCURRENCY ?? 2);
const ordering = process.env.CHAOS_ORDERING as 'partition' | 'key' | 'none' | undefined;
consumer
  .process(handle, { concurrency: 16, partitionConcurrency, ...(ordering ? { ordering } : {}) })
  .subscribe({
    error: (err: unknown) => {
      logger.error({ err }, 'pipeline failed');
      closeSync(out);
      process.exit(1);
    },
    complete: () => {
      // The library's own counters, for the driver to check against the records above.
      const m = consumer.metrics();
      writeSync(
        out,
        `M ${JSON.stringify({ processed: m.messages.processed, failed: m.messages.failed, revokes: m.rebalances.revokes, losses: m.rebalances.losses, stalls: m.stalls, commitsOk: m.commits.ok })}\n`,
      );
      logger.info('closed cleanly');
      closeSync(out);
      process.exit(0);
    },
  });
