import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { committedOffsets, highWatermarks, waitFor } from '../helpers/kafka';
import { OUTPUT_ROOT } from '../helpers/output';
import { seededRandom } from '../helpers/random';
import {
  EOS_PROTOCOLS,
  feedInput,
  prepareEos,
  progressBeyond,
  startWorker,
  useEosWorkers,
  verdict,
} from '../eos/scenario';
import type { EosRun, EosTopics, EosWorker } from '../eos/scenario';
import { chaosSeeds } from './seeds';

/**
 * The transaction coordinator frozen (three-node cluster, `make test-rebalance-broker`): two
 * processTransactional() workers (commitTimeoutMs 3 s, transaction.timeout.ms 20 s) on a
 * 6-partition input that keeps growing (300 records a second) until a few seconds after the thaw,
 * 1–3 records per input to two outputs (RF 3, min ISR 2). While they commit,
 * the broker that coordinates one worker's `transactional.id` — as the cluster answers a
 * FindCoordinator of key type TRANSACTION (`kafka.sh txn-coordinator`) — is SIGSTOPped for longer
 * than two commit timeouts (seeded: 7–10 s, past the controller fencing it at 6 s), and during the
 * freeze the group rebalances (seeded: a third worker joins, or the other worker stops
 * gracefully). Then the node gets SIGCONT.
 *
 * Verdict, against what Kafka holds: a read_committed reader sees every input's records exactly
 * once; the group's committed offsets equal the input's end offsets; no worker stops unexpectedly
 * (the one allowed stop is the documented one: a commitTransaction still unresolved at the
 * transaction's deadline stops the consumer with a TransactionError, ERR_RKC_TRANSACTION; that
 * worker is then restarted under the same id, and the test says which happened); and every
 * `committed` rebalance event agrees with the broker: a partition reported `committed` (or
 * `unchanged`) at offset X is started at X by its next owner, and the last one reported is the
 * group's committed offset at the end.
 *
 * FREEZE_PROTOCOLS (comma-separated: eager, cooperative-sticky, kip848; default all three) picks
 * the protocols; TEST_SEEDS / TEST_SEED the seeds.
 */
const PARTITIONS = 6;
const OUT_PARTITIONS = 3;
/** Records in the input at the start, and appended a second until a few seconds after the thaw. */
const MESSAGES = 2000;
const FEED_PER_SECOND = 300;
const COMMIT_TIMEOUT_MS = 3000;
const TXN_TIMEOUT_MS = 20_000;
const KAFKA_SH = join(__dirname, '..', 'kafka', 'kafka.sh');
const execFileAsync = promisify(execFile);

const wanted = (process.env.FREEZE_PROTOCOLS ?? 'eager,cooperative-sticky,kip848').split(',');
const PROTOCOLS = EOS_PROTOCOLS.filter(([name]) => wanted.includes(name));

/** kafka.sh against the local cluster (it treats KAFKA_BROKERS as an external one). */
async function kafkaSh(args: string[], log: string): Promise<string> {
  const env = { ...process.env };
  delete env.KAFKA_BROKERS;
  const { stdout } = await execFileAsync('bash', [KAFKA_SH, ...args], { encoding: 'utf8', env });
  writeFileSync(log, `${new Date().toISOString()} kafka.sh ${args.join(' ')}\n${stdout}\n`, {
    flag: 'a',
  });
  return stdout;
}

const coordinatorIn = (answer: string): number => {
  const m = /coordinator=(-?\d+)/.exec(answer);
  if (m === null) throw new Error(`no coordinator in: ${answer}`);
  return Number(m[1]);
};

interface TraceLine {
  readonly pid: number;
  readonly at: number;
  readonly type: string;
  readonly partitions?: { topic: string; partition: number }[];
  readonly results?: { partition: number; status: string; offset?: number; reason?: string }[];
  readonly transaction?: { outcome: string; messages: number; records: number; reason?: string };
  readonly durationMs?: number;
  readonly partition?: number;
  readonly offset?: number;
  readonly code?: string;
  readonly name?: string;
  readonly message?: string;
  readonly transactionalId?: string;
  readonly committed?: number;
  readonly aborted?: number;
  readonly state?: string;
}

const readTrace = (file: string): TraceLine[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as TraceLine)
    : [];

/**
 * Every `committed` event's per-partition results against where the next owner started (`first`)
 * and against the group's committed offsets at the end: the disagreements, and the results that
 * were not `committed`/`unchanged` (with where the next owner started), for the report.
 */
function agreement(
  lines: readonly TraceLine[],
  endCommitted: readonly (number | undefined)[],
): { disagreements: string[]; notCommitted: string[]; checked: number } {
  const disagreements: string[] = [];
  const notCommitted: string[] = [];
  let checked = 0;
  for (let p = 0; p < endCommitted.length; p++) {
    type Entry =
      | {
          kind: 'result';
          at: number;
          pid: number;
          status: string;
          offset?: number;
          reason?: string;
        }
      | { kind: 'first'; at: number; pid: number; offset: number };
    const entries: Entry[] = [];
    for (const l of lines) {
      if (l.type === 'committed') {
        for (const r of l.results ?? []) {
          if (r.partition === p) {
            entries.push({
              kind: 'result',
              at: l.at,
              pid: l.pid,
              status: r.status,
              offset: r.offset,
              reason: r.reason,
            });
          }
        }
      } else if (l.type === 'first' && l.partition === p) {
        entries.push({ kind: 'first', at: l.at, pid: l.pid, offset: l.offset ?? -1 });
      }
    }
    entries.sort((x, y) => x.at - y.at || (x.kind === 'result' ? -1 : 1));
    let last: Extract<Entry, { kind: 'result' }> | undefined;
    for (const e of entries) {
      if (e.kind === 'result') {
        last = e;
        continue;
      }
      if (last !== undefined) {
        const sure =
          last.status === 'committed' || (last.status === 'unchanged' && last.offset !== undefined);
        if (sure) {
          checked += 1;
          if (last.offset !== e.offset) {
            disagreements.push(
              `[${p}] pid ${last.pid} reported ${last.status} at ${last.offset}, the next owner (pid ${e.pid}) started at ${e.offset}`,
            );
          }
        } else {
          notCommitted.push(
            `[${p}] pid ${last.pid} reported ${last.status}${last.offset === undefined ? '' : ` at ${last.offset}`} (${last.reason ?? ''}); the next owner started at ${e.offset}`,
          );
        }
      }
      last = undefined;
    }
    if (last !== undefined) {
      if (
        last.status === 'committed' ||
        (last.status === 'unchanged' && last.offset !== undefined)
      ) {
        checked += 1;
        if (last.offset !== endCommitted[p]) {
          disagreements.push(
            `[${p}] the last report (pid ${last.pid}) says ${last.status} at ${last.offset}, the group's committed offset is ${endCommitted[p]}`,
          );
        }
      } else {
        notCommitted.push(
          `[${p}] the last report (pid ${last.pid}) says ${last.status}: ${last.reason ?? ''}`,
        );
      }
    }
  }
  return { disagreements, notCommitted, checked };
}

describe('the transaction coordinator frozen (real three-node cluster)', function () {
  this.timeout(300_000);
  const workers = useEosWorkers();
  let frozen: { node: number; log: string } | undefined;
  afterEach(async () => {
    if (frozen !== undefined) await kafkaSh(['thaw-node', String(frozen.node)], frozen.log);
    frozen = undefined;
  });

  for (const [protocol, config] of PROTOCOLS) {
    for (const seed of chaosSeeds(1)) {
      it(`${protocol}: a member's transaction coordinator SIGSTOPped past two commit timeouts, a rebalance meanwhile: exactly once, offsets at the end, events agree with the broker (seed ${seed})`, async () => {
        console.log(`      seed=${seed}`);
        const random = seededRandom(seed);
        const freezeMs = 7000 + Math.floor(random() * 3000);
        const rebalance: 'join' | 'leave' = random() < 0.5 ? 'join' : 'leave';
        const pick = random();
        const dir = join(OUTPUT_ROOT, 'chaos', `txn-freeze-${protocol}-s${seed}`);
        rmSync(dir, { recursive: true, force: true });
        mkdirSync(dir, { recursive: true });
        const log = join(dir, 'broker-events.log');
        // Earlier node failures leave the leaders (so the coordinators) piled up on some nodes.
        await kafkaSh(['elect-leaders'], log);

        const { topics } = await prepareEos(
          `freeze-${protocol}`,
          PARTITIONS,
          OUT_PARTITIONS,
          MESSAGES,
        );
        const feed = await feedInput(topics.input, PARTITIONS, FEED_PER_SECOND);
        const traces: string[] = [];
        const running = new Map<string, EosWorker>();
        const start = (name: string): EosWorker => {
          const trace = join(dir, `trace-${name}-${traces.length}.jsonl`);
          traces.push(trace);
          const run: EosRun = { commitTimeoutMs: COMMIT_TIMEOUT_MS, drainTimeoutMs: 12_000, trace };
          const w = startWorker(
            topics as EosTopics,
            name,
            config as Record<string, unknown>,
            workers,
            { producerConfig: { 'transaction.timeout.ms': TXN_TIMEOUT_MS } },
            run,
          );
          running.set(name, w);
          return w;
        };
        const lines = (): TraceLine[] => traces.flatMap(readTrace);

        const a = start('a');
        const b = start('b');
        await Promise.all([a.assigned, b.assigned]);
        await progressBeyond(topics, PARTITIONS, MESSAGES * 0.1, 'first commits');

        const [groupAnswer, aAnswer, bAnswer] = await Promise.all([
          kafkaSh(['coordinator', topics.group], log),
          kafkaSh(['txn-coordinator', `${topics.group}-a`], log),
          kafkaSh(['txn-coordinator', `${topics.group}-b`], log),
        ]);
        const groupCoordinator = coordinatorIn(groupAnswer);
        const txnCoordinator = { a: coordinatorIn(aAnswer), b: coordinatorIn(bAnswer) };
        // The one frozen is a member's transaction coordinator; preferably not also the group's
        // (a frozen group coordinator is the broker-failure test's subject).
        const apart = (['a', 'b'] as const).filter((n) => txnCoordinator[n] !== groupCoordinator);
        const candidates = apart.length > 0 ? apart : (['a', 'b'] as const);
        const target = candidates[Math.floor(pick * candidates.length)]!;
        const other = target === 'a' ? 'b' : 'a';
        const node = txnCoordinator[target];
        console.log(
          `      group coordinator=${groupCoordinator}; transaction coordinators a=${txnCoordinator.a} (${aAnswer.trim().split(' ').slice(1).join(' ')}) b=${txnCoordinator.b}; freezing node ${node} (${target}'s) for ${freezeMs} ms${node === groupCoordinator ? ', also the group coordinator' : ''}; rebalance: ${rebalance === 'join' ? 'c joins' : `${other} leaves (SIGTERM)`}`,
        );

        await kafkaSh(['freeze-node', String(node)], log);
        frozen = { node, log };
        const frozenAt = Date.now();
        await new Promise((r) => setTimeout(r, 1000));
        let leaver: EosWorker | undefined;
        if (rebalance === 'join') start('c');
        else {
          leaver = running.get(other)!;
          running.delete(other);
          leaver.proc.kill('SIGTERM');
        }
        // Thaw once the freeze lasted its time and a rebalance began during it (a member emitted
        // `revoking`, `assigned` or `lost` after the freeze) at least 1.5 s before, within a
        // deadline. A member whose commit waits on the frozen coordinator starts its revoke only once
        // that commit settles (at the transaction's deadline, TXN_TIMEOUT_MS, or it stops there):
        // when the assignor takes the joiner's partitions from that member alone, the other members
        // emit nothing until then, so the deadline covers it (in runs here the rebalance began in
        // < 2 s, or 19–34 s into the freeze).
        const REBALANCE_EVENTS = new Set(['revoking', 'assigned', 'lost']);
        const revokedDuringFreeze = (): boolean =>
          lines().some(
            (l) => REBALANCE_EVENTS.has(l.type) && l.at > frozenAt && l.at < Date.now() - 1500,
          );
        await waitFor(() => Date.now() - frozenAt >= freezeMs && revokedDuringFreeze(), {
          timeoutMs: TXN_TIMEOUT_MS + 30_000,
          what: 'a rebalance (a revoking, assigned or lost event) during the freeze',
          intervalMs: 100,
        }).catch(() => undefined);
        const rebalancedInFreeze = revokedDuringFreeze();
        await kafkaSh(['thaw-node', String(node)], log);
        frozen = undefined;
        const thawedAt = Date.now();
        const frozenForMs = thawedAt - frozenAt;
        assert.ok(rebalancedInFreeze, 'a rebalance began while the coordinator was frozen');
        await new Promise((r) => setTimeout(r, 3000));
        const fed = await feed.stop();
        const ends = await highWatermarks(topics.input, PARTITIONS);

        // Until the offsets reach the end: a worker that exits on its own is either a documented
        // stop, restarted under the same transactional.id, or a failure of the test. Documented
        // (docs/exactly-once.md: a coordinator frozen past transaction.timeout.ms ends the
        // member with a TransactionError or a ProducerFencedError, never a duplicate):
        // - TransactionError: commitTransaction unresolved at the transaction deadline;
        // - ProducerFencedError of the target, when the freeze outlasted transaction.timeout.ms: the
        //   coordinator aborted the transaction on its timeout and bumped the epoch (the abort, or a
        //   produce request the frozen node held, is then answered "fenced"). Only the target's.
        const stops: string[] = [];
        await waitFor(
          async () => {
            for (const [name, w] of running) {
              if (w.proc.exitCode === null && w.proc.signalCode === null) continue;
              const err = lines()
                .filter((l) => l.type === 'error' && l.pid === w.proc.pid)
                .at(-1);
              const what = `${name} (pid ${w.proc.pid}) exited ${w.proc.exitCode ?? w.proc.signalCode}: ${err?.name ?? '?'} ${err?.code ?? ''} ${err?.message ?? ''}`;
              stops.push(what);
              console.log(`      stop: ${what}`);
              const documented =
                (err?.code === 'ERR_RKC_TRANSACTION' &&
                  /transaction deadline/.test(err.message ?? '')) ||
                (name === target &&
                  err?.code === 'ERR_RKC_PRODUCER_FENCED' &&
                  frozenForMs > TXN_TIMEOUT_MS);
              if (!documented) throw new Error(`unexpected stop: ${what}`);
              start(name);
            }
            const c = await committedOffsets(topics.group, topics.input, PARTITIONS);
            return c.every((o, p) => o === ends[p]);
          },
          {
            timeoutMs: 150_000,
            what: 'committed offsets at the end of the input',
            intervalMs: 250,
          },
        );
        if (leaver !== undefined)
          assert.equal(await leaver.exited, 0, `${other}'s graceful stop exits 0`);
        for (const w of running.values()) w.proc.kill('SIGTERM');
        for (const [name, w] of running)
          assert.equal(await w.exited, 0, `${name}'s graceful stop exits 0`);

        const movedTo = coordinatorIn(
          await kafkaSh(['txn-coordinator', `${topics.group}-${target}`], log),
        );
        const v = await verdict(topics, PARTITIONS, OUT_PARTITIONS, ends);
        const endCommitted = await committedOffsets(topics.group, topics.input, PARTITIONS);
        const all = lines();
        const check = agreement(all, endCommitted);
        const targetPids = new Set(
          [...all]
            .filter((l) => l.type === 'ready' && l.transactionalId === `${topics.group}-${target}`)
            .map((l) => l.pid),
        );
        // Did the freeze hold the target's commits? Its counters at the freeze, and when they moved.
        const txnLines = all.filter((l) => l.type === 'txn' && targetPids.has(l.pid));
        const atFreeze = txnLines.filter((l) => l.at <= frozenAt).at(-1);
        const during = new Set(
          txnLines.filter((l) => l.at > frozenAt && l.at < thawedAt).map((l) => l.state),
        );
        const moved = txnLines.find(
          (l) =>
            l.at > frozenAt &&
            (l.committed !== atFreeze?.committed || l.aborted !== atFreeze?.aborted),
        );
        console.log(
          `      ${target}'s transactions at the freeze: committed=${atFreeze?.committed} aborted=${atFreeze?.aborted}; states during the freeze: ${[...during].join(',')}; next change ${moved === undefined ? 'never' : `${moved.at - frozenAt} ms after the freeze (committed=${moved.committed} aborted=${moved.aborted})`}`,
        );
        const targetCommits = all
          .filter((l) => l.type === 'committed' && targetPids.has(l.pid))
          .map(
            (l) => `${l.transaction?.outcome ?? '?'}/${l.durationMs ?? '?'}ms@${l.at - frozenAt}ms`,
          );
        console.log(
          `      ${protocol}: node ${node} frozen ${frozenForMs} ms; ${target}'s transaction coordinator after: ${movedTo}; outcome: ${stops.length === 0 ? 'no stop' : stops.join('; ')}; ${target}'s committed events (outcome/duration@since freeze): ${targetCommits.join(', ') || 'none'}`,
        );
        console.log(
          `      inputs=${MESSAGES + fed} outputs=${v.expected} read_committed=${v.readCommitted} lost=${v.lost} duplicated=${v.duplicated} aborted seen by read_uncommitted=${v.abortedSeen}; events checked against the broker: ${check.checked}, disagreeing: ${check.disagreements.length}${check.notCommitted.length > 0 ? `; not committed: ${check.notCommitted.join(' | ')}` : ''}`,
        );
        assert.equal(v.lost, 0, 'no output lost');
        assert.equal(v.duplicated, 0, 'no output duplicated');
        assert.equal(v.readCommitted, v.expected);
        assert.deepEqual(endCommitted, ends, 'committed offsets at the input end');
        assert.deepEqual(check.disagreements, [], 'committed events agree with the broker');
        assert.ok(check.checked > 0, 'some committed events were checked');
        rmSync(dir, { recursive: true, force: true });
      });
    }
  }
});
