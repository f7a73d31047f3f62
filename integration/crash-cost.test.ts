import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import { BROKERS, committedOffsets, highWatermarks, uniqueName, waitFor } from './helpers/kafka';
import {
  EOS_PROTOCOLS,
  feedInput,
  prepareEos,
  progressBeyond,
  startWorker,
  useEosWorkers,
  verdict,
} from './eos/scenario';
import type { EosRun, EosTopics, EosWorker } from './eos/scenario';

/**
 * The cost of a crash (docs/exactly-once.md), measured on the real broker: a processTransactional()
 * worker (maxMs 1 s, so a transaction is nearly always open; transaction.timeout.ms 15 s) is
 * SIGKILLed while its input keeps growing, and the time until the last stable offset of every
 * output partition passes what the killed worker had written (a read_committed reader sees past
 * its open transaction again) is measured:
 *
 * - random id (the default without a stable identity), restarted at once: the open transaction
 *   ends only when the broker aborts it, roughly transaction.timeout.ms after its first record
 *   (plus up to transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by default);
 * - stable id (`instanceId`), restarted after 3 s: the restart's initTransactions fences the old
 *   epoch and aborts it at once — long before transaction.timeout.ms.
 *
 * Asserted: that causal order with generous bounds (no wall-clock performance beyond it), and
 * exactly once in both runs. The figures are printed.
 */
const PARTITIONS = 3;
const OUT_PARTITIONS = 3;
const TXN_TIMEOUT_MS = 15_000;
const MAX_MS = 1000;
const RESTART_DELAY_MS = 3000;
/** The broker's scan for timed-out transactions (its default). */
const CLEANUP_INTERVAL_MS = 10_000;

/** Watermarks of the outputs at both isolation levels, by two long-lived clients. */
class Watermarks {
  private constructor(
    private readonly clients: Record<'read_committed' | 'read_uncommitted', Kafka.KafkaConsumer>,
  ) {}

  static async connect(): Promise<Watermarks> {
    const make = async (
      isolation: 'read_committed' | 'read_uncommitted',
    ): Promise<Kafka.KafkaConsumer> => {
      const c = new Kafka.KafkaConsumer(
        {
          'bootstrap.servers': BROKERS,
          'group.id': uniqueName('lso'),
          'isolation.level': isolation,
        },
        {},
      );
      await new Promise<void>((resolve, reject) =>
        c.connect({ timeout: 15_000 }, (err) => (err ? reject(err) : resolve())),
      );
      return c;
    };
    return new Watermarks({
      read_committed: await make('read_committed'),
      read_uncommitted: await make('read_uncommitted'),
    });
  }

  /** One offset per output partition (topic by topic): the LSO (read_committed) or the high watermark. */
  async of(
    topics: readonly string[],
    isolation: 'read_committed' | 'read_uncommitted',
  ): Promise<number[]> {
    const out: number[] = [];
    for (const topic of topics) {
      for (let p = 0; p < OUT_PARTITIONS; p++) {
        out.push(await this.query(isolation, topic, p));
      }
    }
    return out;
  }

  /** A partition's watermark, asked again (up to three times) when the broker is slow to answer. */
  private async query(
    isolation: 'read_committed' | 'read_uncommitted',
    topic: string,
    partition: number,
  ): Promise<number> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await new Promise<number>((resolve, reject) =>
          this.clients[isolation].queryWatermarkOffsets(topic, partition, 10_000, (err, w) =>
            err ? reject(err) : resolve(w.highOffset),
          ),
        );
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
  }

  async close(): Promise<void> {
    for (const c of Object.values(this.clients)) {
      await new Promise<void>((resolve) => c.disconnect(() => resolve()));
    }
  }
}

interface CrashFigures {
  /** SIGKILL → every output partition's LSO at or past its high watermark at the kill. */
  readonly stallMs: number;
  /** SIGKILL → the group's committed offsets move again (the next owner committed). */
  readonly progressMs: number;
  /** Output partitions the killed worker's open transaction held back at the kill. */
  readonly held: number;
}

describe('the cost of a crash: a SIGKILLed member’s open transaction (real broker)', function () {
  this.timeout(240_000);
  const workers = useEosWorkers();

  async function crash(
    identity: 'random' | 'instance',
    restartAfterMs: number,
  ): Promise<CrashFigures> {
    const { topics } = await prepareEos(`crash-${identity}`, PARTITIONS, OUT_PARTITIONS, 600);
    const feed = await feedInput(topics.input, PARTITIONS, 150);
    const run: EosRun = { identity, commitTimeoutMs: 2000, drainTimeoutMs: 8000 };
    const writing = { maxMs: MAX_MS, producerConfig: { 'transaction.timeout.ms': TXN_TIMEOUT_MS } };
    // Eager with a 6 s session: the restarted member gets the partitions once the killed one's
    // session expired.
    const config = EOS_PROTOCOLS.find(([name]) => name === 'eager')![1];
    const start = (): EosWorker =>
      startWorker(topics as EosTopics, 'w', config, workers, writing, run);
    const marks = await Watermarks.connect();
    try {
      const w = start();
      await w.assigned;
      await progressBeyond(topics, PARTITIONS, 400, 'first commits');
      const outs = [topics.outA, topics.outB];
      const committedBefore = await committedOffsets(topics.group, topics.input, PARTITIONS);
      // The kill lands while a transaction of the worker is open on the outputs (nearly always with
      // maxMs 1 s and a steady input; a loaded machine can leave it idle for a moment).
      await waitFor(
        async () => {
          const [h, l] = await Promise.all([
            marks.of(outs, 'read_uncommitted'),
            marks.of(outs, 'read_committed'),
          ]);
          return h.some((x, i) => (l[i] ?? 0) < x);
        },
        {
          timeoutMs: 20_000,
          what: 'an open transaction of the worker on the outputs',
          intervalMs: 20,
        },
      );
      w.proc.kill('SIGKILL');
      const killedAt = Date.now();
      assert.equal(await w.exited, null);
      const high = await marks.of(outs, 'read_uncommitted');
      const stable = await marks.of(outs, 'read_committed');
      const held = high.filter((h, i) => (stable[i] ?? 0) < h).length;
      assert.ok(
        held > 0,
        `the killed worker had an open transaction on the outputs (LSO ${stable} < HW ${high})`,
      );
      if (restartAfterMs > 0) await new Promise((r) => setTimeout(r, restartAfterMs));
      const w2 = start();
      let progressMs: number | undefined;
      let stallMs: number | undefined;
      await waitFor(
        async () => {
          if (stallMs === undefined) {
            const lso = await marks.of(outs, 'read_committed');
            if (lso.every((o, i) => o >= (high[i] ?? 0))) stallMs = Date.now() - killedAt;
          }
          if (progressMs === undefined) {
            const c = await committedOffsets(topics.group, topics.input, PARTITIONS);
            if (c.some((o, p) => (o ?? 0) > (committedBefore[p] ?? 0)))
              progressMs = Date.now() - killedAt;
          }
          return stallMs !== undefined && progressMs !== undefined;
        },
        {
          timeoutMs: TXN_TIMEOUT_MS + CLEANUP_INTERVAL_MS + 60_000,
          what: 'the outputs stable past the crash',
          intervalMs: 200,
        },
      );
      await feed.stop();
      const ends = await highWatermarks(topics.input, PARTITIONS);
      await waitFor(
        async () =>
          (await committedOffsets(topics.group, topics.input, PARTITIONS)).every(
            (o, p) => o === ends[p],
          ),
        { timeoutMs: 90_000, what: 'committed offsets at the end of the input', intervalMs: 250 },
      );
      w2.proc.kill('SIGTERM');
      assert.equal(await w2.exited, 0, 'graceful stop exits 0');
      const v = await verdict(topics, PARTITIONS, OUT_PARTITIONS, ends);
      assert.equal(v.lost, 0, 'no output lost');
      assert.equal(v.duplicated, 0, 'no output duplicated');
      assert.equal(v.readCommitted, v.expected);
      assert.ok(v.committedAtEnd, 'committed offsets at the input end');
      return { stallMs: stallMs!, progressMs: progressMs!, held };
    } finally {
      await marks.close();
    }
  }

  it(`a stable id's restart unblocks read_committed readers long before transaction.timeout.ms (${TXN_TIMEOUT_MS} ms); a random id's stall ends only at about that timeout`, async () => {
    const random = await crash('random', 0);
    console.log(
      `      random id, restarted at once: outputs held ${random.stallMs} ms after the SIGKILL (${random.held} output partitions held; transaction.timeout.ms ${TXN_TIMEOUT_MS}, maxMs ${MAX_MS}); group offsets moved again after ${random.progressMs} ms`,
    );
    const stable = await crash('instance', RESTART_DELAY_MS);
    console.log(
      `      stable id (instanceId), restarted after ${RESTART_DELAY_MS} ms: outputs held ${stable.stallMs} ms after the SIGKILL (${stable.held} output partitions held); group offsets moved again after ${stable.progressMs} ms`,
    );
    // The random id's transaction ends when the broker times it out: not before its timeout less
    // the age it had at the kill (at most maxMs + a commit), nor long after the timeout plus the
    // broker's scan interval.
    assert.ok(random.stallMs >= TXN_TIMEOUT_MS - MAX_MS - 4000, `random id: ${random.stallMs} ms`);
    assert.ok(
      random.stallMs <= TXN_TIMEOUT_MS + CLEANUP_INTERVAL_MS + 15_000,
      `random id: ${random.stallMs} ms`,
    );
    // The stable id's ends with the restart: not before it, and long before the timeout.
    assert.ok(stable.stallMs >= RESTART_DELAY_MS, `stable id: ${stable.stallMs} ms`);
    assert.ok(stable.stallMs < TXN_TIMEOUT_MS - MAX_MS - 4000, `stable id: ${stable.stallMs} ms`);
    assert.ok(stable.stallMs < random.stallMs);
  });
});
