/**
 * The bench driver (`make bench`, `make bench-quick`): fills the topics, runs every contender in
 * its own child process, interleaved over rounds, then the rebalance and memory scenarios, and
 * writes results.json, the markdown report and its SVG charts.
 *
 *   node --import tsx bench/run.ts --mode full|quick [--out DIR]
 *   node --import tsx bench/run.ts --render-only [--out DIR]   (re-render the last results.json)
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, relative } from 'node:path';
import * as Kafka from 'node-rdkafka';
import { seededRandom } from '../integration/helpers/random';
import { CONTENDERS } from './contenders';
import { fastBindingMissing, loadFastBinding } from './contenders/raw-rdkafka';
import { createTopic, deleteTopic, ensureFilledTopic, fillTopic } from './kafka-admin';
import { CKJS_STATUS, PEER_PACKAGES, packageVersion, peerStatus } from './peers';
import type { PeerStatus } from './peers';
import { Progress } from './progress';
import { CHART_FILES, renderCharts, renderMarkdown, renderSummary } from './report';
import type { BenchResults, ContenderEntry } from './results';
import { BROKERS, benchSettings, topicName } from './settings';
import type { Mode } from './settings';
import { formatDuration, formatInt, shuffled } from './stats';
import type { ChildMessage, ChildResult, Task } from './tasks';

const ROOT = join(__dirname, '..');
const CHILD = join(__dirname, 'child.ts');
const RESULTS_DIR = join(__dirname, '.results');

function parseArgs(argv: string[]): { mode: Mode; out: string | undefined; renderOnly: boolean } {
  let mode: Mode = 'quick';
  let out: string | undefined;
  let renderOnly = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--mode') {
      const value = argv[++i];
      if (value !== 'full' && value !== 'quick') throw new Error(`--mode full|quick, got ${value}`);
      mode = value;
    } else if (arg === '--out') {
      out = argv[++i];
    } else if (arg === '--render-only') {
      renderOnly = true;
    } else {
      throw new Error(`unknown argument ${arg}`);
    }
  }
  return { mode, out, renderOnly };
}

function defaultOut(mode: Mode): string {
  return mode === 'full' ? join(ROOT, 'docs') : RESULTS_DIR;
}

/** Writes the markdown report and its charts into `out`. */
function writeReport(results: BenchResults, out: string): void {
  mkdirSync(out, { recursive: true });
  const charts = renderCharts(results);
  writeFileSync(join(out, CHART_FILES.throughput), charts.throughput);
  if (charts.rss) writeFileSync(join(out, CHART_FILES.rss), charts.rss);
  writeFileSync(join(out, 'benchmarks.md'), renderMarkdown(results));
}

interface ChildOutcome {
  result?: ChildResult;
  error?: string;
}

/** Runs one task in a child process; kills it (by its pid) past `timeoutMs`. */
function runChild(
  task: Task,
  timeoutMs: number,
  onProgress: (m: Extract<ChildMessage, { type: 'progress' }>) => void,
  env: Record<string, string> = {},
): Promise<ChildOutcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      cwd: ROOT,
      env: { ...process.env, ...env, BENCH_TASK: JSON.stringify(task) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let outcome: ChildOutcome = {};
    const timer = setTimeout(() => {
      outcome = { error: `no result after ${formatDuration(timeoutMs)} (killed)` };
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('message', (m: ChildMessage) => {
      if (m.type === 'progress') onProgress(m);
      else if (m.type === 'result') outcome = { result: m.result };
      else outcome = { error: m.message };
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (!outcome.result && !outcome.error) {
        outcome = { error: `child exited (${signal ?? code}) without a result` };
      }
      resolve(outcome);
    });
  });
}

function machine(): Record<string, string> {
  const cpus = os.cpus();
  return {
    CPU: `${cpus.length} × ${cpus[0]?.model ?? 'unknown'}`,
    memory: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    OS: `${os.type()} ${os.release()} (${os.arch()})`,
    'load average at start': os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  };
}

function brokerDescription(): string {
  if (process.env.KAFKA_BROKERS_BENCH || process.env.KAFKA_BROKERS) return `external (${BROKERS})`;
  const stateFile = join(ROOT, 'integration/.kafka/state');
  const state = existsSync(stateFile) ? readFileSync(stateFile, 'utf8') : '';
  const get = (key: string) => new RegExp(`^${key}=(.*)$`, 'm').exec(state)?.[1];
  return `Apache Kafka ${get('VERSION') ?? '?'} (${get('MODE') ?? '?'}, ${get('NODES') ?? '?'} node), KRaft, ${BROKERS}, same machine`;
}

function gitRevision(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty', '--abbrev=7'], { cwd: ROOT })
      .toString()
      .trim();
  } catch {
    return 'unknown';
  }
}

function versions(peers: PeerStatus[]): Record<string, string> {
  const own = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const out: Record<string, string> = {
    'reactive-rdkafka': `${own.version} (${gitRevision()}, dist/)`,
    'node-rdkafka': `${packageVersion('node-rdkafka') ?? '?'} (librdkafka ${Kafka.librdkafkaVersion})`,
    rxjs: packageVersion('rxjs') ?? '?',
    Node: process.version,
    broker: brokerDescription(),
    'companion binding': ((): string => {
      if (fastBindingMissing() !== undefined) return 'not built';
      const fast = loadFastBinding() as unknown as { version?: string; librdkafkaVersion: string };
      return `reactive-rdkafka-fast-binding ${fast.version ?? '?'} (fast-binding/, librdkafka ${fast.librdkafkaVersion} linked in)`;
    })(),
  };
  for (const p of peers) out[p.name] = p.installed ? p.version : 'not measured';
  return out;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.renderOnly) {
    // Re-render the last run's report (e.g. after changing report.ts), measuring nothing.
    const results = JSON.parse(
      readFileSync(join(RESULTS_DIR, 'results.json'), 'utf8'),
    ) as BenchResults;
    const out = args.out ?? defaultOut(results.mode);
    writeReport(results, out);
    console.log(`bench: re-rendered ${relative(ROOT, join(out, 'benchmarks.md'))}`);
    return;
  }
  const { mode } = args;
  const out = args.out ?? defaultOut(mode);
  const seed = Number(process.env.BENCH_SEED ?? Math.floor(Math.random() * 1_000_000));
  const settings = benchSettings(mode, seed);
  const random = seededRandom(seed);
  console.log(
    `bench: mode=${mode} seed=${seed} brokers=${BROKERS} (BENCH_SEED=${seed} repeats it)`,
  );
  if (!existsSync(join(ROOT, 'dist/cjs/index.js'))) {
    throw new Error('dist/ is missing: run `make build` (the bench measures the built library)');
  }
  const peers: PeerStatus[] = [...PEER_PACKAGES.map(peerStatus), CKJS_STATUS];
  const contenders: ContenderEntry[] = CONTENDERS.map((c) => {
    const reason = c.missing?.();
    return {
      id: c.id,
      label: c.label,
      kind: c.kind,
      pkg: c.pkg,
      settings: c.settings,
      installed:
        reason === undefined &&
        (c.kind !== 'peer' || peers.some((p) => p.name === c.pkg && p.installed)),
      ...(reason === undefined ? {} : { reason }),
    };
  });
  for (const p of peers) if (!p.installed) console.log(`bench: ${p.name}: ${p.reason}`);
  for (const c of contenders) if (c.reason) console.log(`bench: ${c.label}: ${c.reason}`);
  const installed = contenders.filter((c) => c.installed);
  const kafkajs = peers.some((p) => p.name === 'kafkajs' && p.installed);

  const joinRuns = settings.join.repetitions * (settings.join.protocols.length + (kafkajs ? 1 : 0));
  const totalSteps =
    settings.dataSets.length +
    settings.dataSets.length * settings.rounds * installed.length +
    settings.revoke.protocols.length * 2 +
    joinRuns +
    1;
  const progress = new Progress(totalSteps);
  const startedAt = new Date();
  const t0 = Date.now();
  const results: BenchResults = {
    mode,
    seed,
    startedAt: startedAt.toISOString().replace(/\.\d+Z$/, 'Z'),
    durationMs: 0,
    brokers: BROKERS,
    machine: machine(),
    versions: versions(peers),
    peers,
    contenders,
    dataSets: settings.dataSets,
    rounds: settings.rounds,
    throughput: [],
    revoke: [],
    join: [],
    joinSettings: {
      members: 7,
      rate: settings.join.rate,
      settleMs: settings.join.settleMs,
      observeMs: settings.join.observeMs,
    },
    revokeSettings: {
      cycles: settings.revoke.cycles,
      backlog: settings.revoke.backlog,
      handlerMs: settings.revoke.handlerMs,
    },
  };

  // 1. Topics (reused when a previous run left exactly this data).
  for (const ds of settings.dataSets) {
    progress.next(`topic ${ds.topic}`);
    const how = await ensureFilledTopic(
      BROKERS,
      ds.topic,
      ds.partitions,
      ds.messages,
      ds.valueBytes,
      seed,
      (n) => progress.detail(`${formatInt(n)}/${formatInt(ds.messages)} produced`),
    );
    progress.log(`bench: topic ${ds.topic}: ${how}`);
  }

  // 2. Throughput, interleaved rounds.
  for (const ds of settings.dataSets) {
    for (let round = 1; round <= settings.rounds; round++) {
      for (const c of shuffled(installed, random)) {
        progress.next(`throughput ${ds.name} round ${round}/${settings.rounds}: ${c.id}`);
        const outcome = await runChild(
          {
            kind: 'throughput',
            brokers: BROKERS,
            contender: c.id,
            topic: ds.topic,
            groupId: `bench-${c.id}-${Date.now().toString(36)}-${round}`,
            expected: ds.messages,
          },
          settings.runTimeoutMs,
          (m) => progress.detail(`${formatInt(m.count)}/${formatInt(ds.messages)}`),
        );
        const result = outcome.result?.kind === 'throughput' ? outcome.result : undefined;
        results.throughput.push({
          dataSet: ds.name,
          contender: c.id,
          round,
          ...(result ? { result } : { error: outcome.error ?? 'no result' }),
        });
        progress.log(
          result
            ? `bench: ${ds.name} r${round} ${c.id.padEnd(26)} ${formatInt((result.messages / result.elapsedMs) * 1000).padStart(9)} msg/s`
            : `bench: ${ds.name} r${round} ${c.id} FAILED: ${outcome.error}`,
        );
      }
    }
  }

  // 3. Rebalance cost: revoke → revoked.
  const scenarioEnv = { UV_THREADPOOL_SIZE: '16' };
  for (const protocol of settings.revoke.protocols) {
    for (const variant of ['idle', 'in-flight'] as const) {
      progress.next(`revoke → revoked, ${protocol}, ${variant}`);
      const outcome = await runChild(
        {
          kind: 'revoke',
          brokers: BROKERS,
          protocol,
          variant,
          partitions: 12,
          cycles: settings.revoke.cycles,
          backlog: settings.revoke.backlog,
          handlerMs: settings.revoke.handlerMs,
          seed: Math.floor(random() * 1e9),
        },
        300_000,
        (m) => progress.detail(m.note ?? ''),
        scenarioEnv,
      );
      const result = outcome.result?.kind === 'revoke' ? outcome.result : undefined;
      results.revoke.push({
        protocol,
        variant,
        ...(result ? { result } : { error: outcome.error ?? 'no result' }),
      });
    }
  }

  // 4. Rebalance cost: a 7th member joins.
  for (let repetition = 1; repetition <= settings.join.repetitions; repetition++) {
    const runs = [
      ...settings.join.protocols.map((protocol) => ({
        client: 'reactive-rdkafka' as const,
        protocol,
      })),
      ...(kafkajs ? [{ client: 'kafkajs' as const, protocol: 'eager' as const }] : []),
    ];
    for (const { client, protocol } of runs) {
      progress.next(`7th member joins: ${client}, ${protocol}, repetition ${repetition}`);
      const outcome = await runChild(
        {
          kind: 'join',
          brokers: BROKERS,
          client,
          protocol,
          partitions: 12,
          members: 7,
          rate: settings.join.rate,
          settleMs: settings.join.settleMs,
          observeMs: settings.join.observeMs,
          seed: Math.floor(random() * 1e9),
        },
        300_000,
        (m) => progress.detail(m.note ?? ''),
        scenarioEnv,
      );
      const result = outcome.result?.kind === 'join' ? outcome.result : undefined;
      results.join.push({
        client,
        protocol,
        repetition,
        ...(result ? { result } : { error: outcome.error ?? 'no result' }),
      });
    }
  }

  // 5. Memory under backlog: the library's defaults, the same with periodic full GCs (the live
  // floor), and the raw binding alone (see bench/scenarios/backlog-memory.ts).
  const backlog = {
    topic: topicName('mem', 12, settings.memory.messages, settings.memory.valueBytes),
    partitions: 12,
    messages: settings.memory.messages,
  };
  progress.next(`topic ${backlog.topic}`);
  await ensureFilledTopic(
    BROKERS,
    backlog.topic,
    backlog.partitions,
    backlog.messages,
    settings.memory.valueBytes,
    seed,
    (n) => progress.detail(`${formatInt(n)}/${formatInt(backlog.messages)} produced`),
  );
  progress.done();
  const withFast = fastBindingMissing() === undefined;
  const memoryVariants: {
    client: 'reactive-rdkafka' | 'raw-rdkafka';
    label: string;
    gcEveryMs?: number;
    binding?: 'fast';
  }[] = [
    { client: 'reactive-rdkafka', label: 'defaults' },
    ...(withFast
      ? [
          {
            client: 'reactive-rdkafka',
            label: 'defaults, companion binding',
            binding: 'fast',
          } as const,
        ]
      : []),
    { client: 'reactive-rdkafka', label: 'full GC every 5 s', gcEveryMs: 5_000 },
    { client: 'raw-rdkafka', label: 'raw' },
    ...(withFast
      ? [{ client: 'raw-rdkafka', label: 'raw, companion binding', binding: 'fast' } as const]
      : []),
  ];
  const memoryRuns: NonNullable<BenchResults['memory']>['runs'] = [];
  for (const variant of memoryVariants) {
    progress.next(
      `memory under a ${formatInt(backlog.messages)}-message backlog (${variant.client}, ${variant.label})`,
    );
    const mem = await runChild(
      {
        kind: 'memory',
        client: variant.client,
        ...(variant.gcEveryMs === undefined ? {} : { gcEveryMs: variant.gcEveryMs }),
        ...(variant.binding === undefined ? {} : { binding: variant.binding }),
        brokers: BROKERS,
        topic: backlog.topic,
        partitions: backlog.partitions,
        backlog: backlog.messages,
        sampleMs: settings.memory.sampleMs,
        intervalMs: settings.memory.intervalMs,
        handlerMs: settings.memory.handlerMs,
      },
      settings.memory.sampleMs + 120_000,
      (m) => progress.detail(`${formatInt(m.count)} processed`),
    );
    const memResult = mem.result?.kind === 'memory' ? mem.result : undefined;
    memoryRuns.push({
      client: variant.client,
      ...(variant.binding === undefined ? {} : { binding: variant.binding }),
      ...(variant.gcEveryMs === undefined ? {} : { gcEveryMs: variant.gcEveryMs }),
      label: variant.label,
      ...(memResult ? { result: memResult } : { error: mem.error ?? 'no result' }),
    });
    progress.done();
  }
  const defaults = memoryRuns[0]!;
  results.memory = {
    topic: backlog.topic,
    backlog: backlog.messages,
    valueBytes: settings.memory.valueBytes,
    handlerMs: settings.memory.handlerMs,
    sampleMs: settings.memory.sampleMs,
    ...(defaults.result ? { result: defaults.result } : { error: defaults.error }),
    runs: memoryRuns,
  };

  // 5b. Topic to topic: transactional vs plain process() + produce.
  {
    const t = settings.transform;
    const topic = `bench-transform-${t.partitions}p-${t.messages}`;
    progress.next(`topic to topic: ${formatInt(t.messages)} messages, transactional vs plain`);
    await ensureFilledTopic(
      BROKERS,
      topic,
      t.partitions,
      t.messages,
      100,
      settings.seed,
      () => undefined,
    );
    results.transform = { topic, messages: t.messages, runs: [] };
    for (const mode of ['plain', 'transactional'] as const) {
      progress.detail(mode);
      const run = await runChild(
        {
          kind: 'transform',
          brokers: BROKERS,
          topic,
          partitions: t.partitions,
          messages: t.messages,
          mode,
        },
        240_000,
        (m) => progress.detail(`${mode}: ${formatInt(m.count)} processed`),
      );
      const result = run.result?.kind === 'transform' ? run.result : undefined;
      results.transform.runs.push({
        mode,
        ...(result ? { result } : { error: run.error ?? 'no result' }),
      });
    }
    progress.done();
  }

  // 6. Ordering modes on a keyed workload with per-message latency.
  {
    const o = settings.ordering;
    const topic = `bench-ordering-1p-${o.messages}x${o.keys}k`;
    progress.next(
      `ordering modes: ${formatInt(o.messages)} messages, ${o.keys} keys, 0–${o.maxLatencyMs} ms each`,
    );
    await deleteTopic(BROKERS, topic).catch(() => undefined);
    await createTopic(BROKERS, topic, 1);
    await fillTopic(BROKERS, topic, 1, o.messages, 100, settings.seed, () => undefined, o.keys);
    results.ordering = {
      topic,
      keys: o.keys,
      maxLatencyMs: o.maxLatencyMs,
      partitionConcurrency: o.partitionConcurrency,
      runs: [],
    };
    for (const ordering of ['partition', 'key', 'none'] as const) {
      progress.detail(ordering);
      const run = await runChild(
        {
          kind: 'ordering',
          brokers: BROKERS,
          topic,
          messages: o.messages,
          ordering,
          partitionConcurrency: o.partitionConcurrency,
          maxLatencyMs: o.maxLatencyMs,
          seed: settings.seed,
        },
        o.messages * o.maxLatencyMs + 120_000,
        (m) => progress.detail(`${ordering}: ${formatInt(m.count)} processed`),
      );
      const result = run.result?.kind === 'ordering' ? run.result : undefined;
      results.ordering.runs.push({
        ordering,
        ...(result ? { result } : { error: run.error ?? 'no result' }),
      });
    }
    progress.done();
  }

  // 7. Results, report, charts.
  results.durationMs = Date.now() - t0;
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(join(RESULTS_DIR, 'results.json'), JSON.stringify(results, null, 2) + '\n');
  writeReport(results, out);
  console.log('');
  console.log(renderSummary(results));
  console.log('');
  console.log(
    `bench: done in ${formatDuration(results.durationMs)}; report ${relative(ROOT, join(out, 'benchmarks.md'))}, raw results ${relative(ROOT, join(RESULTS_DIR, 'results.json'))}`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
