/**
 * Building blocks of the exactly-once tests: worker processes running processTransactional()
 * (integration/eos/worker.ts), a reader of the output topics at either isolation level, and the
 * exactly-once verdict (every input's records once under read_committed, committed offsets at the
 * input's end; the read_uncommitted surplus counts aborted records).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as Kafka from 'node-rdkafka';
import {
  BROKERS,
  committedOffsets,
  createTopic,
  highWatermarks,
  produce,
  uniqueName,
  waitFor,
} from '../helpers/kafka';
import { protocolVariants } from '../chaos/protocols';
import { OUTPUT_ROOT } from '../helpers/output';
import { workerArgs } from '../helpers/worker-bundle';

/** How many records an input gets: `fixed`, else 1–3 (the worker's rule). */
export const fanOut = (offset: number, partition: number, fixed?: number): number =>
  fixed ?? 1 + ((offset * 7 + partition) % 3);

/** How a worker writes: records per input, producer settings, transaction age. */
export interface EosWriting {
  /** Records per input (default: 1–3, see fanOut). */
  readonly records?: number;
  /** Extra settings of the transactional producer. */
  readonly producerConfig?: Record<string, unknown>;
  /** The transaction's `maxMs` (default 100). */
  readonly maxMs?: number;
}

/** Every record of a topic read by a fresh consumer with the given isolation level, to the end. */
export async function readTopic(
  topic: string,
  partitions: number,
  isolation: 'read_committed' | 'read_uncommitted',
): Promise<string[]> {
  const ends = await highWatermarks(topic, partitions);
  const c = new Kafka.KafkaConsumer(
    {
      'bootstrap.servers': BROKERS,
      'group.id': uniqueName('eos-reader'),
      'enable.auto.commit': false,
      'isolation.level': isolation,
    },
    {},
  );
  await new Promise<void>((resolve, reject) =>
    c.connect({}, (err) => (err ? reject(err) : resolve())),
  );
  try {
    const tps = ends.map((_, partition) => ({ topic, partition }));
    c.assign(tps.map((t) => ({ ...t, offset: -2 })) as never);
    const out: string[] = [];
    const deadline = Date.now() + 60_000;
    for (;;) {
      const batch = await new Promise<Kafka.Message[]>((resolve, reject) =>
        c.consume(1000, (err, m) =>
          err && err.code !== Kafka.CODES.ERRORS.ERR__TIMED_OUT ? reject(err) : resolve(m ?? []),
        ),
      );
      for (const m of batch) out.push(m.value?.toString() ?? '');
      const positions = c.position(tps);
      const done = ends.every((end, p) => {
        const pos = positions.find((x) => x.partition === p)?.offset;
        return end === 0 || (typeof pos === 'number' && pos >= end);
      });
      if (done && batch.length === 0) return out;
      if (Date.now() > deadline)
        throw new Error(`reading ${topic} (${isolation}) did not reach the end`);
    }
  } finally {
    await new Promise<void>((resolve) => c.disconnect(() => resolve()));
  }
}

/** How a worker runs: its identity, deadlines and trace (all optional; see worker.ts). */
export interface EosRun {
  /**
   * `explicit` (default): `transactionalId` `<group>-<name>`; `instance`: `instanceId` `<name>`
   * (the library derives the same id); `random`: neither (a random id per start).
   */
  readonly identity?: 'explicit' | 'instance' | 'random';
  readonly commitTimeoutMs?: number;
  readonly drainTimeoutMs?: number;
  /** A file for the worker's trace lines (JSON: rebalance events, `first`, `ready`, `error`). */
  readonly trace?: string;
}

export interface EosWorker {
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  /** Resolves at the worker's first assignment (its SIGTERM handler is installed by then). */
  readonly assigned: Promise<void>;
}

export interface EosTopics {
  readonly group: string;
  readonly input: string;
  readonly outA: string;
  readonly outB: string;
}

/** Starts a worker; `name` gives it a stable transactional.id (a restart reuses it). */
export function startWorker(
  topics: EosTopics,
  name: string,
  config: Record<string, unknown>,
  workers: EosWorker[],
  writing: EosWriting = {},
  run: EosRun = {},
): EosWorker {
  const dir = join(OUTPUT_ROOT, 'eos');
  mkdirSync(dir, { recursive: true });
  const proc = spawn(process.execPath, workerArgs(join(__dirname, 'worker.ts')), {
    env: {
      ...process.env,
      EOS_BROKERS: BROKERS,
      EOS_GROUP: topics.group,
      EOS_TOPIC: topics.input,
      EOS_OUT_A: topics.outA,
      EOS_OUT_B: topics.outB,
      EOS_TXN_ID: `${topics.group}-${name}`,
      EOS_NAME: name,
      EOS_RUN: JSON.stringify(run),
      ...(run.trace === undefined ? {} : { EOS_TRACE: run.trace }),
      EOS_CONFIG: JSON.stringify(config),
      EOS_WRITING: JSON.stringify(writing),
      EOS_LOG: join(dir, `${topics.group}-${name}-${Date.now()}.log`),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const assigned = new Promise<void>((resolve) =>
    proc.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('assigned')) resolve();
    }),
  );
  const w = { proc, exited, assigned };
  workers.push(w);
  return w;
}

/** Sum of the group's committed offsets on the input. */
export async function committedSum(topics: EosTopics, partitions: number): Promise<number> {
  return (await committedOffsets(topics.group, topics.input, partitions)).reduce<number>(
    (a, o) => a + (o ?? 0),
    0,
  );
}

/** Waits until the group committed more than `n` inputs. */
export function progressBeyond(
  topics: EosTopics,
  partitions: number,
  n: number,
  what: string,
): Promise<void> {
  return waitFor(async () => (await committedSum(topics, partitions)) > n, {
    timeoutMs: 120_000,
    what,
    intervalMs: 200,
  });
}

export interface EosVerdict {
  /** How long the outputs still had an open transaction (a killed member's) when the verdict began. */
  readonly openTransactionMs: number;
  readonly expected: number;
  readonly readCommitted: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly abortedSeen: number;
  readonly committedAtEnd: boolean;
}

/** Reads both outputs at both isolation levels and compares with what the inputs call for. */
export async function verdict(
  topics: EosTopics,
  partitions: number,
  outPartitions: number,
  ends: readonly number[],
  records?: number,
): Promise<EosVerdict> {
  // A killed member's open transaction holds back what read_committed readers see (the last
  // stable offset) until the broker aborts it at transaction.timeout.ms, unless a producer with
  // its transactional.id fenced it before: read once every output is stable.
  const waitedFrom = Date.now();
  for (const topic of [topics.outA, topics.outB]) {
    await waitFor(
      async () => {
        const [stable, high] = await Promise.all([
          highWatermarks(topic, outPartitions, 'read_committed'),
          highWatermarks(topic, outPartitions, 'read_uncommitted'),
        ]);
        return stable.every((o, p) => o === high[p]);
      },
      { timeoutMs: 120_000, what: `no open transaction on ${topic}`, intervalMs: 250 },
    );
  }
  const openTransactionMs = Date.now() - waitedFrom;
  const committedRecords = [
    ...(await readTopic(topics.outA, outPartitions, 'read_committed')),
    ...(await readTopic(topics.outB, outPartitions, 'read_committed')),
  ];
  const uncommitted = [
    ...(await readTopic(topics.outA, outPartitions, 'read_uncommitted')),
    ...(await readTopic(topics.outB, outPartitions, 'read_uncommitted')),
  ];
  const seen = new Map<string, number>();
  for (const v of committedRecords) seen.set(v, (seen.get(v) ?? 0) + 1);
  const expected: string[] = [];
  for (let p = 0; p < partitions; p++) {
    for (let o = 0; o < (ends[p] ?? 0); o++) {
      for (let i = 0; i < fanOut(o, p, records); i++) expected.push(`${p}:${o}:${i}`);
    }
  }
  const committed = await committedOffsets(topics.group, topics.input, partitions);
  return {
    openTransactionMs,
    expected: expected.length,
    readCommitted: committedRecords.length,
    lost: expected.filter((v) => !seen.has(v)).length,
    duplicated: [...seen.values()].filter((n) => n > 1).length,
    abortedSeen: uncommitted.length - committedRecords.length,
    committedAtEnd: committed.every((o, p) => o === ends[p]),
  };
}

/** The protocols the exactly-once tests run under (classic ones with a 6 s session). */
export const EOS_PROTOCOLS = protocolVariants({
  sessionTimeoutMs: 6000,
  heartbeatIntervalMs: 500,
  maxPollIntervalMs: 30_000,
});

/** Worker processes of the current test, SIGKILLed after it whatever its outcome. */
export function useEosWorkers(): EosWorker[] {
  const workers: EosWorker[] = [];
  afterEach(() => {
    for (const w of workers.splice(0)) if (w.proc.exitCode === null) w.proc.kill('SIGKILL');
  });
  return workers;
}

/** A producer appending to the input while the test runs (see feedInput). */
export interface InputFeed {
  /** Records produced so far. */
  readonly produced: () => number;
  /** Stops, waits for every delivery, and returns how many records it wrote. */
  stop(): Promise<number>;
}

/**
 * Appends `perSecond` records a second to `topic` (round robin over its partitions, in batches every
 * 100 ms), so that a pipeline is still consuming and committing when the test's fault lands.
 */
export async function feedInput(
  topic: string,
  partitions: number,
  perSecond: number,
): Promise<InputFeed> {
  const producer = new Kafka.Producer({
    'bootstrap.servers': BROKERS,
    dr_cb: true,
    'linger.ms': 5,
  } as Kafka.ProducerGlobalConfig);
  await new Promise<void>((resolve, reject) =>
    producer.connect({ timeout: 15_000 }, (err) => (err ? reject(err) : resolve())),
  );
  producer.setPollInterval(20);
  let produced = 0;
  let delivered = 0;
  let failure: unknown;
  producer.on('delivery-report', (err) => {
    if (err) failure ??= err;
    delivered += 1;
  });
  const timer = setInterval(() => {
    for (let n = 0; n < perSecond / 10; n++) {
      const i = produced;
      try {
        producer.produce(topic, i % partitions, Buffer.from(`f${i}`), `f${i}`);
        produced += 1;
      } catch {
        return; // queue full: the next tick goes on
      }
    }
  }, 100);
  return {
    produced: () => produced,
    async stop() {
      clearInterval(timer);
      await waitFor(() => delivered >= produced, {
        timeoutMs: 120_000,
        what: `delivery of the ${produced} fed records`,
        intervalMs: 50,
      });
      await new Promise<void>((resolve) => producer.disconnect(() => resolve()));
      if (failure !== undefined) throw failure as Error;
      return produced;
    },
  };
}

/** Fresh input and output topics and a group; the input filled with `messages` records. */
export async function prepareEos(
  name: string,
  partitions: number,
  outPartitions: number,
  messages: number,
): Promise<{ topics: EosTopics; ends: number[] }> {
  const topics: EosTopics = {
    group: uniqueName(`${name}-group`),
    input: uniqueName(`${name}-in`),
    outA: uniqueName(`${name}-out-a`),
    outB: uniqueName(`${name}-out-b`),
  };
  await createTopic(topics.input, partitions);
  await createTopic(topics.outA, outPartitions);
  await createTopic(topics.outB, outPartitions);
  await produce(
    topics.input,
    Array.from({ length: messages }, (_, i) => ({
      key: `k${i}`,
      value: `${i}`,
      partition: i % partitions,
    })),
  );
  return { topics, ends: await highWatermarks(topics.input, partitions) };
}
