import assert from 'node:assert/strict';
import { seededRandom } from '../helpers/random';
import { committedOffsets, waitFor } from '../helpers/kafka';
import {
  EOS_PROTOCOLS,
  prepareEos,
  progressBeyond,
  startWorker,
  useEosWorkers,
  verdict,
} from '../eos/scenario';
import type { EosWorker } from '../eos/scenario';
import { BASE_SEED } from './seeds';

/**
 * Exactly once under chaos: three processTransactional() workers on a 12-partition input, 1–3
 * records per input to two output topics, restarted eight times in a seeded order — each stop a
 * SIGKILL (a crash with a transaction open) or a SIGTERM (graceful), every restart with the same
 * transactional.id — under eager, cooperative-sticky and KIP-848. A read_committed reader must see
 * every input's records exactly once and the group's offsets must end at the input's end; the
 * aborted records a read_uncommitted reader sees are counted.
 */
const PARTITIONS = 12;
const OUT_PARTITIONS = 3;
const MESSAGES = 12_000;
const SLOTS = 3;
const RESTARTS = 8;

describe('exactly-once chaos (real broker)', function () {
  this.timeout(600_000);
  const workers = useEosWorkers();

  for (const [protocol, config] of EOS_PROTOCOLS) {
    it(`${protocol}: ${RESTARTS} seeded restarts (SIGKILL and SIGTERM) lose and duplicate nothing; offsets at the end (seed ${BASE_SEED})`, async () => {
      const random = seededRandom(BASE_SEED + protocol.length);
      const { topics, ends } = await prepareEos(
        `eos-chaos-${protocol}`,
        PARTITIONS,
        OUT_PARTITIONS,
        MESSAGES,
      );
      const slots: EosWorker[] = [];
      for (let s = 0; s < SLOTS; s++) {
        slots.push(startWorker(topics, `w${s}`, config as Record<string, unknown>, workers));
        await slots[s]!.assigned;
      }
      const stops: string[] = [];
      for (let r = 0; r < RESTARTS; r++) {
        await progressBeyond(
          topics,
          PARTITIONS,
          Math.floor((MESSAGES * (r + 1)) / (RESTARTS + 3)),
          `progress before restart ${r + 1}`,
        );
        const s = Math.floor(random() * SLOTS);
        // At least every other stop is a crash, and the second one graceful (else, for one seed in
        // 16, every stop is a crash and the graceful path is never walked).
        const coin = random() < 0.5;
        const kill = r % 2 === 0 || (r !== 1 && coin);
        const w = slots[s]!;
        w.proc.kill(kill ? 'SIGKILL' : 'SIGTERM');
        const code = await w.exited;
        stops.push(`${kill ? 'KILL' : 'TERM'} w${s}`);
        if (!kill) assert.equal(code, 0, `w${s}'s graceful stop exits 0`);
        slots[s] = startWorker(topics, `w${s}`, config as Record<string, unknown>, workers);
        await slots[s]!.assigned;
      }
      await waitFor(
        async () =>
          (await committedOffsets(topics.group, topics.input, PARTITIONS)).every(
            (o, p) => o === ends[p],
          ),
        { timeoutMs: 240_000, what: 'committed offsets at the end of the input', intervalMs: 250 },
      );
      for (const w of slots) w.proc.kill('SIGTERM');
      for (const w of slots) assert.equal(await w.exited, 0, 'final graceful stops exit 0');
      const v = await verdict(topics, PARTITIONS, OUT_PARTITIONS, ends);
      console.log(
        `      ${protocol}: inputs=${MESSAGES} outputs=${v.expected} read_committed=${v.readCommitted} lost=${v.lost} duplicated=${v.duplicated} aborted seen by read_uncommitted=${v.abortedSeen} stops=${stops.join(',')}`,
      );
      assert.ok(stops.some((s) => s.startsWith('KILL')) && stops.some((s) => s.startsWith('TERM')));
      assert.equal(v.lost, 0, 'no output lost');
      assert.equal(v.duplicated, 0, 'no output duplicated');
      assert.equal(v.readCommitted, v.expected);
      assert.ok(v.committedAtEnd, 'committed offsets at the input end');
    });
  }
});
