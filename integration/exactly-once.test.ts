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

describe('exactly once: processTransactional() on the real broker', function () {
  this.timeout(300_000);
  const workers = useEosWorkers();

  for (const [protocol, config] of EOS_PROTOCOLS) {
    it(`${protocol}: every input's records exactly once across a join, a SIGKILL + restart and a graceful stop; offsets at the end`, async () => {
      const { topics, ends } = await prepareEos(
        `eos-${protocol}`,
        PARTITIONS,
        OUT_PARTITIONS,
        MESSAGES,
      );
      const start = (name: string): EosWorker =>
        startWorker(topics, name, config as Record<string, unknown>, workers);
      const progress = (n: number, what: string): Promise<void> =>
        progressBeyond(topics, PARTITIONS, n, what);

      const a = start('a');
      await progress(MESSAGES * 0.1, 'a first commits');
      await a.assigned;
      const b = start('b'); // a join: graceful rebalance
      await b.assigned;
      await progress(MESSAGES * 0.3, 'progress after b joined');
      a.proc.kill('SIGKILL'); // a crash with a transaction open
      assert.equal(await a.exited, null);
      const a2 = start('a'); // restarted with the same transactional.id: aborts a's leftover
      await a2.assigned;
      await progress(MESSAGES * 0.6, 'progress after the kill');
      b.proc.kill('SIGTERM'); // a graceful stop
      assert.equal(await b.exited, 0, 'graceful stop exits 0');
      await waitFor(
        async () => {
          const c = await committedOffsets(topics.group, topics.input, PARTITIONS);
          return c.every((o, p) => o === ends[p]);
        },
        { timeoutMs: 180_000, what: 'committed offsets at the end of the input', intervalMs: 250 },
      );
      a2.proc.kill('SIGTERM');
      assert.equal(await a2.exited, 0);

      const v = await verdict(topics, PARTITIONS, OUT_PARTITIONS, ends);
      console.log(
        `      ${protocol}: inputs=${MESSAGES} outputs=${v.expected} read_committed=${v.readCommitted} lost=${v.lost} duplicated=${v.duplicated} aborted seen by read_uncommitted=${v.abortedSeen}`,
      );
      assert.equal(v.lost, 0, 'no output lost');
      assert.equal(v.duplicated, 0, 'no output duplicated');
      assert.equal(v.readCommitted, v.expected);
      assert.deepEqual(await committedOffsets(topics.group, topics.input, PARTITIONS), ends);
    });
  }
});
