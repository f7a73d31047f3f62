/**
 * An assignment librdkafka delivers while the consumer disconnects (a rejoin that was under way when
 * close() left the group). node-rdkafka refuses the assign call then, and librdkafka's close ends
 * by itself without an answer. Answering it anyway (an unassign) races with the end of that close:
 * on the real binding the call can block the main thread forever (seen once in the rebalance chaos
 * suite: a worker that never exited after SIGTERM, its last log line "assign refused while
 * closing; unassigning"). The fake records such calls (`callsRacingClose`).
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import type { KafkaMessage } from '../lib';
import { T, committed, gate, harness, tp, until } from './helpers/harness';
import type { Harness } from './helpers/harness';

describe('an assignment delivered while the consumer disconnects', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  const cases = [
    ['EAGER', [1]],
    ['EAGER', []],
    ['COOPERATIVE', [1]],
    ['COOPERATIVE', []],
  ] as const;
  for (const [protocol, given] of cases) {
    const what =
      protocol === 'EAGER'
        ? "is left to librdkafka's close (no call that could race with its end)"
        : "is answered: librdkafka's close waits for it";
    it(`${protocol}, ${given.length === 0 ? 'an empty assignment' : 'an assignment of partitions'}: ${what}; close() ends, the revoked work committed`, async () => {
      let delivered = false;
      const h: Harness = harness(
        { drainTimeoutMs: 3000, commitIntervalMs: 60_000 },
        {
          protocol,
          member: true,
          hooks: {
            call: (c) => {
              // The rejoin's answer comes from the broker while the close runs on its thread.
              if (c.op !== 'disconnect' || delivered) return;
              delivered = true;
              setImmediate(() => h.fake().rebalanceAssign(given.map(tp)));
            },
          },
        },
      );
      const slow = gate();
      let started = false;
      const done: string[] = [];
      subs.push(
        h.consumer
          .process((m: KafkaMessage) => {
            done.push(`${m.partition}@${m.offset}`);
            if (m.offset !== 2) return undefined;
            started = true;
            return slow.promise;
          })
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 4);
      h.fake().produce(T, 1, 2);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => started, 'offset 2 running');
      // A rebalance revokes the partition while its handler runs; the close comes during it.
      h.fake().rebalanceRevoke([tp(0)]);
      await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
      const closed = h.consumer.close({ timeoutMs: 10_000 });
      slow.open();
      await closed;
      assert.ok(delivered, 'the assignment was delivered during the disconnect');
      assert.deepEqual(h.fake().callsRacingClose, []);
      assert.ok(h.fake().closeEnded, "librdkafka's close ended");
      const afterDisconnect = h
        .fake()
        .calls.slice(h.fake().calls.findIndex((c) => c.op === 'disconnect'));
      const answers = afterDisconnect.filter(
        (c) => c.op === 'unassign' || c.op === 'incrementalUnassign',
      );
      assert.equal(answers.length, protocol === 'EAGER' ? 0 : 1, JSON.stringify(afterDisconnect));
      // What was handled of partition 0 (a prefix: at least up to the handler that held the
      // revoke) is committed; nothing of the refused assignment was processed or committed.
      const ofZero = done.filter((d) => d.startsWith('0@')).length;
      assert.ok(ofZero >= 3, `handled ${done.join(' ')}`);
      assert.equal(committed(h, 0), ofZero);
      assert.ok(!done.some((d) => d.startsWith('1@')), `handled ${done.join(' ')}`);
      assert.equal(committed(h, 1), undefined);
      assert.ok(
        !h.events.some((e) => e.type === 'assigned' && e.partitions.some((p) => p.partition === 1)),
      );
    });
  }
});

describe('a revoke still in flight when the consumer disconnects (the close deadline passed)', () => {
  it('never unassigns after the disconnect began unless the close waits for it (EAGER)', async () => {
    let holdCommits = false;
    const h = harness(
      { commitIntervalMs: 60_000, commitTimeoutMs: 1000 },
      { member: true, commitPlan: () => (holdCommits ? { held: true } : {}) },
    );
    let handled = 0;
    const sub = h.consumer.process(() => void (handled += 1)).subscribe();
    try {
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 3);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => handled === 3, 'all three handled');
      // The revoke's final commit gets no answer (a coordinator that does not answer): the
      // revoke outlasts the close deadline, and the consumer disconnects under it.
      holdCommits = true;
      h.fake().rebalanceRevoke([tp(0)]);
      await until(() => h.events.some((e) => e.type === 'drained'), 'drained');
      await h.consumer.close({ timeoutMs: 300 });
      assert.ok(h.fake().closeEnded, "librdkafka's close ended");
      await until(
        () => h.events.some((e) => e.type === 'revoked' || e.type === 'lost'),
        'the late revoke ended',
      );
      // (the revoke's unassign, or its skip, comes before its last event)
      assert.deepEqual(h.fake().callsRacingClose, [], JSON.stringify(h.fake().calls));
    } finally {
      sub.unsubscribe();
    }
  });
});

describe('an assignment the close finds unanswered or before any rebalance', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  for (const protocol of ['EAGER', 'COOPERATIVE'] as const) {
    it(`${protocol}: an assignment whose onAssign hook still runs when the disconnect begins is answered in time (the close ends), and none of it is processed`, async () => {
      const hook = gate();
      let hooked = false;
      const handled: number[] = [];
      const h: Harness = harness(
        {
          commitIntervalMs: 60_000,
          // What librdkafka reports before any rebalance (NONE) says nothing: the configured
          // strategy does.
          config: {
            'partition.assignment.strategy': protocol === 'EAGER' ? 'range' : 'cooperative-sticky',
          },
          onAssign: async () => {
            hooked = true;
            await hook.promise;
            return 'committed' as const;
          },
        },
        {
          protocol,
          member: true,
          hooks: {
            // The hook ends only once the binding disconnects.
            call: (c) => {
              if (c.op === 'disconnect') setImmediate(() => hook.open());
            },
          },
        },
      );
      subs.push(h.consumer.process((m: KafkaMessage) => void handled.push(m.offset)).subscribe());
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 1, 2);
      const closed = h.consumer.close({ timeoutMs: 1500 });
      await until(() => h.fake().hasUnsubscribed, 'unsubscribed');
      // A rejoin under way when the member left ends in an assignment.
      h.fake().rebalanceAssign([tp(1)]);
      await until(() => hooked, 'the hook runs');
      await closed;
      await until(() => h.fake().closeEnded, "librdkafka's close ended", 3000).catch((e) => {
        throw new Error(`${String(e)}: ${h.fake().ops().join(' ')}`);
      });
      assert.deepEqual(h.fake().callsRacingClose, []);
      // An eager close releases an unanswered assignment itself; a cooperative one needs the answer.
      if (protocol === 'COOPERATIVE') assert.deepEqual(h.fake().unanswered(), []);
      assert.deepEqual(handled, []);
      assert.equal(committed(h, 1), undefined);
    });
  }

  it('EAGER: the first assignment ever, delivered during the disconnect (a close during the first join), gets no unassign that could race with the close', async () => {
    let delivered = false;
    const h: Harness = harness(
      { commitIntervalMs: 60_000 },
      {
        protocol: 'EAGER',
        member: true,
        hooks: {
          call: (c) => {
            if (c.op !== 'disconnect' || delivered) return;
            delivered = true;
            setImmediate(() => h.fake().rebalanceAssign([tp(1)]));
          },
        },
      },
    );
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await h.consumer.close({ timeoutMs: 3000 });
    await until(() => delivered && h.fake().closeEnded, 'delivered, and the close ended');
    assert.deepEqual(h.fake().callsRacingClose, []);
    assert.ok(!h.fake().calls.some((c) => c.op === 'unassign'));
  });
});
