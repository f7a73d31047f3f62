/**
 * The revoke protocol driven directly (revoke(ctx, host)), its lost probe a promise the test
 * answers. spec/revoke-protocol.spec.ts covers the same protocol through the consumer.
 */
import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import type { KafkaMessage, ReactiveConsumerOptions } from '../../lib';
import { PartitionControl } from '../../lib/internal/partition/partition-control';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import { lostOnArrival, revoke } from '../../lib/internal/rebalance/revoke-protocol';
import type { RevokeContext } from '../../lib/internal/rebalance/revoke-protocol';
import { rebalanceParts } from '../helpers/rebalance-parts';
import type { FakeOptions } from '../fakes/fake-consumer';
import { clientOverFake } from '../helpers/client';
import { until } from '../helpers/harness';

const E = Kafka.CODES.ERRORS;
const T = 'orders';
const tp = (partition: number) => ({ topic: T, partition });

function setup(options: Partial<ReactiveConsumerOptions> = {}, fakeOptions: FakeOptions = {}) {
  const { client, fake, settings, logger } = clientOverFake(
    {
      topicConfig: { 'auto.offset.reset': 'earliest' },
      commitIntervalMs: 1,
      commitTimeoutMs: 200,
      drainTimeoutMs: 10_000,
      ...options,
    },
    fakeOptions,
  );
  (fake() as unknown as { connected: boolean }).connected = true;
  /** What the protocol did, in order: its events and its unassign calls. */
  const timeline: string[] = [];
  /** The offsets the broker held when the protocol unassigned. */
  let committedAtUnassign: Map<string, number> | undefined;
  const parts = rebalanceParts(
    { client, settings, logger },
    {
      onUnassign: () => {
        timeline.push('unassign');
        committedAtUnassign = new Map(fake().commits);
      },
      onEvent: (e) => timeline.push(e.type),
    },
  );
  const { conditions, assignments, events, lifecycle, shutdown } = parts;
  const revokeParts = {
    settings,
    logger,
    commits: parts.committer,
    lifecycle,
    conditions,
    shutdown,
    hook: parts.revokeHook,
  };
  /** The revoke protocol, then its outcome applied, as the coordinator runs them. */
  const run = async (ctx: RevokeContext): Promise<void> => {
    lifecycle.conclude(ctx, lostOnArrival(ctx) ?? (await revoke(ctx, revokeParts)));
  };
  let polling = true;
  const loop = (async () => {
    while (polling) await client.consume(10, 1);
  })();
  const own = (partition: number): PartitionControl => {
    const c = new PartitionControl(T, partition, 1, tpKey(T, partition), (x) => {
      assignments.acked(x);
      conditions.changed();
    });
    assignments.take(c);
    return c;
  };
  const message = (c: PartitionControl, offset: number): KafkaMessage =>
    ({
      topic: T,
      partition: c.partition,
      offset,
      generation: c.generation,
      size: 1,
      signal: c.signal,
    }) as unknown as KafkaMessage;
  /**
   * Delivers offsets 0..n-1 to `c`'s pipeline and finishes all but `running`; returns the finish
   * of those (their handlers ack, and the pipeline — whose source completed — completes).
   */
  const deliver = (c: PartitionControl, n: number, running: number[] = []): (() => void) => {
    c.messages$.subscribe();
    const held: KafkaMessage[] = [];
    for (let o = 0; o < n; o++) {
      const m = message(c, o);
      c.push(m);
      if (running.includes(o)) held.push(m);
      else c.ack(m);
    }
    return () => {
      for (const m of held) c.ack(m);
      if (c.state !== 'active') c.pipelineDone();
    };
  };
  let answerProbe!: (lost: boolean | undefined) => void;
  const lostProbe = new Promise<boolean | undefined>((r) => (answerProbe = r));
  const context = (
    controls: PartitionControl[],
    extra: Partial<RevokeContext> = {},
  ): RevokeContext => ({
    partitions: controls.map((c) => tp(c.partition)),
    controls,
    protocol: 'EAGER',
    generation: 2,
    startedAt: Date.now(),
    handedOver: true,
    groupInstanceId: undefined,
    announcedLost: undefined,
    lostProbe,
    ...extra,
  });
  return {
    run,
    fake,
    assignments,
    conditions,
    timeline,
    events,
    committedAtUnassign: () => committedAtUnassign,
    own,
    deliver,
    context,
    answerProbe: (lost: boolean | undefined) => answerProbe(lost),
    /** A close begins whose revoke deadline (Shutdown.revokeBy) is `at`. */
    closeBy: (at: number) => {
      const now = Date.now();
      shutdown.begin(now, Math.ceil(((at - now) * 5) / 4));
    },
    commits: () =>
      fake()
        .ops()
        .filter((o) => o.startsWith('commit(')),
    stop: async () => {
      polling = false;
      await loop;
    },
  };
}

describe('revoke protocol (unit)', () => {
  let stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(stops.map((s) => s()));
    stops = [];
  });
  const world = (...args: Parameters<typeof setup>) => {
    const s = setup(...args);
    stops.push(s.stop);
    return s;
  };

  it('ends the streams, drains, commits (confirmed), unassigns, then says revoked', async () => {
    const s = world();
    const c = s.own(0);
    const finish = s.deliver(c, 3, [2]);
    const done = s.run(s.context([c]));
    assert.deepEqual(s.timeline, ['revoking']);
    assert.equal(c.state, 'ending', 'no new messages once revoking');
    s.answerProbe(false);
    await until(() => s.conditions.waiting > 0, 'the drain waiting');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(s.timeline, ['revoking'], 'waits for the handler in flight');
    finish();
    await done;
    assert.deepEqual(s.timeline, ['revoking', 'drained', 'committed', 'unassign', 'revoked']);
    assert.equal(s.committedAtUnassign()?.get(`${T}[0]`), 3, 'confirmed before the unassign');
    const drained = s.events[1];
    assert.ok(drained?.type === 'drained');
    assert.equal(drained.inFlight, 1);
    assert.equal(drained.timedOut, false);
    const committed = s.events[2];
    assert.ok(committed?.type === 'committed');
    assert.deepEqual(committed.results, [
      { topic: T, partition: 0, status: 'committed', offset: 3 },
    ]);
    assert.equal(c.state, 'released');
    assert.equal(s.assignments.get(c.key), undefined, 'forgotten');
  });

  it('waits for a stream a seek replaced whose aborted handlers still run', async () => {
    const s = world();
    const old = s.own(0);
    const finishOld = s.deliver(old, 1, [0]);
    old.fence('seek to 5');
    const fresh = new PartitionControl(T, 0, 1, old.key, () => s.conditions.changed());
    s.assignments.replace(old, fresh);
    s.answerProbe(false);
    const done = s.run(s.context([fresh]));
    await until(() => s.conditions.waiting > 0, 'the drain waiting');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(s.timeline, ['revoking'], 'the retired stream still runs');
    finishOld();
    s.conditions.changed();
    await done;
    assert.deepEqual(s.timeline, ['revoking', 'drained', 'committed', 'unassign', 'revoked']);
  });

  it('says a static member’s local revoke at close did not hand the partitions over', async () => {
    const s = world();
    const c = s.own(0);
    s.answerProbe(false);
    await s.run(s.context([c], { handedOver: false, groupInstanceId: 'member-1' }));
    const revoked = s.events.at(-1);
    assert.ok(revoked?.type === 'revoked');
    assert.equal(revoked.handedOver, false);
  });

  describe('lost', () => {
    it('by announcement: nothing committed, handlers aborted, released at once', async () => {
      const s = world();
      const c = s.own(0);
      s.deliver(c, 5, [4]);
      await s.run(s.context([c], { announcedLost: 'max.poll.interval.ms exceeded' }));
      assert.deepEqual(s.timeline, ['unassign', 'lost']);
      const lost = s.events[0];
      assert.ok(lost?.type === 'lost');
      assert.match(lost.reason, /max\.poll/);
      assert.equal(c.signal.aborted, true);
      assert.deepEqual(s.commits(), []);
      assert.equal(s.assignments.get(c.key), undefined);
    });

    it('by the probe: handlers aborted at once, nothing committed, long before the drain deadline', async () => {
      const s = world({ drainTimeoutMs: 60_000 });
      const c = s.own(0);
      s.deliver(c, 5, [4]); // 0..3 processed: 4 would be committable
      const startedAt = Date.now();
      const done = s.run(s.context([c]));
      s.answerProbe(true);
      await done;
      assert.ok(Date.now() - startedAt < 2000, 'did not wait for the drain');
      assert.deepEqual(s.timeline, ['revoking', 'unassign', 'lost']);
      assert.equal(c.signal.aborted, true, 'its handler is aborted');
      assert.deepEqual(s.commits(), [], 'nothing committed');
    });

    it('by the probe answered just after the drain ended', async () => {
      const s = world();
      const c = s.own(0);
      const finish = s.deliver(c, 2, [1]);
      const done = s.run(s.context([c]));
      await until(() => s.conditions.waiting > 0, 'the drain waiting');
      finish(); // drained; the probe's answer comes with the next poll
      setImmediate(() => s.answerProbe(true));
      await done;
      assert.deepEqual(s.timeline, ['revoking', 'unassign', 'lost']);
      assert.deepEqual(s.commits(), []);
    });

    it('by a refused final commit: reported committed with status lost, unassigned, then lost', async () => {
      const s = world({}, { commitResult: () => E.ERR_ILLEGAL_GENERATION });
      const c = s.own(0);
      s.deliver(c, 3);
      s.answerProbe(false);
      await s.run(s.context([c]));
      assert.deepEqual(s.timeline, ['revoking', 'drained', 'committed', 'unassign', 'lost']);
      const committed = s.events[2];
      assert.ok(committed?.type === 'committed');
      assert.equal(committed.results[0]?.status, 'lost');
      assert.equal(c.signal.aborted, true, 'fenced: its late acks no longer count');
      assert.equal(s.fake().commits.get(`${T}[0]`), undefined);
      assert.equal(c.lastCommitted, undefined);
    });
  });

  describe('drain deadline', () => {
    it('fences the stragglers at the deadline and commits what is contiguous', async () => {
      const s = world({ drainTimeoutMs: 400, commitTimeoutMs: 100 });
      const c = s.own(0);
      const finish = s.deliver(c, 5, [2]); // 0, 1, 3, 4 done; 2 hangs
      s.answerProbe(false);
      const startedAt = Date.now();
      await s.run(s.context([c], { startedAt }));
      assert.ok(Date.now() - startedAt < 2000);
      assert.deepEqual(s.timeline, ['revoking', 'drained', 'committed', 'unassign', 'revoked']);
      const drained = s.events[1];
      assert.ok(drained?.type === 'drained');
      assert.equal(drained.timedOut, true);
      assert.equal(drained.stragglers, 1);
      assert.equal(c.signal.aborted, true, 'the straggler is aborted');
      assert.deepEqual(s.commits(), [`commit(${T}[0]@2)`], 'up to the straggler, not past it');
      assert.equal(s.committedAtUnassign()?.get(`${T}[0]`), 2);
      finish(); // the straggler returns late: it never counts
      assert.equal(c.ledger.committable(), 2);
      assert.equal(s.commits().length, 1);
    });

    it('ends the drain sooner when a close brings the deadline forward, and still commits before it', async () => {
      const s = world({ drainTimeoutMs: 60_000, commitTimeoutMs: 200 });
      const c = s.own(0);
      s.deliver(c, 4, [3]);
      s.answerProbe(false);
      const done = s.run(s.context([c]));
      await until(() => s.conditions.waiting > 0, 'the drain waiting');
      const closeAt = Date.now() + 400;
      s.closeBy(closeAt);
      await done;
      assert.ok(
        Date.now() < closeAt + 300,
        'finished around the close deadline, not the drain one',
      );
      const drained = s.events[1];
      assert.ok(drained?.type === 'drained' && drained.timedOut);
      assert.equal(s.committedAtUnassign()?.get(`${T}[0]`), 3, 'the final commit made it');
      const committed = s.events[2];
      assert.ok(committed !== undefined && committed.at <= closeAt, 'committed before the close');
      assert.deepEqual(s.timeline, ['revoking', 'drained', 'committed', 'unassign', 'revoked']);
    });
  });
});
