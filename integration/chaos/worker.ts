/**
 * A chaos-suite worker: one consumer process using only the library's public API. It records
 * every processed message (`R partition offset key pid at`), every injected handler failure
 * (`X partition offset attempt pid`), every broker-confirmed commit (`C partition offset pid`) and
 * the rebalance phases (`E …`) to its own output file with synchronous writes. It stops on SIGTERM
 * (or by itself, see below) and exits 0 once the consumer is really closed (`rebalances$`
 * completed), after writing the library's metrics (`M {…}`).
 *
 * Settings come from the environment (see the driver):
 * - CHAOS_BROKERS, CHAOS_TOPIC, CHAOS_GROUP, CHAOS_CONFIG (JSON librdkafka settings), CHAOS_OUT,
 *   CHAOS_LOG, CHAOS_SEED (this life's seed), CHAOS_VARIANT_SEED (the variant's seed: the same
 *   keys fail in every life);
 * - CHAOS_STOP_MODE: `close` (`await consumer.close()`, the default), `unsubscribe` (of the
 *   `process()` subscription) or `takeUntil` (a `takeUntil(stop$)` in the pipeline);
 * - CHAOS_STOP_ON_REVOKING=1: once per life (at least CHAOS_SELF_STOP_MIN_AGE_MS old, default
 *   2000), a `revoking` event for partitions with handlers in flight makes the worker stop itself
 *   0–10 ms later (seeded) if that revoke still drains then (else it waits for the next one), so
 *   that the stop lands while the revoke drains (drains last ~15 ms at the median: a 0–50 ms
 *   delay missed every one of a variant's revokes in one CI run);
 *   CHAOS_SELF_STOP_DUTY=1 (a life the variant relies on for that stop): at any age, and on the
 *   next tick;
 * - CHAOS_DRAIN_HOLD_MS: a handler still running when its partition's revoke began takes that
 *   much longer, and a revoke that began with none running waits as long in its `onRevoke` hook
 *   (the broker-failure variant's kill lands while that revoke is open: one with nothing to drain
 *   ended before a loaded machine's node was dead, and the variant proved nothing);
 * - CHAOS_ON_ASSIGN_DELAY_MS: an `onAssign` hook that waits a seeded 0..N ms per partition;
 *   CHAOS_STOP_IN_ASSIGN=1: at the first call of that hook, the worker stops itself (a seeded part
 *   of the hook's wait later), so the stop lands while the assignment waits for its positions;
 * - CHAOS_FAIL_RATE / CHAOS_FAIL_ATTEMPTS: that fraction of the keys fails its first
 *   1..ATTEMPTS attempts (deterministic per key and attempt); CHAOS_RETRY: `process()`'s `retry`
 *   option (JSON);
 * - CHAOS_CONCURRENCY (default 16), CHAOS_PARTITION_CONCURRENCY (default 2), CHAOS_ORDERING,
 *   CHAOS_LATENCY (`default` | `heavy`), CHAOS_REMEMBER_COMPLETED, CHAOS_DRAIN_TIMEOUT_MS;
 * - CHAOS_STUCK_KEY, CHAOS_STUCK_MS, CHAOS_STUCK_FILE: the first worker to meet that key hangs.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { setTimeout as wait } from 'node:timers/promises';
import type { PathLike } from 'node:fs';
import pino from 'pino';
import { Subject, takeUntil } from 'rxjs';
import { ReactiveConsumer } from '../helpers/binding';
import type { AssignedPartition, KafkaMessage, RetryOptions } from '../../lib';
import { seededRandom } from '../helpers/random';
import { failingAttempts, hashUnit, latencyMs } from './faults';
import type { FailurePlan, LatencyProfile } from './faults';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is required`);
  return v;
};
const optionalNumber = (name: string): number | undefined =>
  process.env[name] ? Number(process.env[name]) : undefined;

const bornAt = Date.now();
const out = openSync(env('CHAOS_OUT'), 'a');
const logger = pino(
  { level: process.env.CHAOS_LOG_LEVEL ?? 'info', base: { pid: process.pid } },
  pino.destination({ dest: env('CHAOS_LOG'), sync: true }),
);
const lifeSeed = Number(env('CHAOS_SEED'));
const variantSeed = Number(process.env.CHAOS_VARIANT_SEED ?? lifeSeed);
const random = seededRandom(lifeSeed);
const line = (text: string): void => void writeSync(out, `${text}\n`);

const stuckKey = process.env.CHAOS_STUCK_KEY;
const stuckMs = Number(process.env.CHAOS_STUCK_MS ?? 20_000);
const stuckFile = process.env.CHAOS_STUCK_FILE;
const drainTimeoutMs = optionalNumber('CHAOS_DRAIN_TIMEOUT_MS');
const stopMode = (process.env.CHAOS_STOP_MODE ?? 'close') as 'close' | 'unsubscribe' | 'takeUntil';
const stopOnRevoking = process.env.CHAOS_STOP_ON_REVOKING === '1';
const stopInAssign = process.env.CHAOS_STOP_IN_ASSIGN === '1';
const selfStopDuty = process.env.CHAOS_SELF_STOP_DUTY === '1';
const selfStopMinAgeMs = selfStopDuty ? 0 : (optionalNumber('CHAOS_SELF_STOP_MIN_AGE_MS') ?? 2000);
const onAssignDelayMs = optionalNumber('CHAOS_ON_ASSIGN_DELAY_MS');
const drainHoldMs = optionalNumber('CHAOS_DRAIN_HOLD_MS');
/** Revokes that began with no handler running, whose `onRevoke` hook is still to hold them. */
let heldIdleRevokes = 0;
const latency = (process.env.CHAOS_LATENCY ?? 'default') as LatencyProfile;
const failRate = optionalNumber('CHAOS_FAIL_RATE');
const failures: FailurePlan | undefined =
  failRate === undefined
    ? undefined
    : { rate: failRate, maxAttempts: optionalNumber('CHAOS_FAIL_ATTEMPTS') ?? 2 };
const retry = process.env.CHAOS_RETRY
  ? (JSON.parse(process.env.CHAOS_RETRY) as RetryOptions)
  : undefined;

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Handlers running now, per partition (the `revoking` event carries no in-flight count). */
const inFlight = new Map<number, number>();
const inFlightOn = (partitions: readonly number[]): number =>
  partitions.reduce((n, p) => n + (inFlight.get(p) ?? 0), 0);
/** Partitions whose revoke has begun and not ended (revoking → revoked | lost). */
const draining = new Set<number>();
/** onAssign hook calls waiting now. */
let assignWaiting = 0;
let selfStopArmed = false;
let stopping = false;

/**
 * Arms this life's one self-stop `delayMs` from now; false when already armed, or (for a stop on
 * `revoking`, which needs work in flight) younger than CHAOS_SELF_STOP_MIN_AGE_MS.
 */
function armSelfStop(
  cause: 'revoking' | 'assign',
  delayMs: number,
  stillDue: () => boolean = () => true,
): boolean {
  if (selfStopArmed || stopping) return false;
  if (cause === 'revoking' && Date.now() - bornAt < selfStopMinAgeMs) return false;
  selfStopArmed = true;
  line(`E selfstop ${Date.now()} ${cause} ${Math.round(delayMs)}`);
  setTimeout(() => {
    if (stillDue()) return stop(cause);
    // The moment passed (the revoke finished first): wait for the next one.
    line(`E selfstop-missed ${Date.now()} ${cause}`);
    selfStopArmed = false;
  }, delayMs);
  return true;
}

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
  ...(drainHoldMs === undefined
    ? {}
    : {
        onRevoke: async (_partitions: unknown, { signal }: { signal: AbortSignal }) => {
          if (heldIdleRevokes === 0) return;
          heldIdleRevokes -= 1;
          await wait(drainHoldMs, undefined, { signal }).catch(() => undefined);
        },
      }),
  ...(onAssignDelayMs === undefined
    ? {}
    : {
        onAssign: async (p: AssignedPartition) => {
          const waitMs =
            hashUnit(`${lifeSeed}:assign:${p.generation}:${p.partition}`) * onAssignDelayMs;
          assignWaiting += 1;
          // The stop lands while this hook (and so the assignment) still waits.
          if (stopInAssign) armSelfStop('assign', random() * waitMs);
          await sleep(waitMs);
          assignWaiting -= 1;
          return undefined;
        },
      }),
});

/** Resolves when the consumer has really closed: `rebalances$` completes then. */
const closed = new Promise<void>((resolve) => {
  consumer.rebalances$.subscribe({
    next: (e) => {
      const partitions = e.partitions.map((p) => p.partition);
      if (e.type === 'committed') {
        for (const r of e.results) {
          if (r.status === 'committed') line(`C ${r.partition} ${r.offset} ${process.pid}`);
          if (r.status === 'failed' || r.status === 'lost')
            line(`F ${r.partition} ${r.status} ${process.pid}`);
        }
      }
      if (e.type === 'revoking') {
        const busy = inFlightOn(partitions);
        if (drainHoldMs !== undefined && busy === 0 && partitions.length > 0) heldIdleRevokes += 1;
        for (const p of partitions) draining.add(p);
        line(`E revoking ${Date.now()} ${partitions.join(',')} ${busy}`);
        if (stopOnRevoking && partitions.length > 0 && busy > 0)
          armSelfStop('revoking', selfStopDuty ? 0 : random() * 10, () =>
            partitions.some((p) => draining.has(p)),
          );
      }
      if (e.type === 'assigned' || e.type === 'revoked' || e.type === 'lost') {
        if (e.type !== 'assigned') for (const p of partitions) draining.delete(p);
        line(
          `E ${e.type} ${Date.now()} ${partitions.join(',')} ${e.type === 'revoked' ? e.totalMs : ''}`,
        );
      }
    },
    complete: () => resolve(),
  });
});

const tries = new Map<string, number>();

async function handle(m: KafkaMessage): Promise<void> {
  const key = m.key?.toString() ?? '';
  inFlight.set(m.partition, (inFlight.get(m.partition) ?? 0) + 1);
  try {
    if (key === stuckKey && claimStuck(stuckFile)) {
      line(`S ${m.partition} ${m.offset} ${Date.now()}`);
      await sleep(stuckMs);
    } else {
      const ms = latencyMs(random(), latency);
      if (ms >= 1) await sleep(ms);
      // Still running when its partition's revoke began: hold the revoke open a while longer.
      if (drainHoldMs !== undefined && draining.has(m.partition)) await sleep(drainHoldMs);
    }
    if (failures) {
      const failing = failingAttempts(variantSeed, key, failures);
      if (failing > 0) {
        const attempt = (tries.get(key) ?? 0) + 1;
        tries.set(key, attempt);
        if (attempt <= failing) {
          line(`X ${m.partition} ${m.offset} ${attempt} ${process.pid}`);
          throw new Error(`injected failure of ${key}, attempt ${attempt} of ${failing}`);
        }
      }
    }
    line(`R ${m.partition} ${m.offset} ${key} ${process.pid} ${Date.now()}`);
  } finally {
    inFlight.set(m.partition, (inFlight.get(m.partition) ?? 1) - 1);
  }
}

const stop$ = new Subject<void>();
let pipelineEnded!: () => void;
const pipelineDone = new Promise<void>((resolve) => (pipelineEnded = resolve));

/** Stops the consumer the way this life was told to, then exits once it has really closed. */
function stop(cause: string): void {
  if (stopping) return;
  stopping = true;
  const busy = inFlightOn([...inFlight.keys()]);
  line(`E stopping ${Date.now()} ${stopMode} ${cause} ${draining.size} ${busy} ${assignWaiting}`);
  logger.info(
    { stopMode, cause, draining: draining.size, inFlight: busy, assignWaiting },
    'stopping',
  );
  if (stopMode === 'close') void consumer.close();
  else if (stopMode === 'takeUntil') stop$.next();
  else {
    subscription.unsubscribe();
    pipelineEnded();
  }
  void exitWhenClosed();
  // The driver allows 60 s; fail loudly before that, naming what hung.
  setTimeout(() => {
    logger.error({ stopMode, cause }, 'the consumer did not close within 45 s of the stop');
    closeSync(out);
    process.exit(1);
  }, 45_000).unref();
}

let exiting = false;
async function exitWhenClosed(): Promise<void> {
  if (exiting) return;
  exiting = true;
  await closed;
  await pipelineDone;
  // The library's own counters, for the driver to check against the records above.
  const m = consumer.metrics();
  line(
    `M ${JSON.stringify({ processed: m.messages.processed, failed: m.messages.failed, revokes: m.rebalances.revokes, losses: m.rebalances.losses, stalls: m.stalls, commitsOk: m.commits.ok })}`,
  );
  logger.info({ stopMode }, 'closed cleanly');
  closeSync(out);
  process.exit(0);
}

process.on('SIGTERM', () => {
  logger.info('SIGTERM');
  stop('SIGTERM');
});

line(`E ready ${Date.now()}`);
const ordering = process.env.CHAOS_ORDERING as 'partition' | 'key' | 'none' | undefined;
const processed$ = consumer.process(handle, {
  concurrency: optionalNumber('CHAOS_CONCURRENCY') ?? 16,
  partitionConcurrency: optionalNumber('CHAOS_PARTITION_CONCURRENCY') ?? 2,
  ...(ordering ? { ordering } : {}),
  ...(retry ? { retry } : {}),
});
const subscription = (
  stopMode === 'takeUntil' ? processed$.pipe(takeUntil(stop$)) : processed$
).subscribe({
  error: (err: unknown) => {
    logger.error({ err }, 'pipeline failed');
    closeSync(out);
    process.exit(1);
  },
  complete: () => {
    pipelineEnded();
    void exitWhenClosed();
  },
});
