import assert from 'node:assert/strict';
import { committedOffsets, waitFor } from './helpers/kafka';
import {
  EOS_PROTOCOLS,
  prepareEos,
  progressBeyond,
  startWorker,
  useEosWorkers,
  verdict,
} from './eos/scenario';
import type { EosWorker } from './eos/scenario';

const PARTITIONS = 6;
const OUT_PARTITIONS = 3;

describe('exactly once under producer queue pressure: processTransactional() on the real broker', function () {
  this.timeout(300_000);
  const workers = useEosWorkers();

  /**
   * A tiny producer queue (8 records) and five records per input: produce() refuses with
   * QUEUE_FULL part-way through many inputs' records, while transactions commit every 50 ms, a
   * member joins and two are SIGKILLed. An input's records and its offset must always share a
   * transaction: a read_committed reader sees each input's five records exactly once.
   */
  const PRESSURE_MESSAGES = 1800;
  const pressure = {
    records: 5,
    maxMs: 50,
    producerConfig: { 'queue.buffering.max.messages': 8 },
  };
  for (const [protocol, config] of EOS_PROTOCOLS) {
    it(`${protocol}: under producer queue pressure (QUEUE_FULL mid-input) with a join and SIGKILLs, every input's five records exactly once`, async () => {
      const { topics, ends } = await prepareEos(
        `eos-queue-${protocol}`,
        PARTITIONS,
        OUT_PARTITIONS,
        PRESSURE_MESSAGES,
      );
      const start = (name: string): EosWorker =>
        startWorker(topics, name, config as Record<string, unknown>, workers, pressure);
      const progress = (n: number, what: string): Promise<void> =>
        progressBeyond(topics, PARTITIONS, n, what);
      const a = start('a');
      await a.assigned;
      await progress(PRESSURE_MESSAGES * 0.15, 'a first commits');
      const b = start('b');
      await b.assigned;
      await progress(PRESSURE_MESSAGES * 0.35, 'progress after b joined');
      a.proc.kill('SIGKILL');
      assert.equal(await a.exited, null);
      const a2 = start('a');
      await a2.assigned;
      await progress(PRESSURE_MESSAGES * 0.6, 'progress after the kill of a');
      b.proc.kill('SIGKILL'); // its open transaction ends at transaction.timeout.ms
      assert.equal(await b.exited, null);
      await waitFor(
        async () => {
          const c = await committedOffsets(topics.group, topics.input, PARTITIONS);
          return c.every((o, p) => o === ends[p]);
        },
        { timeoutMs: 180_000, what: 'committed offsets at the end of the input', intervalMs: 250 },
      );
      a2.proc.kill('SIGTERM');
      assert.equal(await a2.exited, 0);
      const v = await verdict(topics, PARTITIONS, OUT_PARTITIONS, ends, pressure.records);
      console.log(
        `      ${protocol} (queue pressure): inputs=${PRESSURE_MESSAGES} outputs=${v.expected} read_committed=${v.readCommitted} lost=${v.lost} duplicated=${v.duplicated} aborted seen by read_uncommitted=${v.abortedSeen} killed member's open transaction ended ${v.openTransactionMs} ms after the input was committed`,
      );
      assert.equal(v.lost, 0, 'no output lost');
      assert.equal(v.duplicated, 0, 'no output duplicated');
      assert.equal(v.readCommitted, v.expected);
      assert.deepEqual(await committedOffsets(topics.group, topics.input, PARTITIONS), ends);
    });
  }
});
