/**
 * The chaos driver: creates a topic, fills it, runs N worker processes that are stopped and
 * restarted at seeded random lifetimes (SIGTERM, or SIGKILL / SIGSTOP in the crash and frozen
 * variants), lets the last set finish the backlog, and verifies the outcome against what Kafka
 * holds. Modelled on Sentry taskbroker's rebalance test, with the checks it lacks.
 */
import { execSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
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
  /** Kill one broker of a three-node cluster mid-run and bring it back. */
  brokerFailure?: { node: number; afterMs: number; downMs: number };
  replicationFactor?: number;
  topicConfig?: Record<string, string>;
  /** Deadline for the whole backlog to be processed once the restarts are over. */
  finishTimeoutMs?: number;
}

interface WorkerRun {
  slot: number;
  life: number;
  pid: number;
  startedAt: number;
  stoppedAt?: number;
  signal?: 'SIGTERM' | 'SIGKILL';
  frozen?: boolean;
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
  duplicates: number;
  explainedDuplicates: number;
  lost: number;
  durationMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
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

export async function runChaos(o: ChaosOptions): Promise<ChaosSummary> {
  const started = Date.now();
  const random = seededRandom(o.seed);
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
  const runs: WorkerRun[] = [];
  let killCounter = 0;

  const start = (slot: number, life: number): WorkerRun => {
    const out = join(o.outDir, `worker-${slot}-${life}.out`);
    const log = join(o.outDir, `worker-${slot}-${life}.log`);
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
      env: {
        ...process.env,
        CHAOS_BROKERS: BROKERS,
        CHAOS_TOPIC: topic,
        CHAOS_GROUP: group,
        CHAOS_CONFIG: JSON.stringify(o.protocolConfig),
        CHAOS_OUT: out,
        CHAOS_LOG: log,
        CHAOS_SEED: String(o.seed * 1000 + slot * 100 + life),
        CHAOS_PARTITION_CONCURRENCY: String(o.partitionConcurrency ?? 2),
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
    run.signal = signal;
    run.stoppedAt = Date.now();
    run.child.kill(signal);
    const exited = await Promise.race([
      run.exited.then(() => true),
      sleep(60_000).then(() => false),
    ]);
    if (!exited) {
      run.child.kill('SIGKILL');
      await run.exited;
      throw new Error(
        `worker ${run.slot}/${run.life} (pid ${run.pid}) did not exit within 60 s of ${signal}`,
      );
    }
  };

  const brokerEvents: Promise<void>[] = [];
  if (o.brokerFailure) {
    const bf = o.brokerFailure;
    brokerEvents.push(
      (async () => {
        await sleep(bf.afterMs);
        shell(`bash ${KAFKA_SH} stop-node ${bf.node}`, o.outDir);
        await sleep(bf.downMs);
        shell(`bash ${KAFKA_SH} start-node ${bf.node}`, o.outDir);
      })(),
    );
  }

  // Each slot restarts its worker at seeded random lifetimes, then keeps a final one running.
  const finals: WorkerRun[] = [];
  await Promise.all(
    Array.from({ length: o.workers }, async (_, slot) => {
      for (let life = 0; life < o.restartsPerWorker; life++) {
        const run = start(slot, life);
        const lifetime = o.minLifeMs + random() * (o.maxLifeMs - o.minLifeMs);
        // The first life: the backlog is certainly not consumed yet, so the frozen worker owns
        // partitions with work in flight (later, a fast group may have finished it all).
        if (o.freeze && slot === 0 && life === 0) {
          await sleep(o.freeze.afterMs);
          // Freeze it while it owns partitions, or the variant proves little.
          const ownsBy = Date.now() + 20_000;
          while (!ownsPartitions(run) && Date.now() < ownsBy) await sleep(100);
          run.child.kill('SIGSTOP');
          run.frozen = true;
          await sleep(o.freeze.forMs);
          run.child.kill('SIGCONT');
          await sleep(Math.max(0, lifetime - o.freeze.afterMs));
        } else {
          await sleep(lifetime);
        }
        killCounter += 1;
        const kill = o.killEvery !== undefined && killCounter % o.killEvery === 0;
        await stop(run, kill ? 'SIGKILL' : 'SIGTERM');
        await sleep(random() * 1000);
      }
      finals.push(start(slot, o.restartsPerWorker));
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
  await Promise.all(finals.map((r) => stop(r, 'SIGTERM')));

  return verify(o, topic, group, runs, started);
}

function ownsPartitions(run: WorkerRun): boolean {
  if (!existsSync(run.out)) return false;
  const owned = new Set<string>();
  for (const line of readFileSync(run.out, 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f[0] !== 'E' || !f[3]) continue;
    for (const p of f[3].split(',')) {
      if (f[1] === 'assigned') owned.add(p);
      else owned.delete(p);
    }
  }
  return owned.size > 0;
}

function isReady(run: WorkerRun): boolean {
  return existsSync(run.out) && readFileSync(run.out, 'utf8').includes('E ready ');
}

function shell(command: string, outDir: string): void {
  // kafka.sh treats KAFKA_BROKERS as an external cluster it must not touch.
  const env = { ...process.env };
  delete env.KAFKA_BROKERS;
  const output = execSync(command, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env });
  writeFileSync(
    join(outDir, 'broker-events.log'),
    `${new Date().toISOString()} ${command}\n${output}\n`,
    { flag: 'a' },
  );
}

interface Parsed {
  records: { partition: number; offset: number; key: string; pid: number; at: number }[];
  commits: { partition: number; offset: number; pid: number }[];
  revokeMs: number[];
  rebalances: number;
  assignedAt: number[];
  stuck: { partition: number; offset: number; at: number }[];
  failedCommits: Set<number>;
  lostSeen: boolean;
  revoked: number;
  lost: number;
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
    stuck: [],
    failedCommits: new Set(),
    lostSeen: false,
    revoked: 0,
    lost: 0,
  };
  if (!existsSync(run.out)) return p;
  for (const line of readFileSync(run.out, 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f[0] === 'R' && f.length >= 6) {
      p.records.push({ partition: +f[1]!, offset: +f[2]!, key: f[3]!, pid: +f[4]!, at: +f[5]! });
    } else if (f[0] === 'C') p.commits.push({ partition: +f[1]!, offset: +f[2]!, pid: +f[3]! });
    else if (f[0] === 'S') p.stuck.push({ partition: +f[1]!, offset: +f[2]!, at: +f[3]! });
    else if (f[0] === 'F') p.failedCommits.add(+f[1]!);
    else if (f[0] === 'M') p.metrics = JSON.parse(line.slice(2)) as Parsed['metrics'];
    else if (f[0] === 'E') {
      if (f[1] === 'revoked' || f[1] === 'lost') p.rebalances += 1;
      if (f[1] === 'revoked' && f[4]) p.revokeMs.push(+f[4]);
      if (f[1] === 'assigned' && f[3]) p.assignedAt.push(+f[2]!);
      if (f[1] === 'lost') p.lostSeen = true;
      if (f[1] === 'revoked') p.revoked += 1;
      if (f[1] === 'lost') p.lost += 1;
    }
  }
  return p;
}

function processedSet(runs: WorkerRun[]): Set<string> {
  const set = new Set<string>();
  for (const r of runs)
    for (const rec of parse(r).records) set.add(`${rec.partition}@${rec.offset}`);
  return set;
}

async function verify(
  o: ChaosOptions,
  topic: string,
  group: string,
  runs: WorkerRun[],
  started: number,
): Promise<ChaosSummary> {
  const problems: string[] = [];
  const parsed = new Map(runs.map((r) => [r, parse(r)]));
  const byOffset = new Map<string, { pid: number; run: WorkerRun }[]>();
  for (const [run, p] of parsed) {
    for (const rec of p.records) {
      const k = `${rec.partition}@${rec.offset}`;
      byOffset.set(k, [...(byOffset.get(k) ?? []), { pid: rec.pid, run }]);
    }
  }

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
  let duplicates = 0;
  let explained = 0;
  for (const [k, list] of byOffset) {
    if (list.length < 2) continue;
    duplicates += list.length - 1;
    const [partition, offset] = k.split('@').map(Number) as [number, number];
    const ok = list.every(({ run }, i) => {
      if (i === list.length - 1) return true; // the last processing is the one that counts
      if (stuckSet.has(k)) return true; // the hung handler's late completion
      // A crash, a freeze past the session timeout, or a final commit that demonstrably failed.
      const abrupt =
        run.signal === 'SIGKILL' ||
        run.frozen === true ||
        parsed.get(run)!.failedCommits.has(partition);
      return abrupt && offset >= lastCommit(run, partition);
    });
    if (ok) explained += list.length - 1;
    else
      problems.push(
        `duplicate ${k} by ${list.map((x) => `${x.pid}(${x.run.signal ?? 'final'}${x.run.frozen ? ',frozen' : ''})`).join(', ')} not explained by a crash after the last confirmed commit`,
      );
  }

  if (o.freeze) {
    // The frozen worker must have seen its partitions as lost when it woke up.
    const frozen = [...parsed].find(([run]) => run.frozen);
    if (!frozen) problems.push('no worker was frozen: the variant proved nothing');
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
    if (run.signal === 'SIGTERM' && run.exitCode !== 0)
      problems.push(
        `worker ${run.pid} exited ${String(run.exitCode)}/${String(run.exitSignal)} after SIGTERM`,
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
    if (run.signal !== 'SIGTERM' || run.exitCode !== 0) continue;
    const m = p.metrics;
    if (!m) {
      problems.push(`worker ${run.pid} closed cleanly without writing its metrics`);
      continue;
    }
    if (m.processed !== p.records.length)
      problems.push(
        `worker ${run.pid}: metrics say ${m.processed} processed, its handlers recorded ${p.records.length}`,
      );
    if (m.failed !== 0) problems.push(`worker ${run.pid}: metrics report ${m.failed} failures`);
    if (m.revokes !== p.revoked || m.losses !== p.lost)
      problems.push(
        `worker ${run.pid}: metrics say ${m.revokes} revokes/${m.losses} losses, events ${p.revoked}/${p.lost}`,
      );
    if (p.records.length > 0 && m.commitsOk === 0)
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
        (run.stoppedAt ?? Date.now()) - s.at > stuck.drainTimeoutMs + 2000 &&
        !log.includes('"handler stalled')
      )
        problems.push(`the stuck worker ${run.pid} never reported its stalled handler`);
    }
  }

  // Progress: a worker that owned partitions for a while before the backlog ran out processed some.
  const lastRecordAt = Math.max(...runs.map((r) => r.stoppedAt ?? Date.now()));
  for (const [run, p] of parsed) {
    const firstAssigned = p.assignedAt[0];
    const end = run.stoppedAt ?? lastRecordAt;
    if (
      firstAssigned !== undefined &&
      end - firstAssigned > 5000 &&
      p.records.length === 0 &&
      !run.frozen
    ) {
      const remaining = byOffset.size < o.messages;
      if (remaining)
        problems.push(
          `worker ${run.pid} owned partitions for ${end - firstAssigned} ms and processed nothing`,
        );
    }
  }

  const revokeMs = [...parsed.values()].flatMap((p) => p.revokeMs).sort((a, b) => a - b);
  const summary: ChaosSummary = {
    variant: o.name,
    seed: o.seed,
    messages: o.messages,
    processedRecords: [...parsed.values()].reduce((n, p) => n + p.records.length, 0),
    restarts: runs.length - o.workers,
    kills: runs.filter((r) => r.signal === 'SIGKILL').length,
    freezes: runs.filter((r) => r.frozen).length,
    rebalancesSeen: [...parsed.values()].reduce((n, p) => n + p.rebalances, 0),
    revokeMs: {
      max: revokeMs[revokeMs.length - 1] ?? 0,
      median: revokeMs[Math.floor(revokeMs.length / 2)] ?? 0,
      count: revokeMs.length,
    },
    duplicates,
    explainedDuplicates: explained,
    lost: lost.length,
    durationMs: Date.now() - started,
  };
  writeFileSync(join(o.outDir, 'summary.json'), JSON.stringify({ ...summary, problems }, null, 2));
  console.log(`      ${JSON.stringify(summary)}`);
  if (problems.length > 0)
    throw new Error(
      `${o.name}: ${problems.length} problem(s):\n  ${problems.slice(0, 20).join('\n  ')}`,
    );
  return summary;
}
