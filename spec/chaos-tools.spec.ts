import assert from 'node:assert/strict';
import {
  coordinatorPartition,
  javaStringHashCode,
  kafkaAbs,
} from '../integration/chaos/coordinator';
import { judgeDuplicates } from '../integration/chaos/duplicates';
import type { WorkerFacts } from '../integration/chaos/duplicates';
import { failingAttempts, hashUnit, latencyMs } from '../integration/chaos/faults';

/** The chaos suite's pure helpers: the coordinator lookup, the injected faults, the duplicate verdict. */
describe('chaos tools', () => {
  describe('coordinatorPartition', () => {
    it("hashes like Java's String.hashCode", () => {
      // Values printed by `"…".hashCode()` on a JVM.
      assert.equal(javaStringHashCode(''), 0);
      assert.equal(javaStringHashCode('hello'), 99162322);
      assert.equal(javaStringHashCode('polygenelubricants'), -2147483648);
      assert.equal(
        javaStringHashCode(
          'chaos-broker-failure-cooperative-sticky-s20261130-group-mx4lv751-0046c0',
        ),
        -1222488549,
      );
    });

    it("takes Kafka's Utils.abs (Math.abs, 0 for MIN_VALUE), not n & 0x7fffffff, of a negative hash", () => {
      assert.equal(kafkaAbs(-2147483648), 0);
      assert.equal(kafkaAbs(-5), 5);
      // The cluster's FindCoordinator named the leader of partition 0 for this group; the bit
      // mask would have picked partition 2.
      const group = 'chaos-broker-failure-cooperative-sticky-s20261130-group-mx4lv751-0046c0';
      assert.equal(coordinatorPartition(group, 3), 0);
      assert.equal((javaStringHashCode(group) & 0x7fffffff) % 3, 2);
      assert.equal(coordinatorPartition('polygenelubricants', 50), 0);
    });
  });

  describe('faults', () => {
    it('fails the same keys for the same attempts under a seed, at about the rate asked', () => {
      const plan = { rate: 0.05, maxAttempts: 2 };
      const keys = Array.from({ length: 20_000 }, (_, i) => `m-${i}`);
      const counts = keys.map((k) => failingAttempts(7, k, plan));
      assert.deepEqual(
        keys.map((k) => failingAttempts(7, k, plan)),
        counts,
      );
      const failing = counts.filter((n) => n > 0);
      assert.ok(failing.length > 800 && failing.length < 1200, `${failing.length} of 20000`);
      assert.ok(failing.every((n) => n === 1 || n === 2));
      assert.ok(failing.some((n) => n === 1) && failing.some((n) => n === 2));
      assert.notDeepEqual(
        keys.map((k) => failingAttempts(8, k, plan)),
        counts,
      );
    });

    it('sleeps within each latency profile, tail included', () => {
      assert.equal(latencyMs(0, 'heavy'), 0);
      assert.ok(latencyMs(0.979, 'heavy') <= 20);
      assert.ok(latencyMs(0.98, 'heavy') >= 50);
      assert.ok(latencyMs(0.999999, 'heavy') <= 300);
      assert.ok(latencyMs(0.94, 'default') <= 5);
      assert.ok(latencyMs(0.96, 'default') >= 20);
      for (let i = 0; i < 1000; i++) assert.ok(hashUnit(`k${i}`) >= 0 && hashUnit(`k${i}`) < 1);
    });
  });
  describe('judgeDuplicates', () => {
    /** A graceful worker; `failed`: partitions whose final commit it saw fail. */
    const worker = (failed: number[] = [], commits: Record<number, number> = {}): WorkerFacts => ({
      abrupt: false,
      failedCommits: new Set(failed),
      lostPartitions: new Set(),
      lastCommit: (p) => commits[p] ?? -1,
    });

    it('judges a processing by the loss of the ownership it ran in, not by a later ownership of the same worker', () => {
      // The CI case: w processed 4@111 in an ownership that was lost (+16791, lost at +19332),
      // owned partition 4 again later and committed 672 then; v redid 4@111 after the loss.
      const w: WorkerFacts = {
        abrupt: false,
        failedCommits: new Set(),
        lostPartitions: new Set([4]),
        lastCommit: (p) => (p === 4 ? 672 : -1),
        lostDuring: (p, at) => p === 4 && at >= 15_000 && at <= 19_332,
      };
      const facts = new Map([
        ['w', w],
        ['v', worker()],
      ]);
      const judge = (atW: number, misbehaves = true) =>
        judgeDuplicates(
          new Map([
            [
              '4@111',
              [
                { worker: 'w', at: atW },
                { worker: 'v', at: 40_804 },
              ],
            ],
          ]),
          (x) => facts.get(x)!,
          new Set(),
          misbehaves,
        );
      const v = judge(16_791);
      assert.deepEqual([v.explained, v.explainedBy.lost], [1, 1]);
      // Processed in the later ownership that committed past it: no loss excuses it.
      assert.equal(judge(50_000).explained, 0);
      // On a healthy broker with graceful stops a loss excuses nothing.
      assert.equal(judge(16_791, false).explained, 0);
    });

    it('needs one excused processing per duplicate, whichever order the workers started or ran in', () => {
      // The CI case: b, started later, processed 3@878 first and its final commit failed (the
      // coordinator was down); a, started earlier, took the partition over and redid it. And the
      // frozen case: the frozen worker's handlers complete after it wakes, later than the new
      // owner's processing. Either way one of the two processings is excused.
      const a = worker();
      const b = worker([3], { 3: 860 });
      const facts = new Map([
        ['a', a],
        ['b', b],
        ['c', worker()],
      ]);
      const judge = (list: { worker: string; at: number }[]) =>
        judgeDuplicates(new Map([['3@878', list]]), (w) => facts.get(w)!, new Set(), true);
      for (const list of [
        [
          { worker: 'a', at: 2000 },
          { worker: 'b', at: 1000 },
        ],
        [
          { worker: 'a', at: 1000 },
          { worker: 'b', at: 2000 },
        ],
      ]) {
        const v = judge(list);
        assert.deepEqual(
          { duplicates: v.duplicates, explained: v.explained },
          { duplicates: 1, explained: 1 },
        );
      }
      // Two graceful workers: nothing explains it, and the verdict lists them in time order.
      const blamed = judge([
        { worker: 'c', at: 2000 },
        { worker: 'a', at: 1000 },
      ]);
      assert.equal(blamed.explained, 0);
      assert.deepEqual(
        blamed.unexplained.map((u) => [u.partition, u.offset, u.list.map((x) => x.worker)]),
        [[3, 878, ['a', 'c']]],
      );
      // Three processings need two excused ones.
      const thrice = judge([
        { worker: 'b', at: 1000 },
        { worker: 'a', at: 2000 },
        { worker: 'c', at: 3000 },
      ]);
      assert.equal(thrice.unexplained.length, 1);
    });

    it('excuses a failed commit only where the world misbehaves, and only after the last confirmed one', () => {
      const z = worker([1], { 1: 50 });
      const facts = (w: string): WorkerFacts => (w === 'z' ? z : worker());
      const processings = new Map([
        [
          '1@49',
          [
            { worker: 'z', at: 1 },
            { worker: 'y', at: 2 },
          ],
        ],
        [
          '1@50',
          [
            { worker: 'z', at: 1 },
            { worker: 'y', at: 2 },
          ],
        ],
      ]);
      const misbehaving = judgeDuplicates(processings, facts, new Set(), true);
      // 1@49 lies below z's confirmed commit of 50: its redo is not explained by the failure.
      assert.deepEqual(
        misbehaving.unexplained.map((u) => u.offset),
        [49],
      );
      const healthy = judgeDuplicates(processings, facts, new Set(), false);
      assert.deepEqual(
        healthy.unexplained.map((u) => u.offset),
        [49, 50],
      );
      // A crash explains what came after the last confirmed commit, on a healthy broker too; a
      // stuck handler's late completion is explained whatever the worker.
      const crashed = judgeDuplicates(
        processings,
        (w) => (w === 'z' ? { ...z, abrupt: true } : worker()),
        new Set(['1@49']),
        false,
      );
      assert.deepEqual(crashed, {
        duplicates: 2,
        explained: 2,
        explainedBy: { abrupt: 1, lost: 0, failedCommit: 0, stuck: 1 },
        unexplained: [],
      });
    });

    it('with failedCommitsExcuse off (a follower of the offsets partition killed), only a lost partition excuses, counted as such', () => {
      const failed = worker([1]);
      const lost: WorkerFacts = { ...worker(), lostPartitions: new Set([2]) };
      const facts = (w: string): WorkerFacts =>
        w === 'failed' ? failed : w === 'lost' ? lost : worker();
      const processings = new Map([
        [
          '1@7',
          [
            { worker: 'failed', at: 1 },
            { worker: 'y', at: 2 },
          ],
        ],
        [
          '2@7',
          [
            { worker: 'lost', at: 1 },
            { worker: 'y', at: 2 },
          ],
        ],
      ]);
      const strict = judgeDuplicates(processings, facts, new Set(), true, {
        failedCommitsExcuse: false,
      });
      assert.deepEqual(
        strict.unexplained.map((u) => `${u.partition}@${u.offset}`),
        ['1@7'],
      );
      assert.deepEqual(strict.explainedBy, { abrupt: 0, lost: 1, failedCommit: 0, stuck: 0 });
      const lenient = judgeDuplicates(processings, facts, new Set(), true);
      assert.deepEqual(lenient.explainedBy, { abrupt: 0, lost: 1, failedCommit: 1, stuck: 0 });
    });
  });
});
