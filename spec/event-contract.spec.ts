import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import type { KafkaMessage, RebalanceEvent } from '../lib';
import { PartitionControl } from '../lib/internal/partition/partition-control';
import { PartitionLifecycle } from '../lib/internal/partition/lifecycle';
import type { Harness } from './helpers/harness';
import { T, committed, gate, harness, tp, until } from './helpers/harness';

/**
 * The rebalances$ contract, through the public API: every partition an `assigned` event names is
 * named by exactly one later `revoked` or `lost` event before rebalances$ completes, whatever path
 * releases it (the revoke protocol, a close at its deadline, a rebalance error, an eager
 * assignment that drops it), and a revoke's phases come in order (revoking → drained → committed →
 * revoked). Found by an adversarial review of the first version of the contract.
 */
function breaches(events: readonly RebalanceEvent[]): string[] {
  const bad: string[] = [];
  const open = new Map<number, number>();
  /** Each revoke's last phase, by its generation. */
  const phase = new Map<number, string>();
  const next: Record<string, string> = {
    drained: 'revoking',
    committed: 'drained',
    revoked: 'committed',
  };
  for (const e of events) {
    const g = e.generation;
    if (e.type === 'revoking') phase.set(g, 'revoking');
    if (e.type === 'drained' || e.type === 'committed' || e.type === 'revoked') {
      if (phase.get(g) !== next[e.type]) bad.push(`${e.type} g${g} after ${String(phase.get(g))}`);
      phase.set(g, e.type);
    }
    for (const { partition: p } of e.partitions) {
      if (e.type === 'assigned') open.set(p, (open.get(p) ?? 0) + 1);
      if (e.type === 'revoked' || e.type === 'lost') {
        const n = open.get(p) ?? 0;
        if (n === 0) bad.push(`${e.type} of ${p}: ended twice`);
        else open.set(p, n - 1);
      }
    }
  }
  for (const [p, n] of open) if (n > 0) bad.push(`${p} assigned ${n}x more than it ended`);
  return bad;
}

const show = (events: readonly RebalanceEvent[]): string =>
  events
    .map((e) => `${e.type}[${e.partitions.map((p) => p.partition).join(',')}]g${e.generation}`)
    .join(' ');

const endingOf = (h: Harness, partition: number): RebalanceEvent | undefined =>
  h.events.find(
    (e) =>
      (e.type === 'revoked' || e.type === 'lost') &&
      e.partitions.some((p) => p.partition === partition),
  );

/** librdkafka's rebalance callback with an error other than assign/revoke (an assignor failure). */
const rebalanceError = (h: Harness, partitions: number[]): void =>
  (h.fake().config.rebalance_cb as (err: unknown, a: unknown) => void)(
    { code: -1, message: 'assignor failed' },
    partitions.map(tp),
  );

describe('rebalances$: every assigned partition ends exactly once', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('a rebalance error while a revoke drains: one ending (lost), and the revoke commits nothing', async () => {
    const h = harness({ drainTimeoutMs: 3000 }, { protocol: 'COOPERATIVE' });
    const slow = gate();
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => (m.offset === 2 ? slow.promise : undefined))
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h, 0) === 2, 'commit of 2');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    rebalanceError(h, [0]);
    slow.open();
    await until(() => h.events.some((e) => e.type === 'committed'), 'the revoke to finish');
    await h.consumer.close();
    assert.deepEqual(breaches(h.events), [], show(h.events));
    assert.equal(endingOf(h, 0)?.type, 'lost');
    assert.equal(committed(h, 0), 2, 'nothing committed after the error released it');
    const r = h.consumer.metrics().rebalances;
    assert.equal(r.partitionsAssigned, r.partitionsRevoked + r.partitionsLost);
  });

  it('a rebalance error, then the revoke of the same partition: one ending, no second revoke', async () => {
    const h = harness({}, { protocol: 'COOPERATIVE' });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h, 0) === 5, 'everything committed');
    rebalanceError(h, [0]);
    h.fake().rebalanceRevoke([tp(0)]);
    await h.consumer.close();
    assert.deepEqual(breaches(h.events), [], show(h.events));
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned', 'lost'],
    );
  });

  it('eager: an assignment while a revoke drains, then one that drops the new stream: each stream ends once', async () => {
    const h = harness({ drainTimeoutMs: 3000 }, { protocol: 'EAGER' });
    const slow = gate();
    subs.push(
      h.consumer
        .process((m: KafkaMessage) =>
          m.partition === 1 && m.offset === 2 ? slow.promise : undefined,
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().produce(T, 1, 5);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => committed(h, 0) === 5 && committed(h, 1) === 2, 'commits');
    h.fake().rebalanceRevoke([tp(0), tp(1)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    h.fake().rebalanceAssign([tp(0)]); // a new stream of 0 while the old one's revoke drains
    h.fake().rebalanceAssign([tp(1)]); // drops the new stream of 0
    slow.open();
    await until(() => h.events.some((e) => e.type === 'committed'), 'the first revoke to finish');
    await h.consumer.close();
    assert.deepEqual(breaches(h.events), [], show(h.events));
  });

  it('eager: a revoke superseded by an assignment that drops its partition ends lost (nothing committed)', async () => {
    const h = harness({ drainTimeoutMs: 3000, commitIntervalMs: 60_000 }, { protocol: 'EAGER' });
    const slow = gate();
    const handled: number[] = [];
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => {
          if (m.offset === 3) return slow.promise;
          handled.push(m.offset);
          return undefined;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => handled.length === 3, '0..2 processed (nothing committed yet)');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    h.fake().rebalanceAssign([tp(1)]);
    slow.open();
    await until(() => endingOf(h, 0) !== undefined, 'the end of partition 0');
    await h.consumer.close();
    assert.equal(committed(h, 0), undefined, 'nothing committed for 0');
    assert.equal(endingOf(h, 0)?.type, 'lost', `0..2 will be redone: ${show(h.events)}`);
    assert.deepEqual(breaches(h.events), [], show(h.events));
  });

  for (const protocol of ['EAGER', 'COOPERATIVE'] as const) {
    for (const closeMs of [5, 20, 60]) {
      it(`${protocol}: close(${closeMs}) while a revoke drains a hung handler: each partition ends once, phases in order`, async () => {
        const h = harness({ drainTimeoutMs: 3000 }, { protocol });
        const slow = gate();
        subs.push(
          h.consumer
            .process(
              (m: KafkaMessage) => (m.partition === 0 && m.offset === 2 ? slow.promise : undefined),
              { partitionConcurrency: 2 },
            )
            .subscribe(),
        );
        await until(() => h.fake().isConnected(), 'connect');
        h.fake().produce(T, 0, 5);
        h.fake().produce(T, 1, 5);
        h.fake().rebalanceAssign([tp(0), tp(1)]);
        await until(() => committed(h, 1) === 5, 'partition 1 committed');
        h.fake().rebalanceRevoke(protocol === 'EAGER' ? [tp(0), tp(1)] : [tp(0)]);
        await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
        await h.consumer.close({ timeoutMs: closeMs });
        slow.open();
        assert.deepEqual(breaches(h.events), [], show(h.events));
        assert.ok(endingOf(h, 0) !== undefined && endingOf(h, 1) !== undefined, show(h.events));
      });
    }

    it(`${protocol}: a close whose deadline cuts the drain of a hung handler: revoked once, after a timed-out drain`, async () => {
      const h = harness({ drainTimeoutMs: 3000 }, { protocol });
      const slow = gate();
      const handled: number[] = [];
      subs.push(
        h.consumer
          .process(
            (m: KafkaMessage) => {
              if (m.offset === 3) return slow.promise;
              handled.push(m.offset);
              return undefined;
            },
            { partitionConcurrency: 2 },
          )
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 5);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => handled.length >= 3, '0..2 processed, 3 hangs');
      await h.consumer.close({ timeoutMs: 50 });
      slow.open();
      assert.deepEqual(breaches(h.events), [], show(h.events));
      assert.equal(endingOf(h, 0)?.type, 'revoked', show(h.events));
      const drained = h.events.find((e) => e.type === 'drained');
      assert.ok(drained?.type === 'drained' && drained.timedOut, show(h.events));
    });
  }

  it('a rebalance error does not overtake an assignment waiting for its onAssign hook', async () => {
    const hook = gate();
    const h = harness(
      {
        onAssign: async ({ partition }) => {
          if (partition === 1) await hook.promise;
          return 'committed' as const;
        },
      },
      { protocol: 'COOPERATIVE', member: true },
    );
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2);
    h.fake().produce(T, 1, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h, 0) === 2, 'partition 0 committed');
    h.fake().rebalanceAssign([tp(1)]); // waits for the hook
    await until(() => h.fake().unanswered().length === 1, 'the assign of 1 waiting');
    rebalanceError(h, [0]);
    hook.open();
    await until(() => committed(h, 1) === 3, 'partition 1 assigned and consumed');
    assert.deepEqual(h.fake().unanswered(), []);
    await h.consumer.close();
    assert.deepEqual(breaches(h.events), [], show(h.events));
  });

  for (const protocol of ['EAGER', 'COOPERATIVE'] as const) {
    it(`${protocol}: an assignment that names a partition already owned, with no revoke between, ends the old stream`, async () => {
      const h = harness({}, { protocol });
      subs.push(h.consumer.process(() => undefined).subscribe());
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 5);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(h, 0) === 5, 'everything committed');
      h.fake().rebalanceAssign(protocol === 'EAGER' ? [tp(0), tp(1)] : [tp(0)]);
      await h.consumer.close();
      assert.deepEqual(breaches(h.events), [], show(h.events));
      const r = h.consumer.metrics().rebalances;
      assert.equal(r.partitionsAssigned, r.partitionsRevoked + r.partitionsLost);
      // Everything was committed: the replaced stream leaves nothing to redo.
      assert.equal(r.partitionsLost, 0, show(h.events));
    });
  }

  it('a revoke that ends partly lost, partly revoked keeps its phases in the metrics', async () => {
    const h = harness({ drainTimeoutMs: 3000 }, { protocol: 'COOPERATIVE' });
    const slow = gate();
    const handled: string[] = [];
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => {
          if (m.partition === 1 && m.offset === 2) return slow.promise;
          handled.push(`${m.partition}@${m.offset}`);
          return undefined;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().produce(T, 1, 3);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => committed(h, 1) === 2 && committed(h, 0) === 3, 'commits');
    h.fake().rebalanceRevoke([tp(0), tp(1)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    rebalanceError(h, [1]); // releases the stream of 1 under the revoke: lost, the revoke ends it
    const openedAt = Date.now();
    await until(() => Date.now() - openedAt >= 120, 'the drain to last a while');
    slow.open();
    await until(() => endingOf(h, 0) !== undefined, 'the revoke to end');
    await h.consumer.close();
    assert.deepEqual(breaches(h.events), [], show(h.events));
    const last = h.consumer.metrics().rebalances.last;
    assert.ok(last !== undefined && last.drainMs >= 100, JSON.stringify(last));
    assert.equal(last.inFlight, 1);
  });

  it('a stream released without a revoke counts work finished out of order: lost, not revoked', () => {
    const events: RebalanceEvent[] = [];
    const lifecycle = new PartitionLifecycle({
      logger: { info: () => undefined, warn: () => undefined },
      calls: { protocol: () => 'COOPERATIVE' },
      staticInstanceId: undefined,
      events: { next: (e: RebalanceEvent) => events.push(e) },
    } as never);
    /** How a close ends a stream no revoke released (the engine's last step). */
    const endLeftover = (c: PartitionControl): void =>
      lifecycle.endUnrevoked([c], 'close deadline', 9, false, true);
    const c = new PartitionControl(T, 0, 1, `${T}[0]`, () => undefined);
    c.trackRunning();
    c.messages$.subscribe();
    const m = (offset: number) =>
      ({ topic: T, partition: 0, offset, generation: 1, size: 1 }) as unknown as KafkaMessage;
    c.push(m(5));
    c.push(m(6));
    c.handlerStarted();
    c.handlerStarted(); // 5 hangs, 6 finishes
    c.ack(m(6));
    c.handlerEnded();
    c.confirmCommitted(5); // a periodic commit of 5 (5 still unfinished)
    c.fence('consumer closed');
    c.handlerEnded(); // the aborted handler of 5 returns
    endLeftover(c);
    assert.deepEqual(
      events.map((e) => e.type),
      ['lost'],
      'offset 6 was processed and will be redone',
    );
    endLeftover(c);
    assert.equal(events.length, 1, 'a stream ends once');

    const idle = new PartitionControl(T, 1, 1, `${T}[1]`, () => undefined);
    idle.startAt(40); // a start offset known, nothing delivered: nothing to redo
    endLeftover(idle);
    assert.deepEqual(
      events.map((e) => e.type),
      ['lost', 'revoking', 'drained', 'committed', 'revoked'],
    );
  });
});
