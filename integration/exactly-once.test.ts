import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as Kafka from 'node-rdkafka';
import { protocolVariants } from './chaos/protocols';
import {
  BROKERS,
  committedOffsets,
  createTopic,
  highWatermarks,
  produce,
  uniqueName,
  waitFor,
} from './helpers/kafka';

/**
 * Exactly once on the real broker: workers (separate processes) run processTransactional() from a
 * 6-partition input to two output topics (1–3 records per input), while the group rebalances as a
 * worker joins, one is SIGKILLed and restarted (same transactional.id), and one stops gracefully.
 * A read_committed reader must see every input's records exactly once, and the group's committed
 * offsets must equal the input's end offsets; a read_uncommitted reader's surplus is the aborted
 * records (counted, printed).
 */
const PARTITIONS = 6;
const OUT_PARTITIONS = 3;
const MESSAGES = 6000;
const fanOut = (offset: number, partition: number): number => 1 + ((offset * 7 + partition) % 3);

/** Every record of a topic read by a fresh consumer with the given isolation level, to the end. */
async function readTopic(
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

interface Worker {
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  /** Resolves at the worker's first assignment (its SIGTERM handler is installed by then). */
  readonly assigned: Promise<void>;
}

describe('exactly once: processTransactional() on the real broker', function () {
  this.timeout(300_000);
  const dir = join('integration', '.test_output', 'eos');
  mkdirSync(dir, { recursive: true });
  let workers: Worker[] = [];
  afterEach(() => {
    for (const w of workers) if (w.proc.exitCode === null) w.proc.kill('SIGKILL');
    workers = [];
  });

  const variants = protocolVariants({
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 500,
    maxPollIntervalMs: 30_000,
  });
  for (const [protocol, config] of variants) {
    it(`${protocol}: every input's records exactly once across a join, a SIGKILL + restart and a graceful stop; offsets at the end`, async () => {
      const input = uniqueName(`eos-in-${protocol}`);
      const outA = uniqueName('eos-out-a');
      const outB = uniqueName('eos-out-b');
      const group = uniqueName(`eos-${protocol}`);
      await createTopic(input, PARTITIONS);
      await createTopic(outA, OUT_PARTITIONS);
      await createTopic(outB, OUT_PARTITIONS);
      await produce(
        input,
        Array.from({ length: MESSAGES }, (_, i) => ({
          key: `k${i}`,
          value: `${i}`,
          partition: i % PARTITIONS,
        })),
      );
      const ends = await highWatermarks(input, PARTITIONS);
      const start = (name: string): Worker => {
        const proc = spawn(
          process.execPath,
          ['--import', 'tsx', join('integration', 'eos', 'worker.ts')],
          {
            env: {
              ...process.env,
              EOS_BROKERS: BROKERS,
              EOS_GROUP: group,
              EOS_TOPIC: input,
              EOS_OUT_A: outA,
              EOS_OUT_B: outB,
              EOS_TXN_ID: `${group}-${name}`,
              EOS_CONFIG: JSON.stringify(config),
              EOS_LOG: join(dir, `${group}-${name}-${Date.now()}.log`),
            },
            stdio: ['ignore', 'pipe', 'inherit'],
          },
        );
        const exited = new Promise<number | null>((resolve) =>
          proc.on('exit', (code) => resolve(code)),
        );
        const assigned = new Promise<void>((resolve) =>
          proc.stdout.on('data', (chunk: Buffer) => {
            if (chunk.toString().includes('assigned')) resolve();
          }),
        );
        const w = { proc, exited, assigned };
        workers.push(w);
        return w;
      };
      const committedSum = async (): Promise<number> =>
        (await committedOffsets(group, input, PARTITIONS)).reduce<number>(
          (a, o) => a + (o ?? 0),
          0,
        );
      const progressBeyond = async (n: number, what: string): Promise<void> =>
        waitFor(async () => (await committedSum()) > n, {
          timeoutMs: 120_000,
          what,
          intervalMs: 200,
        });

      const a = start('a');
      await progressBeyond(MESSAGES * 0.1, 'a first commits');
      await a.assigned;
      const b = start('b'); // a join: graceful rebalance
      await b.assigned;
      await progressBeyond(MESSAGES * 0.3, 'progress after b joined');
      a.proc.kill('SIGKILL'); // a crash with a transaction open
      assert.equal(await a.exited, null);
      const a2 = start('a'); // restarted with the same transactional.id: aborts a's leftover
      await a2.assigned;
      await progressBeyond(MESSAGES * 0.6, 'progress after the kill');
      b.proc.kill('SIGTERM'); // a graceful stop
      assert.equal(await b.exited, 0, 'graceful stop exits 0');
      await waitFor(
        async () => {
          const c = await committedOffsets(group, input, PARTITIONS);
          return c.every((o, p) => o === ends[p]);
        },
        { timeoutMs: 180_000, what: 'committed offsets at the end of the input', intervalMs: 250 },
      );
      a2.proc.kill('SIGTERM');
      assert.equal(await a2.exited, 0);

      const committedRecords = [
        ...(await readTopic(outA, OUT_PARTITIONS, 'read_committed')),
        ...(await readTopic(outB, OUT_PARTITIONS, 'read_committed')),
      ];
      const uncommitted = [
        ...(await readTopic(outA, OUT_PARTITIONS, 'read_uncommitted')),
        ...(await readTopic(outB, OUT_PARTITIONS, 'read_uncommitted')),
      ];
      const seen = new Map<string, number>();
      for (const v of committedRecords) seen.set(v, (seen.get(v) ?? 0) + 1);
      const expected: string[] = [];
      for (let p = 0; p < PARTITIONS; p++) {
        for (let o = 0; o < (ends[p] ?? 0); o++) {
          for (let i = 0; i < fanOut(o, p); i++) expected.push(`${p}:${o}:${i}`);
        }
      }
      const lost = expected.filter((v) => !seen.has(v)).length;
      const duplicated = [...seen.values()].filter((n) => n > 1).length;
      console.log(
        `      ${protocol}: inputs=${MESSAGES} outputs=${expected.length} read_committed=${committedRecords.length} lost=${lost} duplicated=${duplicated} aborted seen by read_uncommitted=${uncommitted.length - committedRecords.length}`,
      );
      assert.equal(lost, 0, 'no output lost');
      assert.equal(duplicated, 0, 'no output duplicated');
      assert.equal(committedRecords.length, expected.length);
      assert.deepEqual(await committedOffsets(group, input, PARTITIONS), ends);
    });
  }
});
