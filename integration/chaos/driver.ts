/**
 * The chaos driver: creates a topic, fills it, runs N worker processes that are stopped and
 * restarted at seeded random lifetimes (SIGTERM, or SIGKILL / SIGSTOP in the crash and frozen
 * variants) or stop themselves (while a revoke drains, while an assignment waits for its start
 * positions), each life stopping by `close()`, `unsubscribe()` or `takeUntil` as seeded; lets the
 * last set finish the backlog, and verifies the outcome against what Kafka holds. The broker
 * failure kills the group's coordinator, or a follower of its `__consumer_offsets` partition, while a
 * revoke is in flight. Modelled on Sentry
 * taskbroker's rebalance test, with the checks it lacks.
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { RetryOptions } from '../../lib';
import {
  BROKERS,
  committedOffsets,
  createTopic,
  highWatermarks,
  produce,
  readAll,
  uniqueName,
} from '../helpers/kafka';
import { seededRandom } from '../helpers/random';
import { workerArgs } from '../helpers/worker-bundle';
import { MetadataProbe } from './coordinator';
import type { CoordinatorLookup } from './coordinator';
import { judgeDuplicates } from './duplicates';
import type { DuplicateVerdict, Processing } from './duplicates';
import { hashUnit } from './faults';
import type { FailurePlan, LatencyProfile } from './faults';

/** How a worker stops its consumer: `await close()`, `unsubscribe()`, or `takeUntil(stop$)`. */
export type StopMode = 'close' | 'unsubscribe' | 'takeUntil';

export interface ChaosOptions {
  name: string;
  outDir: string;
  protocolConfig: Record<string, unknown>;
  workers: number;
  partitions: number;
  messages: number;
  restartsPerWorker: number;
  minLifeMs: number;
  maxLifeMs: number;
  seed: number;
  /** Every n-th stop is a SIGKILL (crash variant). */
  killEvery?: number;
  /** Freeze one worker (SIGSTOP) longer than its session timeout, then resume it. */
  freeze?: { afterMs: number; forMs: number };
  /** Handlers per partition in each worker. @default 2 */
  partitionConcurrency?: number;
  /** `process()` ordering (default: the library's). */
  ordering?: 'partition' | 'key' | 'none';
  /** Turn the completed-offset memory on. */
  rememberCompleted?: boolean;
  /** One message's handler hangs past the drain deadline. */
  stuck?: { key: string; ms: number; drainTimeoutMs: number };
  /** Ways the lives stop, one chosen per life (seeded). @default ['close'] */
  stopModes?: readonly StopMode[];
  /**
   * Per-life probabilities (non-final lives) that the worker stops itself: 0–50 ms after a
   * `revoking` event with handlers in flight, or while its `onAssign` hook waits.
   */
  selfStop?: { onRevoking: number; inAssign: number };
  /** An `onAssign` hook waiting a seeded 0..N ms per partition. */
  onAssignDelayMs?: number;
  /** Handler failures injected per key (deterministic per key and attempt). */
  failures?: FailurePlan;
  /** `process()`'s `retry` option. */
  retry?: RetryOptions;
  /** `process()`'s `concurrency` in each worker. @default 16 */
  concurrency?: number;
  /** Handler sleep profile. @default 'default' */
  latency?: LatencyProfile;
  /**
   * Three-node cluster: after `afterMs`, a worker joins (a rebalance); when some member logs
   * `revoking` with handlers in flight, a node (looked up then) is killed while that revoke
   * drains, and restarted `downMs` after the kill. `target`: `coordinator` (default) kills the
   * group's coordinator (the leader of its `__consumer_offsets` partition); `follower` kills an
   * in-sync follower of that partition (seeded pick), so the coordinator stays but its offset
   * writes wait for the ISR to shrink (the controller fences the dead broker). The workers'
   * handlers in flight at a revoke take `drainHoldMs` longer (default 2000), so that the revoke
   * still drains when the kill (a metadata lookup and a kafka.sh call later) has landed.
   */
  brokerFailure?: {
    afterMs: number;
    downMs: number;
    drainHoldMs?: number;
    target?: 'coordinator' | 'follower';
  };
  /** The group's dynamic configs (`kafka.sh group-config`), set before the first worker joins. */
  groupConfig?: Record<string, string>;
  replicationFactor?: number;
  topicConfig?: Record<string, string>;
  /** Deadline for the whole backlog to be processed once the restarts are over. */
  finishTimeoutMs?: number;
}

/** One life's seeded plan. */
interface LifePlan {
  lifetimeMs: number;
  stopMode: StopMode;
  /** The worker stops itself (never in a final life). */
  selfStop: 'revoking' | 'assign' | undefined;
  /**
   * One of the first lives, whose self-stop the variant relies on: the driver lets it live past
   * its lifetime (up to DUTY_GRACE_MS more, while the other slots' restarts rebalance the group)
   * until it has stopped itself, instead of stopping it before the moment came.
   */
  duty: boolean;
  /** Pause before the slot's next life. */
  pauseMs: number;
}

interface WorkerRun {
  slot: number;
  life: number;
  plan: LifePlan;
  pid: number;
  startedAt: number;
  stoppedAt?: number;
  /** How the driver stopped it; `self`: it stopped itself (graceful). */
  signal?: 'SIGTERM' | 'SIGKILL' | 'self';
  frozen?: boolean;
  /** Whether it owned partitions when it was frozen (else the frozen variant proves little). */
  frozeOwning?: boolean;
  exitCode?: number | null;
  exitSignal?: NodeJS.Signals | null;
  out: string;
  log: string;
  child: ChildProcess;
  exited: Promise<void>;
}

export interface ChaosSummary {
  variant: string;
  seed: number;
  messages: number;
  processedRecords: number;
  restarts: number;
  kills: number;
  freezes: number;
  rebalancesSeen: number;
  revokeMs: { max: number; median: number; count: number };
  /** Stopped lives per kind (`signal/stopMode`, self-stops as `self:cause/stopMode`). */
  stops: Record<string, number>;
  /** Stops that began while a revoke drained in that worker / while its onAssign hook waited. */
  stopsWhileDraining: number;
  stopsWhileAssigning: number;
  injectedFailures: number;
  duplicates: number;
  explainedDuplicates: number;
  /** Duplicates by the kind of stop of the life that processed the message first. */
  duplicatesByStop: Record<string, number>;
  /** Explained duplicates by reason (lost: the member was fenced or dropped and lost the partition). */
  explainedBy: Record<string, number>;
  /** `lost` events over all lives, and final commits reported failed / refused for ownership. */
  lostEvents: number;
  /**
   * Per life that saw partitions lost: when (ms since the run began), which, and its warnings
   * (level >= 40) from 15 s before to 2 s after: the evidence for an excused duplicate, kept in
   * the printed summary (the make targets delete the output directory after a passing run).
   */
  lostEvidence: { pid: number; at: number[]; partitions: number[]; warnings: string[] }[];
  finalCommits: { failed: number; lost: number };
  lost: number;
  broker?: BrokerFailureReport;
  durationMs: number;
}

/** What the broker kill hit. */
export interface BrokerFailureReport {
  target: 'coordinator' | 'follower';
  /** The coordinator as the cluster answered before the kill (FindCoordinator). */
  coordinatorBefore: number;
  /**
   * The group's `__consumer_offsets` partition as the cluster described it before the kill
   * (GroupCoordinator.java): partition, leader, replicas, ISR, followers.
   */
  offsetsBefore: string;
  /** The lookup at the moment of the kill (metadata: leader of the group's offsets partition). */
  lookup: CoordinatorLookup;
  killedNode: number;
  /** The revoke that triggered the kill: which worker, when it began, its partitions. */
  trigger: { pid: number; revokingAt: number; partitions: string; inFlight: number };
  /** When the kill was sent; `killAt`: when kafka.sh said the node was dead. */
  killSentAt: number;
  killAt: number;
  /** revoking line written → kill sent, in ms. */
  reactionMs: number;
  /**
   * Coordinator kill: the coordinator the metadata named after the failover, and when. Follower
   * kill: the leader of the offsets partition once the ISR had shrunk (the coordinator must stay),
   * movedAfterMs -1.
   */
  movedTo: number;
  movedAfterMs: number;
  /** Follower kill: when the metadata showed the killed node out of the ISR (-1: never within 60 s). */
  isrShrunkAfterMs?: number;
  /** Follower kill: when it was back in the ISR after its restart (-1: not within 60 s). */
  isrRejoinedAfterRestartMs?: number;
  /** Warnings about commits (failed, retried, re-committed, held) logged from the kill until the ISR shrank + 10 s. */
  commitWarningsInStall?: number;
  downMs: number;
  /** Members whose revoke had begun and not ended when the kill was sent. */
  membersMidRevoke: number[];
  /** Those revokes' durations, in ms. */
  midRevokeMs?: number[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const execFileAsync = promisify(execFile);
/** True if `promise` settles within `ms`, false otherwise (the timer is cleared either way). */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
const WORKER = join(__dirname, 'worker.ts');
const KAFKA_SH = join(__dirname, '..', 'kafka', 'kafka.sh');

/** Worker processes still running (a failed variant must not leave them consuming). */
const liveWorkers = new Set<ChildProcess>();

/** SIGKILLs every worker still running; the suite calls it after each variant. */
export function killLeftoverWorkers(): number {
  const n = liveWorkers.size;
  for (const child of liveWorkers) child.kill('SIGKILL');
  liveWorkers.clear();
  return n;
}

/** How much longer than its lifetime a duty life may wait for its self-stop. */
const DUTY_GRACE_MS = 30_000;

/** Whether some life has stopped while a revoke drained (`revoking`) / its onAssign hook waited. */
function overlapSeen(runs: WorkerRun[], kind: 'revoking' | 'assign'): boolean {
  return runs.some((r) =>
    parse(r).stops.some((s) => (kind === 'revoking' ? s.draining : s.assignWaiting) > 0),
  );
}

/** True once `run` exited within `ms`; false at `ms`, or as soon as `enough()` holds. */
async function untilStoppedOr(run: WorkerRun, ms: number, enough: () => boolean): Promise<boolean> {
  const by = Date.now() + ms;
  while (Date.now() < by) {
    if (await within(run.exited, Math.min(500, by - Date.now()))) return true;
    if (enough()) return false;
  }
  return false;
}

/** A life's plan, from its own seeded stream (independent of how the slots interleave). */
function planLife(o: ChaosOptions, slot: number, life: number, final: boolean): LifePlan {
  const r = seededRandom(Math.floor(hashUnit(`${o.seed}:life:${slot}:${life}`) * 2 ** 32));
  const lifetimeMs = o.minLifeMs + r() * (o.maxLifeMs - o.minLifeMs);
  const modes = o.stopModes ?? ['close'];
  const drawnMode = modes[Math.floor(r() * modes.length)] ?? 'close';
  const s = r();
  let selfStop: LifePlan['selfStop'];
  if (!final && o.selfStop) {
    if (s < o.selfStop.onRevoking) selfStop = 'revoking';
    else if (s < o.selfStop.onRevoking + o.selfStop.inAssign) selfStop = 'assign';
  }
  // The first lives have fixed duties, so that no seed leaves a path the variant is about unplanned
  // (drawn alone, one of three stop modes or a self-stop went missing for ~7 % of the seeds): the
  // first life of slot k stops by the k-th mode; slot 0's arms the self-stop in the onAssign hook,
  // slot 1's the one while a revoke drains. The draws above still happen (same stream).
  const first = !final && life === 0;
  const stopMode = first && slot < modes.length ? modes[slot]! : drawnMode;
  let duty = false;
  if (first && o.selfStop) {
    if (slot === 0 && o.selfStop.inAssign > 0) [selfStop, duty] = ['assign', true];
    if (slot === 1 && o.selfStop.onRevoking > 0) [selfStop, duty] = ['revoking', true];
  }
  return { lifetimeMs, stopMode, selfStop, duty, pauseMs: r() * 1000 };
}

export async function runChaos(o: ChaosOptions): Promise<ChaosSummary> {
  const started = Date.now();
  if (o.selfStop && o.selfStop.inAssign > 0 && o.onAssignDelayMs === undefined)
    throw new Error(`${o.name}: selfStop.inAssign needs onAssignDelayMs (the hook it stops in)`);
  // Workers append to their files: a previous run's must not count.
  rmSync(o.outDir, { recursive: true, force: true });
  mkdirSync(o.outDir, { recursive: true });
  const topic = uniqueName(`chaos-${o.name}`);
  const group = uniqueName(`chaos-${o.name}-group`);
  await createTopic(topic, o.partitions, o.topicConfig ?? {}, o.replicationFactor ?? 1);
  const batch = 20_000;
  for (let i = 0; i < o.messages; i += batch) {
    await produce(
      topic,
      Array.from({ length: Math.min(batch, o.messages - i) }, (_, j) => ({
        key: `m-${i + j}`,
        value: `payload-${i + j}`,
      })),
    );
  }
  if (o.groupConfig) {
    await kafkaSh(
      ['group-config', group, ...Object.entries(o.groupConfig).map(([k, v]) => `${k}=${v}`)],
      o.outDir,
    );
  }
  const runs: WorkerRun[] = [];
  let killCounter = 0;

  const start = (slot: number, life: number, plan: LifePlan): WorkerRun => {
    const out = join(o.outDir, `worker-${slot}-${life}.out`);
    const log = join(o.outDir, `worker-${slot}-${life}.log`);
    const child = spawn(process.execPath, workerArgs(WORKER), {
      env: {
        ...process.env,
        CHAOS_BROKERS: BROKERS,
        CHAOS_TOPIC: topic,
        CHAOS_GROUP: group,
        CHAOS_CONFIG: JSON.stringify(o.protocolConfig),
        CHAOS_OUT: out,
        CHAOS_LOG: log,
        CHAOS_SEED: String(o.seed * 1000 + slot * 100 + life),
        CHAOS_VARIANT_SEED: String(o.seed),
        CHAOS_PARTITION_CONCURRENCY: String(o.partitionConcurrency ?? 2),
        CHAOS_STOP_MODE: plan.stopMode,
        ...(plan.selfStop === 'revoking' ? { CHAOS_STOP_ON_REVOKING: '1' } : {}),
        ...(plan.selfStop === 'assign' ? { CHAOS_STOP_IN_ASSIGN: '1' } : {}),
        ...(plan.duty ? { CHAOS_SELF_STOP_DUTY: '1' } : {}),
        ...(o.brokerFailure
          ? { CHAOS_DRAIN_HOLD_MS: String(o.brokerFailure.drainHoldMs ?? 2000) }
          : {}),
        ...(o.onAssignDelayMs === undefined
          ? {}
          : { CHAOS_ON_ASSIGN_DELAY_MS: String(o.onAssignDelayMs) }),
        ...(o.failures
          ? {
              CHAOS_FAIL_RATE: String(o.failures.rate),
              CHAOS_FAIL_ATTEMPTS: String(o.failures.maxAttempts),
            }
          : {}),
        ...(o.retry ? { CHAOS_RETRY: JSON.stringify(o.retry) } : {}),
        ...(o.concurrency === undefined ? {} : { CHAOS_CONCURRENCY: String(o.concurrency) }),
        ...(o.latency ? { CHAOS_LATENCY: o.latency } : {}),
        ...(o.ordering ? { CHAOS_ORDERING: o.ordering } : {}),
        ...(o.rememberCompleted ? { CHAOS_REMEMBER_COMPLETED: '1' } : {}),
        ...(o.stuck
          ? {
              CHAOS_STUCK_KEY: o.stuck.key,
              CHAOS_STUCK_MS: String(o.stuck.ms),
              CHAOS_STUCK_FILE: join(o.outDir, 'stuck.claimed'),
            }
          : {}),
        ...(o.stuck ? { CHAOS_DRAIN_TIMEOUT_MS: String(o.stuck.drainTimeoutMs) } : {}),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const run: WorkerRun = {
      slot,
      life,
      plan,
      pid: child.pid ?? -1,
      startedAt: Date.now(),
      out,
      log,
      child,
      exited: new Promise<void>((resolve) =>
        child.on('exit', (code, signal) => {
          run.exitCode = code;
          run.exitSignal = signal;
          if (stderr) writeFileSync(`${log}.stderr`, stderr);
          resolve();
        }),
      ),
    };
    runs.push(run);
    liveWorkers.add(child);
    void run.exited.then(() => liveWorkers.delete(child));
    return run;
  };

  const stop = async (run: WorkerRun, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> => {
    // A worker that has not installed its SIGTERM handler yet would just die: wait until ready.
    const readyBy = Date.now() + 30_000;
    while (!isReady(run) && run.exitCode === undefined && Date.now() < readyBy) await sleep(50);
    if (run.exitCode !== undefined) return settleExit(run);
    run.signal = signal;
    run.stoppedAt = Date.now();
    run.child.kill(signal);
    const exited = await within(run.exited, 60_000);
    if (!exited) {
      run.child.kill('SIGKILL');
      await run.exited;
      throw new Error(
        `worker ${run.slot}/${run.life} (pid ${run.pid}) did not exit within 60 s of ${signal}`,
      );
    }
  };

  const brokerEvents: Promise<void>[] = [];
  const finals: WorkerRun[] = [];
  let brokerReport: BrokerFailureReport | undefined;
  if (o.brokerFailure) {
    const bf = o.brokerFailure;
    brokerEvents.push(
      (async () => {
        await sleep(bf.afterMs);
        brokerReport = await killBrokerMidRevoke(o, group, runs, bf.downMs, (extra) =>
          finals.push(start(o.workers + extra, 0, planLife(o, o.workers + extra, 0, true))),
        );
      })(),
    );
  }

  // Each slot restarts its worker at seeded random lifetimes (or when it stopped itself), then
  // keeps a final one running.
  await Promise.all(
    Array.from({ length: o.workers }, async (_, slot) => {
      for (let life = 0; life < o.restartsPerWorker; life++) {
        const plan = planLife(o, slot, life, false);
        const run = start(slot, life, plan);
        // The first life: the backlog is certainly not consumed yet, so the frozen worker owns
        // partitions with work in flight (later, a fast group may have finished it all).
        if (o.freeze && slot === 0 && life === 0) {
          await sleep(o.freeze.afterMs);
          // Freeze it while it owns partitions, or the variant proves little.
          const ownsBy = Date.now() + 20_000;
          while (!ownsPartitions(run) && Date.now() < ownsBy) await sleep(100);
          run.frozeOwning = ownsPartitions(run);
          run.child.kill('SIGSTOP');
          run.frozen = true;
          await sleep(o.freeze.forMs);
          run.child.kill('SIGCONT');
          await sleep(Math.max(0, plan.lifetimeMs - o.freeze.afterMs));
        } else {
          let stoppedItself = await within(run.exited, plan.lifetimeMs);
          // On a slow machine a lifetime can pass before the moment a duty self-stop waits for
          // (a revoke of its partitions with handlers in flight) ever came: it may live on until
          // that moment, or until some life has stopped in that window anyway.
          if (!stoppedItself && plan.duty && plan.selfStop)
            stoppedItself = await untilStoppedOr(run, DUTY_GRACE_MS, () =>
              overlapSeen(runs, plan.selfStop!),
            );
          if (stoppedItself) {
            settleExit(run);
            await sleep(plan.pauseMs);
            continue;
          }
        }
        killCounter += 1;
        const kill = o.killEvery !== undefined && killCounter % o.killEvery === 0;
        await stop(run, kill ? 'SIGKILL' : 'SIGTERM');
        await sleep(plan.pauseMs);
      }
      finals.push(start(slot, o.restartsPerWorker, planLife(o, slot, o.restartsPerWorker, true)));
    }),
  );
  await Promise.all(brokerEvents);

  // Let the last set finish the backlog.
  const deadline = Date.now() + (o.finishTimeoutMs ?? 180_000);
  for (;;) {
    const done = processedSet(runs).size;
    if (done >= o.messages) break;
    if (Date.now() > deadline)
      throw new Error(`${o.name}: only ${done} of ${o.messages} processed at the deadline`);
    if (finals.some((r) => r.exitCode !== undefined)) {
      throw new Error(
        `${o.name}: a final worker exited early: ${JSON.stringify(finals.map((r) => [r.pid, r.exitCode, r.exitSignal]))}`,
      );
    }
    await sleep(500);
  }
  // Every record was processed by someone, but records a killed worker processed without
  // committing are redone by the partition's next owner only once the broker expired the dead
  // member's session: let the final set get there (the group commits the end offsets) before
  // stopping it, or verify() would blame the library for the driver's impatience.
  for (;;) {
    const settled = await Promise.all([
      highWatermarks(topic, o.partitions),
      committedOffsets(group, topic, o.partitions),
    ]).then(
      ([ends, committed]) => JSON.stringify(committed) === JSON.stringify(ends),
      () => false, // a lookup failed (a broker restarting): ask again
    );
    if (settled) break;
    if (Date.now() > deadline) break; // verify() reports the difference
    if (finals.some((r) => r.exitCode !== undefined)) break;
    await sleep(500);
  }
  await Promise.all(finals.map((r) => stop(r, 'SIGTERM')));

  return verify(o, topic, group, runs, started, brokerReport);
}

/** A worker that exited without the driver's signal: a self-stop if it logged one (graceful). */
function settleExit(run: WorkerRun): void {
  const s = parse(run).stops[0];
  if (s && s.cause !== 'SIGTERM') run.signal = 'self';
  run.stoppedAt = s?.at ?? Date.now();
}

/** How long after a join a member must begin a revoke before another member joins. */
const JOIN_REVOKE_WAIT_MS = 20_000;

/**
 * Kills a node while a revoke is in flight: the group's coordinator, or (`target: 'follower'`) an
 * in-sync follower of its `__consumer_offsets` partition. Asks the cluster which node coordinates
 * the group (FindCoordinator) and how its offsets partition is replicated, starts a worker (`join`)
 * so that the group rebalances, waits until some member logs `revoking` with handlers in flight,
 * looks the partition up in the metadata at that moment and kills its leader (or a follower, a
 * seeded pick among the in-sync ones); waits for the metadata to name a new coordinator (or to show
 * the follower out of the ISR, the coordinator unchanged); restarts the node `downMs` after the
 * kill (and, for a follower, waits until it is back in the ISR, so the next variant starts whole).
 */
async function killBrokerMidRevoke(
  o: ChaosOptions,
  group: string,
  runs: WorkerRun[],
  downMs: number,
  join: (extra: number) => void,
): Promise<BrokerFailureReport> {
  const target = o.brokerFailure?.target ?? 'coordinator';
  const probe = await MetadataProbe.connect();
  try {
    const answer = await kafkaSh(['coordinator', group], o.outDir);
    const coordinatorBefore = Number(/coordinator=(\d+)/.exec(answer)?.[1] ?? -1);
    const offsetsBefore = /partition=.*$/m.exec(answer)?.[0] ?? '?';
    const tails = new Map<WorkerRun, { pos: number; rest: string }>();
    for (const r of runs) tails.set(r, { pos: fileSize(r.out), rest: '' });
    const since = Date.now();
    // A revoke with handlers in flight (they hold it open past the kill; one with none ends in
    // milliseconds, before the node is dead, and the variant would prove nothing). When no member
    // began one within 20 s of a join (the topic drained meanwhile, or a loaded machine: under
    // make test's lanes a joining worker's start and the group's join rounds took over 10 s, with
    // no revoke in 4 joins of 10 s once; and a classic group stalled ~60 s once, waiting for a
    // member stopped in the middle of its join, so no revoke in 4 joins of 20 s), another member
    // joins, up to five.
    let joins = 0;
    let joinedAt = since;
    join(joins++);
    let trigger: BrokerFailureReport['trigger'] | undefined;
    while (trigger === undefined) {
      for (const r of runs) {
        if (r.exitCode !== undefined) continue;
        const tail = tails.get(r) ?? { pos: 0, rest: '' };
        tails.set(r, tail);
        for (const l of readNewLines(r.out, tail)) {
          const f = l.split(' ');
          // After three joins without one (a loaded machine), any revoke: it may end before the
          // kill lands, which verify() then reports instead of proving nothing silently.
          const busy = +(f[4] ?? 0) > 0 || joins > 3;
          if (f[0] === 'E' && f[1] === 'revoking' && f[3] && +f[2]! >= since && busy) {
            trigger ??= {
              pid: r.pid,
              revokingAt: +f[2]!,
              partitions: f[3],
              inFlight: +(f[4] ?? 0),
            };
          }
        }
      }
      if (trigger) break;
      if (Date.now() > joinedAt + JOIN_REVOKE_WAIT_MS) {
        if (joins > 5)
          throw new Error(
            `${o.name}: no member began a revoke within ${JOIN_REVOKE_WAIT_MS / 1000} s of each of ${joins} joins`,
          );
        joinedAt = Date.now();
        join(joins);
        joins += 1;
      }
      await sleep(5);
    }
    const lookup = await probe.coordinatorOf(group);
    let victim = lookup.leader;
    if (target === 'follower') {
      // An in-sync follower: the leader's writes wait for it until the ISR drops it.
      const followers = lookup.replicas
        .filter((id) => id !== lookup.leader && lookup.isrs.includes(id))
        .sort((a, b) => a - b);
      if (followers.length === 0)
        throw new Error(
          `${o.name}: __consumer_offsets[${lookup.partition}] has no in-sync follower (leader ${lookup.leader}, replicas ${lookup.replicas.join(',')}, isr ${lookup.isrs.join(',')})`,
        );
      victim = followers[Math.floor(hashUnit(`${o.seed}:follower`) * followers.length)]!;
    }
    const killSentAt = Date.now();
    await kafkaSh(['stop-node', String(victim)], o.outDir);
    // The node is dead by now; the revoke must still be open here (verify checks it).
    const killAt = Date.now();
    let moved: CoordinatorLookup | undefined;
    const movedBy = Date.now() + 60_000;
    while (Date.now() < movedBy) {
      const now = await probe.coordinatorOf(group).catch(() => undefined);
      if (
        target === 'coordinator'
          ? now && now.leader >= 0 && now.leader !== lookup.leader
          : now && now.leader >= 0 && !now.isrs.includes(victim)
      ) {
        moved = now;
        break;
      }
      await sleep(200);
    }
    await sleep(Math.max(0, killAt + downMs - Date.now()));
    await kafkaSh(['start-node', String(victim)], o.outDir);
    const restartedAt = Date.now();
    let rejoinedAt: number | undefined;
    if (target === 'follower') {
      const rejoinBy = Date.now() + 60_000;
      while (Date.now() < rejoinBy) {
        const now = await probe.coordinatorOf(group).catch(() => undefined);
        if (now?.isrs.includes(victim)) {
          rejoinedAt = Date.now();
          break;
        }
        await sleep(200);
      }
    }
    const report: BrokerFailureReport = {
      target,
      coordinatorBefore,
      offsetsBefore,
      lookup,
      killedNode: victim,
      trigger,
      killSentAt,
      killAt,
      reactionMs: killAt - trigger.revokingAt,
      movedTo: moved?.leader ?? -1,
      movedAfterMs: target === 'coordinator' && moved ? moved.at - killAt : -1,
      ...(target === 'follower'
        ? {
            isrShrunkAfterMs: moved ? moved.at - killAt : -1,
            isrRejoinedAfterRestartMs: rejoinedAt === undefined ? -1 : rejoinedAt - restartedAt,
          }
        : {}),
      downMs,
      membersMidRevoke: [],
    };
    const where = `__consumer_offsets[${lookup.partition}] of ${lookup.offsetsPartitions}, leader ${lookup.leader} at ${String(lookup.address)}, replicas ${lookup.replicas.join(',')}, isr ${lookup.isrs.join(',')}; the cluster said coordinator ${coordinatorBefore}, ${offsetsBefore}`;
    const after =
      target === 'coordinator'
        ? `new coordinator ${report.movedTo} after ${report.movedAfterMs} ms`
        : `out of the ISR after ${String(report.isrShrunkAfterMs)} ms (leader then ${report.movedTo}); back in the ISR ${String(report.isrRejoinedAfterRestartMs)} ms after its restart`;
    console.log(
      `      killed node ${report.killedNode}, ${target === 'coordinator' ? 'coordinator' : 'a follower of the offsets partition'} of ${group} (${where}) ${report.reactionMs} ms after worker ${trigger.pid} began revoking ${trigger.partitions} (${trigger.inFlight} in flight); ${after}; node back after ${downMs} ms`,
    );
    return report;
  } finally {
    await probe.close();
  }
}

function fileSize(path: string): number {
  if (!existsSync(path)) return 0;
  const fd = openSync(path, 'r');
  try {
    return fstatSync(fd).size;
  } finally {
    closeSync(fd);
  }
}

/** The complete lines appended to `path` since the last call (`tail` keeps the position). */
function readNewLines(path: string, tail: { pos: number; rest: string }): string[] {
  if (!existsSync(path)) return [];
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size <= tail.pos) return [];
    const buf = Buffer.alloc(size - tail.pos);
    readSync(fd, buf, 0, buf.length, tail.pos);
    tail.pos = size;
    const lines = (tail.rest + buf.toString('utf8')).split('\n');
    tail.rest = lines.pop() ?? '';
    return lines;
  } finally {
    closeSync(fd);
  }
}

function ownsPartitions(run: WorkerRun): boolean {
  if (!existsSync(run.out)) return false;
  const owned = new Set<string>();
  for (const line of readFileSync(run.out, 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f[0] !== 'E' || !f[3]) continue;
    for (const p of f[3].split(',')) {
      if (f[1] === 'assigned') owned.add(p);
      else if (f[1] === 'revoked' || f[1] === 'lost') owned.delete(p);
    }
  }
  return owned.size > 0;
}

function isReady(run: WorkerRun): boolean {
  return existsSync(run.out) && readFileSync(run.out, 'utf8').includes('E ready ');
}

/** Runs kafka.sh (without blocking the driver) and logs its output next to the variant's. */
async function kafkaSh(args: string[], outDir: string): Promise<string> {
  // kafka.sh treats KAFKA_BROKERS as an external cluster it must not touch.
  const env = { ...process.env };
  delete env.KAFKA_BROKERS;
  const { stdout } = await execFileAsync('bash', [KAFKA_SH, ...args], { encoding: 'utf8', env });
  writeFileSync(
    join(outDir, 'broker-events.log'),
    `${new Date().toISOString()} kafka.sh ${args.join(' ')}\n${stdout}\n`,
    { flag: 'a' },
  );
  return stdout;
}

interface Parsed {
  records: { partition: number; offset: number; key: string; pid: number; at: number }[];
  commits: { partition: number; offset: number; pid: number }[];
  revokeMs: number[];
  rebalances: number;
  assignedAt: number[];
  /** Each partition's ownership, from `assigned` to `revoked`/`lost` (to: undefined while held). */
  held: { partition: number; from: number; to: number | undefined; lost?: boolean }[];
  stuck: { partition: number; offset: number; at: number }[];
  failedCommits: Set<number>;
  /** Final commits reported `failed` / `lost` (`F` lines). */
  finalCommitsFailed: number;
  finalCommitsLost: number;
  /** Partitions this worker lost (taken away without a chance to commit, or a final commit refused for ownership). */
  lostPartitions: Set<number>;
  lostSeen: boolean;
  revoked: number;
  lost: number;
  /** `E stopping` lines: when the stop began, how, why, and what was going on. */
  stops: {
    at: number;
    mode: string;
    cause: string;
    draining: number;
    inFlight: number;
    assignWaiting: number;
  }[];
  /** Revokes as [revoking at, revoked/lost at (undefined: never ended)]. */
  revokes: [number, number | undefined][];
  /** Handlers in flight on the revoked partitions at each `revoking` (of partitions it held). */
  revokingBusy: number[];
  /** Self-stops armed (`E selfstop`), and those whose moment passed first (`E selfstop-missed`). */
  selfStopArms: number;
  selfStopMisses: number;
  /** Injected handler failures (`X` lines). */
  injected: { partition: number; offset: number; attempt: number }[];
  /** The worker's final metrics snapshot (written after a clean close). */
  metrics?: {
    processed: number;
    failed: number;
    revokes: number;
    losses: number;
    stalls: number;
    commitsOk: number;
  };
}

function parse(run: WorkerRun): Parsed {
  const p: Parsed = {
    records: [],
    commits: [],
    revokeMs: [],
    rebalances: 0,
    assignedAt: [],
    held: [],
    stuck: [],
    failedCommits: new Set(),
    finalCommitsFailed: 0,
    finalCommitsLost: 0,
    lostPartitions: new Set(),
    lostSeen: false,
    revoked: 0,
    lost: 0,
    stops: [],
    revokes: [],
    revokingBusy: [],
    selfStopArms: 0,
    selfStopMisses: 0,
    injected: [],
  };
  if (!existsSync(run.out)) return p;
  let openRevoke: [number, number | undefined] | undefined;
  for (const line of readFileSync(run.out, 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f[0] === 'R' && f.length >= 6) {
      p.records.push({ partition: +f[1]!, offset: +f[2]!, key: f[3]!, pid: +f[4]!, at: +f[5]! });
    } else if (f[0] === 'C') p.commits.push({ partition: +f[1]!, offset: +f[2]!, pid: +f[3]! });
    else if (f[0] === 'S') p.stuck.push({ partition: +f[1]!, offset: +f[2]!, at: +f[3]! });
    else if (f[0] === 'F') {
      p.failedCommits.add(+f[1]!);
      // Refused for ownership: the member had lost the partition (fenced, or dropped).
      if (f[2] === 'lost') {
        p.lostPartitions.add(+f[1]!);
        p.finalCommitsLost += 1;
      } else p.finalCommitsFailed += 1;
    } else if (f[0] === 'M') p.metrics = JSON.parse(line.slice(2)) as Parsed['metrics'];
    else if (f[0] === 'X') p.injected.push({ partition: +f[1]!, offset: +f[2]!, attempt: +f[3]! });
    else if (f[0] === 'E' && f[1] === 'stopping') {
      p.stops.push({
        at: +f[2]!,
        mode: f[3]!,
        cause: f[4]!,
        draining: +f[5]!,
        inFlight: +f[6]!,
        assignWaiting: +f[7]!,
      });
    } else if (f[0] === 'E') {
      if (f[1] === 'revoking' && f[3]) {
        openRevoke = [+f[2]!, undefined];
        p.revokes.push(openRevoke);
        p.revokingBusy.push(+(f[4] ?? 0));
      }
      if (f[1] === 'selfstop') p.selfStopArms += 1;
      if (f[1] === 'selfstop-missed') p.selfStopMisses += 1;
      if ((f[1] === 'revoked' || f[1] === 'lost') && openRevoke) {
        openRevoke[1] = +f[2]!;
        openRevoke = undefined;
      }
      if (f[1] === 'revoked' || f[1] === 'lost') p.rebalances += 1;
      if (f[1] === 'revoked' && f[4]) p.revokeMs.push(+f[4]);
      if (f[1] === 'assigned' && f[3]) {
        p.assignedAt.push(+f[2]!);
        for (const x of f[3].split(','))
          p.held.push({ partition: +x, from: +f[2]!, to: undefined });
      }
      if ((f[1] === 'revoked' || f[1] === 'lost') && f[3]) {
        for (const x of f[3].split(',')) {
          const open = p.held.find((h) => h.partition === +x && h.to === undefined);
          if (open) {
            open.to = +f[2]!;
            if (f[1] === 'lost') open.lost = true;
          }
        }
      }
      if (f[1] === 'lost') p.lostSeen = true;
      if (f[1] === 'lost' && f[3]) for (const x of f[3].split(',')) p.lostPartitions.add(+x);
      if (f[1] === 'revoked') p.revoked += 1;
      if (f[1] === 'lost') p.lost += 1;
    }
  }
  return p;
}

/** Stopped on purpose and allowed to finish: SIGTERM, or a stop of its own. */
function graceful(run: WorkerRun): boolean {
  return run.signal === 'SIGTERM' || run.signal === 'self';
}

function processedSet(runs: WorkerRun[]): Set<string> {
  const set = new Set<string>();
  for (const r of runs)
    for (const rec of parse(r).records) set.add(`${rec.partition}@${rec.offset}`);
  return set;
}

/** One record processed twice without a crash, a failed commit or a loss to explain it. */
type UnexplainedDuplicate = DuplicateVerdict<WorkerRun>['unexplained'][number];

/**
 * Unexplained duplicates as a few lines a CI excerpt (the output's tail) can carry: contiguous
 * offsets of one partition processed by the same workers as one range, then, for each worker that
 * processed one, what it recorded about that partition (its final commits, refusals,
 * losses, revokes, its stop) and the warnings its log holds, in ms since the run began (the kill
 * and the coordinator's move too, in the broker-failure variant).
 */
function describeUnexplained(
  dups: UnexplainedDuplicate[],
  parsed: Map<WorkerRun, Parsed>,
  stopKind: (run: WorkerRun) => string,
  started: number,
  broker: BrokerFailureReport | undefined,
): string[] {
  if (dups.length === 0) return [];
  const t = (at: number | undefined): string => (at === undefined ? '?' : `+${at - started}`);
  const byChain = new Map<string, UnexplainedDuplicate[]>();
  for (const d of dups) {
    const key = `${d.partition} ${d.list.map((x) => x.worker.pid).join(',')}`;
    byChain.set(key, [...(byChain.get(key) ?? []), d]);
  }
  const lines: string[] = [];
  const first = new Map<WorkerRun, Set<number>>();
  for (const group of byChain.values()) {
    const sorted = group.map((d) => d.offset).sort((a, b) => a - b);
    const ranges: string[] = [];
    let from = sorted[0]!;
    let to = from;
    for (const o of sorted.slice(1)) {
      if (o === to + 1) to = o;
      else {
        ranges.push(from === to ? `${from}` : `${from}-${to}`);
        from = to = o;
      }
    }
    ranges.push(from === to ? `${from}` : `${from}-${to}`);
    const d = group[0]!;
    lines.push(
      `duplicate ${d.partition}@${ranges.join(',')} (${group.length}) by ${d.list.map((x) => `${x.worker.pid}(${stopKind(x.worker)}) at ${t(x.at)}`).join(', ')}: not explained by a crash, a failed commit or a lost partition after the last confirmed commit`,
    );
    for (const { worker } of d.list)
      first.set(worker, (first.get(worker) ?? new Set()).add(d.partition));
  }
  if (broker)
    lines.push(
      broker.target === 'coordinator'
        ? `node ${broker.killedNode} killed at ${t(broker.killAt)}, coordinator ${broker.movedTo} after ${broker.movedAfterMs} ms, node back after ${broker.downMs} ms`
        : `node ${broker.killedNode} (a follower of __consumer_offsets[${broker.lookup.partition}], leader ${broker.lookup.leader}) killed at ${t(broker.killAt)}, out of the ISR after ${String(broker.isrShrunkAfterMs)} ms, node back after ${broker.downMs} ms`,
    );
  for (const [run, partitions] of first) {
    const p = parsed.get(run)!;
    const own = [...partitions].sort((a, b) => a - b);
    const records = p.records.filter((r) => partitions.has(r.partition));
    const lastAt = Math.max(...records.map((r) => r.at));
    const finals = own.map((x) => {
      const c = p.commits.filter((c) => c.partition === x).map((c) => c.offset);
      return `${x}: C ${c.length > 0 ? c.join('/') : '-'}${p.failedCommits.has(x) ? ' F' : ''}${p.lostPartitions.has(x) ? ' lost' : ''}`;
    });
    const stop = p.stops[0];
    const revokes = p.revokes.map(([a, b]) => `${t(a)}..${t(b)}`).join(' ');
    lines.push(
      `worker ${run.pid}: started ${t(run.startedAt)}, last record of these partitions ${t(lastAt)}, stop ${stop ? `${t(stop.at)} ${stop.mode}/${stop.cause}` : 'none'}, exit ${String(run.exitCode)}; revokes ${revokes || 'none'}; final commits ${finals.join('; ')}`,
    );
    const warnings = new Map<string, number>();
    if (existsSync(run.log)) {
      for (const line of readFileSync(run.log, 'utf8').split('\n')) {
        try {
          const e = JSON.parse(line) as { level?: number; msg?: string; time?: number };
          if ((e.level ?? 0) >= 40 && e.msg)
            warnings.set(e.msg.slice(0, 120), e.time ?? warnings.get(e.msg.slice(0, 120)) ?? 0);
        } catch {
          // not JSON
        }
      }
    }
    for (const [msg, at] of [...warnings].slice(0, 8))
      lines.push(`  worker ${run.pid} warned (last ${t(at)}): ${msg}`);
  }
  return lines;
}

async function verify(
  o: ChaosOptions,
  topic: string,
  group: string,
  runs: WorkerRun[],
  started: number,
  broker: BrokerFailureReport | undefined,
): Promise<ChaosSummary> {
  const problems: string[] = [];
  const parsed = new Map(runs.map((r) => [r, parse(r)]));
  const stopKind = (run: WorkerRun): string => {
    const s = parsed.get(run)!.stops[0];
    // The worker's own record wins: a self-stop that a late SIGTERM found under way is a self-stop.
    const self =
      run.signal === 'self' ||
      (s !== undefined && s.cause !== 'SIGTERM' && run.signal !== 'SIGKILL');
    const how = self ? `self:${s?.cause ?? '?'}` : (run.signal ?? 'running');
    const lost = parsed.get(run)!.lost > 0 ? ',lost' : '';
    return `${how}${run.frozen ? ',frozen' : ''}${lost}/${s?.mode ?? run.plan.stopMode}`;
  };
  // Each record's processings in the order they happened (not the order the workers started: a
  // worker started later may process a record first, and the earlier one redo it).
  const byOffset = new Map<string, Processing<WorkerRun>[]>();
  for (const [run, p] of parsed) {
    for (const rec of p.records) {
      const k = `${rec.partition}@${rec.offset}`;
      byOffset.set(k, [...(byOffset.get(k) ?? []), { worker: run, at: rec.at }]);
    }
  }
  for (const list of byOffset.values()) if (list.length > 1) list.sort((a, b) => a.at - b.at);

  // Zero lost, from each partition's first offset on: compare with what Kafka holds.
  const inKafka = await readAll(topic, o.partitions);
  if (inKafka.length !== o.messages)
    problems.push(`Kafka holds ${inKafka.length} records, expected ${o.messages}`);
  const keys = new Map<string, string>();
  for (const m of inKafka) keys.set(`${m.partition}@${m.offset}`, m.key!.toString());
  const lost = [...keys.keys()].filter((k) => !byOffset.has(k));
  if (lost.length > 0) problems.push(`${lost.length} lost, e.g. ${lost.slice(0, 10).join(' ')}`);
  for (const [run, p] of parsed) {
    for (const rec of p.records) {
      const expected = keys.get(`${rec.partition}@${rec.offset}`);
      if (expected !== rec.key) {
        problems.push(
          `worker ${run.pid} recorded ${rec.partition}@${rec.offset} with key ${rec.key}, Kafka has ${String(expected)}`,
        );
        break;
      }
    }
  }

  // Duplicates: none for graceful stops; otherwise each must be explained.
  const lastCommit = (run: WorkerRun, partition: number): number =>
    parsed
      .get(run)!
      .commits.filter((c) => c.partition === partition)
      .reduce((m, c) => Math.max(m, c.offset), -1);
  const stuckSet = new Set(
    [...parsed.values()].flatMap((p) => p.stuck.map((s) => `${s.partition}@${s.offset}`)),
  );
  // A refused final commit or a lost partition excuses a duplicate only where the variant makes
  // the world misbehave (a dead broker, a frozen or killed member); on a healthy broker with
  // graceful stops it is the defect itself.
  const worldMisbehaves =
    o.brokerFailure !== undefined || o.freeze !== undefined || o.killEvery !== undefined;
  // A follower of the offsets partition killed: the coordinator stays and the library verifies
  // its commits of unknown outcome, so a final commit reported failed excuses nothing; only a
  // member demonstrably fenced or dropped (it lost the partition) does, reported in the figures.
  const { duplicates, explained, explainedBy, unexplained } = judgeDuplicates(
    byOffset,
    (run) => ({
      abrupt: run.signal === 'SIGKILL' || run.frozen === true,
      failedCommits: parsed.get(run)!.failedCommits,
      lostPartitions: parsed.get(run)!.lostPartitions,
      lastCommit: (partition) => lastCommit(run, partition),
      lostDuring: (partition, at) =>
        parsed
          .get(run)!
          .held.some(
            (h) => h.partition === partition && h.lost === true && h.from <= at && at <= h.to!,
          ),
    }),
    stuckSet,
    worldMisbehaves,
    { failedCommitsExcuse: o.brokerFailure?.target !== 'follower' },
  );
  const duplicatesByStop: Record<string, number> = {};
  for (const list of byOffset.values()) {
    for (const { worker } of list.slice(0, -1))
      duplicatesByStop[stopKind(worker)] = (duplicatesByStop[stopKind(worker)] ?? 0) + 1;
  }

  if (o.freeze) {
    // The frozen worker must have seen its partitions as lost when it woke up.
    const frozen = [...parsed].find(([run]) => run.frozen);
    if (!frozen) problems.push('no worker was frozen: the variant proved nothing');
    else if (frozen[0].frozeOwning !== true)
      problems.push(
        `the frozen worker ${frozen[0].pid} owned no partition when it was frozen: the variant proved nothing`,
      );
    else {
      // It must notice it was dropped from the group: a `lost` event, a refused commit, or the
      // library's membership-lost warning (librdkafka's session timeout).
      const log = existsSync(frozen[0].log) ? readFileSync(frozen[0].log, 'utf8') : '';
      const noticed =
        frozen[1].lostSeen ||
        frozen[1].failedCommits.size > 0 ||
        log.includes('group membership lost');
      if (!noticed)
        problems.push(`the frozen worker ${frozen[0].pid} never noticed it left the group`);
    }
  }

  const stuck = o.stuck;
  if (stuck) {
    // The hang happened; its partition was released within the deadline; the worker went on.
    const stuckRun = [...parsed].find(([, p]) => p.stuck.length > 0);
    if (!stuckRun) problems.push('the stuck handler never ran: the variant proved nothing');
    else {
      const [run, p] = stuckRun;
      const s = p.stuck[0]!;
      const slowest = Math.max(0, ...p.revokeMs);
      if (slowest > stuck.drainTimeoutMs + 3000) {
        problems.push(
          `the stuck worker's revoke took ${slowest} ms, past the ${stuck.drainTimeoutMs} ms deadline`,
        );
      }
      const later = p.records.filter(
        (r) => r.at > s.at + stuck.drainTimeoutMs && r.partition !== s.partition,
      );
      if (
        later.length === 0 &&
        (run.stoppedAt ?? Date.now()) - s.at > stuck.drainTimeoutMs + 5000
      ) {
        problems.push(`the stuck worker ${run.pid} processed nothing else after the hang`);
      }
      const redone = (byOffset.get(`${s.partition}@${s.offset}`) ?? []).length;
      if (redone < 1) problems.push('the hung message was never processed');
    }
  }

  // What the group committed equals the end offsets.
  const ends = await highWatermarks(topic, o.partitions);
  const committed = await committedOffsets(group, topic, o.partitions);
  if (JSON.stringify(committed) !== JSON.stringify(ends))
    problems.push(`committed ${JSON.stringify(committed)} != end offsets ${JSON.stringify(ends)}`);

  // Exit codes and error-level log lines of every gracefully stopped worker.
  for (const run of runs) {
    if (graceful(run) && run.exitCode !== 0)
      problems.push(
        `worker ${run.pid} (${stopKind(run)}) exited ${String(run.exitCode)}/${String(run.exitSignal)} after a graceful stop`,
      );
    if (run.signal === undefined)
      problems.push(
        `worker ${run.pid} exited ${String(run.exitCode)}/${String(run.exitSignal)} without being stopped`,
      );
    if (!existsSync(run.log)) continue;
    for (const line of readFileSync(run.log, 'utf8').split('\n')) {
      if (!line) continue;
      try {
        const entry = JSON.parse(line) as { level?: number; msg?: string };
        if ((entry.level ?? 0) >= 50) {
          problems.push(`worker ${run.pid} logged at error level: ${line.slice(0, 300)}`);
          break;
        }
      } catch {
        // not JSON (stack trace fragments are caught by the exit code check)
      }
    }
  }

  // The library's metrics agree with what the handlers and rebalance events recorded.
  for (const [run, p] of parsed) {
    if (!graceful(run) || run.exitCode !== 0) continue;
    const m = p.metrics;
    if (!m) {
      problems.push(`worker ${run.pid} closed cleanly without writing its metrics`);
      continue;
    }
    if (m.processed !== p.records.length)
      problems.push(
        `worker ${run.pid}: metrics say ${m.processed} processed, its handlers recorded ${p.records.length}`,
      );
    if (m.failed !== p.injected.length)
      problems.push(
        `worker ${run.pid}: metrics report ${m.failed} failed handler calls, ${p.injected.length} were injected`,
      );
    if (m.revokes !== p.revoked || m.losses !== p.lost)
      problems.push(
        `worker ${run.pid}: metrics say ${m.revokes} revokes/${m.losses} losses, events ${p.revoked}/${p.lost}`,
      );
    if (p.records.length > 0 && m.commitsOk === 0 && p.lost === 0)
      problems.push(`worker ${run.pid} processed messages but counted no confirmed commit`);
  }
  if (stuck) {
    // The hung handler outlived the stall threshold (default: the drain deadline): reported.
    const stuckRun = [...parsed].find(([, p]) => p.stuck.length > 0);
    if (stuckRun) {
      const [run, p] = stuckRun;
      const s = p.stuck[0]!;
      const log = existsSync(run.log) ? readFileSync(run.log, 'utf8') : '';
      if (
        (run.stoppedAt ?? Date.now()) - s.at > stuck.drainTimeoutMs + 5000 &&
        !log.includes('"handler stalled')
      )
        problems.push(`the stuck worker ${run.pid} never reported its stalled handler`);
    }
  }

  // Progress: a worker that held a partition for more than 10 s while records of it waited (the
  // backlog is produced before the workers start; a record first processed after the worker let
  // the partition go waited through its whole ownership) processed some.
  const lastRecordAt = Math.max(...runs.map((r) => r.stoppedAt ?? Date.now()));
  const firstProcessedAt = new Map<number, number[]>();
  for (const [k, l] of byOffset) {
    const partition = Number(k.split('@')[0]);
    firstProcessedAt.set(partition, [...(firstProcessedAt.get(partition) ?? []), l[0]!.at]);
  }
  // A broker failure may leave a partition without a leader for a while.
  const starvedAfterMs = 10_000 + (o.brokerFailure?.downMs ?? 0);
  for (const [run, p] of parsed) {
    if (p.records.length > 0 || run.frozen) continue;
    const end = run.stoppedAt ?? lastRecordAt;
    const starved = p.held.find((h) => {
      const to = h.to ?? end;
      return (
        to - h.from > starvedAfterMs &&
        (firstProcessedAt.get(h.partition) ?? []).some((at) => at > to)
      );
    });
    if (starved)
      problems.push(
        `worker ${run.pid} held partition ${starved.partition} for ${(starved.to ?? end) - starved.from} ms while records of it waited, and processed nothing`,
      );
  }

  // The overlaps the variant is about must have happened, or it proved nothing.
  const allStops = [...parsed.values()].flatMap((p) => p.stops);
  const stopsWhileDraining = allStops.filter((s) => s.draining > 0).length;
  const stopsWhileAssigning = allStops.filter((s) => s.assignWaiting > 0).length;
  // What proves the overlap is a stop landing in the window, whoever sent it: a self-stop armed
  // for the window can be overtaken by the driver's own SIGTERM landing in it first.
  if ((o.selfStop?.onRevoking ?? 0) > 0 && stopsWhileDraining === 0) {
    // Say why, so that a CI log's tail explains it: per life armed for it, the revokes it saw
    // (handlers in flight at each), the self-stops it armed and missed, and how it ended.
    const armed = [...parsed]
      .filter(([run]) => run.plan.selfStop === 'revoking')
      .map(
        ([run, p]) =>
          `w${run.slot}/${run.life}${run.plan.duty ? ' (duty)' : ''}: lived ${((run.stoppedAt ?? lastRecordAt) - run.startedAt) | 0} ms, revokes [busy ${p.revokingBusy.join(',')}], armed ${p.selfStopArms}, missed ${p.selfStopMisses}, stopped by ${run.signal ?? '?'}`,
      );
    problems.push(
      `no worker stopped while a revoke drained: the variant proved nothing; lives armed for it: ${armed.join('; ') || 'none'}`,
    );
  }
  if ((o.selfStop?.inAssign ?? 0) > 0 && stopsWhileAssigning === 0)
    problems.push('no worker stopped while its onAssign hook waited: the variant proved nothing');
  for (const mode of o.stopModes ?? []) {
    if (!allStops.some((s) => s.mode === mode))
      problems.push(`no life stopped by ${mode}: the variant proved nothing`);
  }
  const injectedFailures = [...parsed.values()].reduce((n, p) => n + p.injected.length, 0);
  if (o.failures) {
    const retriedToSuccess = [...parsed.values()].some((p) => {
      const done = new Set(p.records.map((r) => `${r.partition}@${r.offset}`));
      return p.injected.some((x) => done.has(`${x.partition}@${x.offset}`));
    });
    if (!retriedToSuccess)
      problems.push('no injected failure was retried to success: the variant proved nothing');
  }

  if (broker) {
    // The kill hit the coordinator (or a follower of its offsets partition), while a revoke was in flight.
    if (broker.coordinatorBefore !== broker.lookup.leader)
      problems.push(
        `the cluster named node ${broker.coordinatorBefore} as the coordinator, the metadata lookup (__consumer_offsets[${broker.lookup.partition}]) node ${broker.lookup.leader}`,
      );
    if (broker.target === 'coordinator' && broker.movedTo < 0)
      problems.push(
        `the coordinator did not move away from the killed node ${broker.killedNode} within 60 s`,
      );
    if (broker.target === 'follower') {
      const partitionBefore = Number(/partition=(\d+)/.exec(broker.offsetsBefore)?.[1] ?? -1);
      if (partitionBefore !== broker.lookup.partition)
        problems.push(
          `the cluster placed the group on __consumer_offsets[${partitionBefore}], the metadata lookup on [${broker.lookup.partition}]`,
        );
      if (
        broker.killedNode === broker.lookup.leader ||
        !broker.lookup.replicas.includes(broker.killedNode)
      )
        problems.push(
          `the killed node ${broker.killedNode} was not a follower of __consumer_offsets[${broker.lookup.partition}] (leader ${broker.lookup.leader}, replicas ${broker.lookup.replicas.join(',')})`,
        );
      if ((broker.isrShrunkAfterMs ?? -1) < 0)
        problems.push(
          `the killed follower ${broker.killedNode} never left the ISR of __consumer_offsets[${broker.lookup.partition}] within 60 s: the variant proved nothing`,
        );
      else if (broker.movedTo !== broker.lookup.leader)
        problems.push(
          `the coordinator moved from ${broker.lookup.leader} to ${broker.movedTo} although only a follower died: the variant tested a coordinator move`,
        );
      if ((broker.isrRejoinedAfterRestartMs ?? -1) < 0)
        problems.push(
          `the restarted follower ${broker.killedNode} was not back in the ISR within 60 s (the next variant would start on a degraded cluster)`,
        );
      // Commits that met the stall: their warnings from the kill until the ISR shrank, + 10 s.
      const stallEnd = broker.killAt + Math.max(0, broker.isrShrunkAfterMs ?? 0) + 10_000;
      broker.commitWarningsInStall = runs.reduce((n, run) => {
        if (!existsSync(run.log)) return n;
        return (
          n +
          readFileSync(run.log, 'utf8')
            .split('\n')
            .filter((line) => {
              try {
                const e = JSON.parse(line) as { level?: number; msg?: string; time?: number };
                return (
                  (e.level ?? 0) >= 40 &&
                  /commit/.test(e.msg ?? '') &&
                  (e.time ?? 0) >= broker.killSentAt &&
                  (e.time ?? 0) <= stallEnd
                );
              } catch {
                return false;
              }
            }).length
        );
      }, 0);
    }
    const openAcross = ([from, to]: [number, number | undefined]): boolean =>
      from <= broker.killSentAt && (to === undefined || to > broker.killAt);
    broker.membersMidRevoke = [...parsed]
      .filter(([, p]) => p.revokes.some(openAcross))
      .map(([run]) => run.pid);
    // How long those revokes took (their final commits met the failure).
    broker.midRevokeMs = [...parsed.values()].flatMap((p) =>
      p.revokes.filter(openAcross).map(([from, to]) => (to ?? Date.now()) - from),
    );
    if (broker.membersMidRevoke.length === 0)
      problems.push(
        `no member's revoke stayed open from the kill of node ${broker.killedNode} (sent ${broker.killSentAt - broker.trigger.revokingAt} ms after the revoke began) until it was dead (${broker.reactionMs} ms): the variant proved nothing`,
      );
  }

  const stops: Record<string, number> = {};
  for (const run of runs) if (run.signal) stops[stopKind(run)] = (stops[stopKind(run)] ?? 0) + 1;
  const revokeMs = [...parsed.values()].flatMap((p) => p.revokeMs).sort((a, b) => a - b);
  const summary: ChaosSummary = {
    variant: o.name,
    seed: o.seed,
    messages: o.messages,
    processedRecords: [...parsed.values()].reduce((n, p) => n + p.records.length, 0),
    restarts: runs.filter((r) => r.life > 0).length,
    kills: runs.filter((r) => r.signal === 'SIGKILL').length,
    freezes: runs.filter((r) => r.frozen).length,
    rebalancesSeen: [...parsed.values()].reduce((n, p) => n + p.rebalances, 0),
    revokeMs: {
      max: revokeMs[revokeMs.length - 1] ?? 0,
      median: revokeMs[Math.floor(revokeMs.length / 2)] ?? 0,
      count: revokeMs.length,
    },
    stops,
    stopsWhileDraining,
    stopsWhileAssigning,
    injectedFailures,
    duplicates,
    explainedDuplicates: explained,
    explainedBy,
    lostEvents: [...parsed.values()].reduce((n, p) => n + p.lost, 0),
    lostEvidence: [...parsed]
      .filter(([, p]) => p.lostPartitions.size > 0)
      .map(([run, p]) => {
        const lostAt = readFileSync(run.out, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('E lost '))
          .map((l) => Number(l.split(' ')[2]));
        // A final commit refused for ownership (no `lost` event): the whole life's warnings.
        const from = lostAt.length > 0 ? Math.min(...lostAt) - 15_000 : 0;
        const to = lostAt.length > 0 ? Math.max(...lostAt) + 2000 : Infinity;
        const warnings = new Set<string>();
        if (existsSync(run.log)) {
          for (const line of readFileSync(run.log, 'utf8').split('\n')) {
            try {
              const e = JSON.parse(line) as { level?: number; msg?: string; time?: number };
              const t = e.time ?? 0;
              if ((e.level ?? 0) >= 40 && t >= from && t <= to)
                warnings.add(`+${t - started} ${(e.msg ?? '').slice(0, 160)}`);
            } catch {
              // not JSON
            }
          }
        }
        return {
          pid: run.pid,
          at: lostAt.map((x) => x - started),
          partitions: [...p.lostPartitions].sort((a, b) => a - b),
          warnings: [...warnings].slice(0, 12),
        };
      }),
    finalCommits: {
      failed: [...parsed.values()].reduce((n, p) => n + p.finalCommitsFailed, 0),
      lost: [...parsed.values()].reduce((n, p) => n + p.finalCommitsLost, 0),
    },
    duplicatesByStop,
    lost: lost.length,
    ...(broker ? { broker } : {}),
    durationMs: Date.now() - started,
  };
  // Last, so that an excerpt of the output's tail carries it.
  // Written last: an excerpt of the output's tail then carries it.
  const diagnosis = describeUnexplained(unexplained, parsed, stopKind, started, broker);
  writeFileSync(
    join(o.outDir, 'summary.json'),
    JSON.stringify({ ...summary, problems: [...problems, ...diagnosis] }, null, 2),
  );
  console.log(`      ${JSON.stringify(summary)}`);
  if (problems.length + diagnosis.length > 0)
    throw new Error(
      `${o.name}: ${problems.length + unexplained.length} problem(s):\n  ${[...problems.slice(0, 20), ...diagnosis.slice(0, 30)].join('\n  ')}`,
    );
  return summary;
}
