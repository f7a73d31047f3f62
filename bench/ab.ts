/**
 * Interleaved A/B of two builds of the library on the bench's throughput topics: the raw loop, and
 * each library contender from a baseline build (A) and from dist/ (B), every run in its own child
 * process, in a seeded random order per round. Ratios are only meaningful within one run.
 *
 *   node scripts/build.mjs && cp -a dist /tmp/reactive-rdkafka-ab-base   # on the baseline commit
 *   node scripts/build.mjs                                                # on the change
 *   node --import tsx bench/ab.ts [--base DIR] [--rounds N] [--sets 100B,1KiB]
 *        [--contenders reactive-process,reactive-partitions] [--cpu-prof DIR]
 *        [--base-fast-binding DIR]   # a copy of fast-binding/ (its index.js, package.json
 *                                    # and dist/) built from other patches, for the A runs
 *
 * The baseline build lives outside the checkout (so that lint and tests never see it) and resolves
 * its dependencies from this checkout's node_modules (NODE_PATH). Prints the medians (msg/s, CPU µs
 * per message, × raw) and writes bench/.results/ab.json.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { seededRandom } from '../integration/helpers/random';
import type { ContenderId } from './contenders';
import { ensureFilledTopic } from './kafka-admin';
import type { ThreadCpu, ThroughputResult } from './meter';
import { BROKERS, benchSettings } from './settings';
import { formatFixed, formatInt, median, shuffled } from './stats';
import type { ChildMessage, Task } from './tasks';

const ROOT = join(__dirname, '..');
const CHILD = join(__dirname, 'child.ts');
const RESULTS = join(__dirname, '.results');

interface Args {
  base: string;
  rounds: number;
  sets: string[];
  contenders: ContenderId[];
  cpuProf: string | undefined;
  seed: number;
  /** Another build of the companion binding's package for the A runs (default: the same). */
  baseFastBinding: string | undefined;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    base: join(tmpdir(), 'reactive-rdkafka-ab-base'),
    rounds: 3,
    sets: ['100 B', '1 KiB'],
    contenders: ['reactive-process', 'reactive-partitions', 'reactive-process-batch'],
    cpuProf: undefined,
    baseFastBinding: undefined,
    seed: Number(process.env.BENCH_SEED ?? Math.floor(Math.random() * 1_000_000)),
  };
  for (let i = 0; i < argv.length; i++) {
    const value = argv[i + 1] ?? '';
    switch (argv[i]) {
      case '--base':
        args.base = resolve(value);
        break;
      case '--base-fast-binding':
        args.baseFastBinding = resolve(value);
        break;
      case '--rounds':
        args.rounds = Number(value);
        break;
      case '--sets':
        args.sets = value.split(',').map((s) => s.replace(/^(\d+)\s*/, '$1 '));
        break;
      case '--contenders':
        args.contenders = value.split(',') as ContenderId[];
        break;
      case '--cpu-prof':
        args.cpuProf = resolve(value);
        break;
      default:
        throw new Error(`unknown argument ${argv[i]}`);
    }
    i += 1;
  }
  return args;
}

interface Run {
  set: string;
  contender: ContenderId;
  variant: 'A' | 'B' | 'raw';
  round: number;
  result?: ThroughputResult;
  error?: string;
}

function runChild(
  task: Task,
  env: Record<string, string>,
  execArgv: string[],
): Promise<Run['result'] | string> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [...execArgv, '--import', 'tsx', CHILD], {
      cwd: ROOT,
      env: { ...process.env, ...env, BENCH_TASK: JSON.stringify(task) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let outcome: Run['result'] | string = 'no result';
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.on('message', (m: ChildMessage) => {
      if (m.type === 'result' && m.result.kind === 'throughput') outcome = m.result;
      else if (m.type === 'error') outcome = m.message;
    });
    child.on('exit', () => {
      clearTimeout(timer);
      done(outcome);
    });
  });
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (!existsSync(join(args.base, 'cjs/index.js'))) throw new Error(`no build at ${args.base}`);
  if (!existsSync(join(ROOT, 'dist/cjs/index.js'))) throw new Error('dist/ is missing: make build');
  const random = seededRandom(args.seed);
  const dataSets = benchSettings('full', args.seed).dataSets.filter((d) =>
    args.sets.includes(d.name),
  );
  console.log(`ab: seed=${args.seed} A=${args.base} B=dist/ brokers=${BROKERS}`);
  const runs: Run[] = [];
  for (const ds of dataSets) {
    const how = await ensureFilledTopic(
      BROKERS,
      ds.topic,
      ds.partitions,
      ds.messages,
      ds.valueBytes,
      args.seed,
      () => undefined,
    );
    console.log(`ab: topic ${ds.topic}: ${how}`);
    const slots: Omit<Run, 'round'>[] = [
      { set: ds.name, contender: 'raw-rdkafka', variant: 'raw' },
      ...args.contenders.flatMap((contender) =>
        (['A', 'B'] as const).map((variant) => ({ set: ds.name, contender, variant })),
      ),
    ];
    for (let round = 1; round <= args.rounds; round++) {
      for (const slot of shuffled(slots, random)) {
        const env: Record<string, string> =
          slot.variant === 'A'
            ? {
                BENCH_LIBRARY_DIST: args.base,
                NODE_PATH: join(ROOT, 'node_modules'),
                ...(args.baseFastBinding ? { BENCH_FAST_BINDING_DIR: args.baseFastBinding } : {}),
              }
            : {};
        const execArgv = args.cpuProf
          ? [
              '--cpu-prof',
              '--cpu-prof-dir',
              join(args.cpuProf, `${ds.valueBytes}b-${slot.contender}-${slot.variant}`),
            ]
          : [];
        const outcome = await runChild(
          {
            kind: 'throughput',
            brokers: BROKERS,
            contender: slot.contender,
            topic: ds.topic,
            groupId: `ab-${slot.contender}-${slot.variant}-${Date.now().toString(36)}`,
            expected: ds.messages,
          },
          env,
          execArgv,
        );
        const run: Run =
          typeof outcome === 'string'
            ? { ...slot, round, error: outcome }
            : { ...slot, round, result: outcome };
        runs.push(run);
        const r = run.result;
        console.log(
          `ab: ${ds.name} r${round} ${slot.contender.padEnd(24)} ${slot.variant.padEnd(3)} ` +
            (r
              ? `${formatInt((r.messages / r.elapsedMs) * 1000).padStart(9)} msg/s ${formatFixed((r.cpuMs * 1000) / r.messages, 2).padStart(6)} CPU µs/msg` +
                threadSplit(r)
              : `FAILED: ${run.error}`),
        );
      }
    }
  }
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(join(RESULTS, 'ab.json'), JSON.stringify({ seed: args.seed, runs }, null, 2));
  for (const ds of dataSets) {
    const of = (contender: ContenderId, variant: Run['variant']) =>
      runs.filter(
        (r) => r.set === ds.name && r.contender === contender && r.variant === variant && r.result,
      );
    const rate = (rs: Run[]) =>
      median(rs.map((r) => (r.result!.messages / r.result!.elapsedMs) * 1000));
    const cpu = (rs: Run[]) => median(rs.map((r) => (r.result!.cpuMs * 1000) / r.result!.messages));
    const raw = of('raw-rdkafka', 'raw');
    const rawRate = rate(raw);
    const rawCpu = cpu(raw);
    console.log(
      `\n${ds.name} (${formatInt(ds.messages)} messages, ${args.rounds} rounds, medians)`,
    );
    const perThread = (rs: Run[], kind: keyof ThreadCpu) => {
      const split = rs.filter((r) => r.result!.cpuByThreadMs);
      if (split.length === 0) return '-';
      return formatFixed(
        median(split.map((r) => (r.result!.cpuByThreadMs![kind] * 1000) / r.result!.messages)),
        2,
      );
    };
    const gc = (rs: Run[]) =>
      formatFixed(median(rs.map((r) => ((r.result!.gcMs ?? 0) * 1000) / r.result!.messages)), 2);
    console.log(
      '| contender | build | msg/s | × raw | CPU µs/msg | CPU × raw | main | main GC | rdk:* | other | runs |',
    );
    console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    const line = (label: string, variant: string, rs: Run[]) =>
      console.log(
        `| ${label} | ${variant} | ${formatInt(rate(rs))} | ${formatFixed(rate(rs) / rawRate, 2)}× | ${formatFixed(cpu(rs), 2)} | ${formatFixed(cpu(rs) / rawCpu, 2)}× | ${perThread(rs, 'main')} | ${gc(rs)} | ${perThread(rs, 'librdkafka')} | ${perThread(rs, 'other')} | ${rs.length} |`,
      );
    line('raw consume(n)', '-', raw);
    for (const c of args.contenders) {
      line(c, 'A (base)', of(c, 'A'));
      line(c, 'B (dist)', of(c, 'B'));
    }
  }
}

/** `main/rdk/other` CPU µs per message of one run, when the child could read its threads. */
function threadSplit(r: ThroughputResult): string {
  const t = r.cpuByThreadMs;
  if (!t) return '';
  const us = (ms: number) => formatFixed((ms * 1000) / r.messages, 2);
  return ` (main ${us(t.main)} of which GC ${us(r.gcMs ?? 0)}, rdk:* ${us(t.librdkafka)}, other ${us(t.other)})`;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
