import assert from 'node:assert/strict';
import {
  coordinatorPartition,
  javaStringHashCode,
  kafkaAbs,
} from '../integration/chaos/coordinator';
import { failingAttempts, hashUnit, latencyMs } from '../integration/chaos/faults';

/** The chaos suite's pure helpers: the coordinator lookup and the injected faults. */
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
});
