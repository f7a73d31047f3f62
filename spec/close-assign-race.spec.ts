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

  for (const protocol of ['EAGER', 'COOPERATIVE'] as const) {
    it(`is left to librdkafka's close: no (un)assign call races with the close's end; close() ends, the revoked work committed (${protocol})`, async () => {
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
              setImmediate(() => h.fake().rebalanceAssign([tp(1)]));
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
