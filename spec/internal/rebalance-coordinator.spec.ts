import assert from 'node:assert/strict';
import type { KafkaMessage, RebalanceEvent, ReactiveConsumerOptions } from '../../lib';
import type { PartitionControl } from '../../lib/internal/partition/partition-control';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import { RebalanceCoordinator } from '../../lib/internal/rebalance/rebalance-coordinator';
import type { Stage } from '../../lib/internal/rebalance/rebalance-coordinator';
import { StartPositions } from '../../lib/internal/rebalance/start-positions';
import { rebalanceParts } from '../helpers/rebalance-parts';
import type { FakeOptions } from '../fakes/fake-consumer';
import { clientOverFake } from '../helpers/client';
import { gate, until } from '../helpers/harness';

const T = 'orders';
const tp = (partition: number) => ({ topic: T, partition });

/**
 * A rebalance coordinator over real assignments, committer, flow control and start positions, on a
 * ConsumerClient over the fake (its rebalance callbacks go to the coordinator), with a poll loop
 * serving commit results and assignment-lost probes as the engine's loop does.
 */
function setup(
  options: Partial<ReactiveConsumerOptions> = {},
  fakeOptions: FakeOptions = {},
  /** Also called as each rebalance event is emitted (it may throw, as a subscriber can). */
  onEvent: (e: RebalanceEvent) => void = () => undefined,
) {
  const { client, fake, settings, logger } = clientOverFake(
    {
      topicConfig: { 'auto.offset.reset': 'earliest' },
      commitIntervalMs: 1,
      commitTimeoutMs: 500,
      drainTimeoutMs: 4000,
      ...options,
    },
    fakeOptions,
    (err, assignment) => coordinator.onRebalance(err, assignment),
  );
  (fake() as unknown as { connected: boolean }).connected = true;
  /** revokesInFlight as each event was emitted. */
  const inFlightAt: { type: string; revokes: number }[] = [];
  /** At each fetcher wake: how many assign/unassign calls librdkafka had been given. */
  const resumedAfter: number[] = [];
  const parts = rebalanceParts(
    { client, settings, logger },
    {
      onEvent: (e) => {
        inFlightAt.push({ type: e.type, revokes: coordinator.revokesInFlight });
        onEvent(e);
      },
      onWake: () =>
        resumedAfter.push(
          fake()
            .ops()
            .filter((o) => /assign/i.test(o)).length,
        ),
    },
  );
  const { assignments, events, failures, started, setStage } = parts;
  const coordinator: RebalanceCoordinator = new RebalanceCoordinator({
    settings,
    logger,
    client,
    calls: parts.calls,
    lifecycle: parts.lifecycle,
    assignments,
    startPositions: new StartPositions(client, settings, logger, undefined),
    commits: parts.committer,
    conditions: parts.conditions,
    shutdown: parts.shutdown,
    staticInstanceId: undefined,
    topics: { topicsAvailable: () => undefined },
    revokeHook: parts.revokeHook,
  });
  let polling = true;
  const loop = (async () => {
    while (polling) await client.consume(10, 1);
  })();
  /**
   * A handler of `c` that runs until the test finishes it (returns the finish: the handler acks,
   * and the pipeline, whose source completed when the stream ended, completes).
   */
  const busy = (c: PartitionControl, offset = 0): (() => void) => {
    const m = {
      topic: c.topic,
      partition: c.partition,
      offset,
      generation: c.generation,
      size: 1,
      signal: c.signal,
    } as unknown as KafkaMessage;
    c.messages$.subscribe();
    c.push(m);
    return () => {
      c.ack(m);
      if (c.state !== 'active') c.pipelineDone();
    };
  };
  /** Marks offsets 0..n-1 of `c` processed. */
  const processed = (c: PartitionControl, n: number): void => {
    for (let o = 0; o < n; o++) {
      c.ledger.deliver(o);
      c.ledger.complete(o);
    }
  };
  const owner = (partition: number): PartitionControl | undefined =>
    assignments.get(tpKey(T, partition));
  const types = (): string[] => events.map((e) => e.type);
  const ops = (prefix: string): string[] =>
    fake()
      .ops()
      .filter((o) => o.startsWith(prefix));
  return {
    coordinator,
    fake,
    events,
    types,
    ops,
    failures,
    started,
    inFlightAt,
    resumedAfter,
    assignments,
    busy,
    processed,
    owner,
    setStage: (s: Stage) => setStage(s),
    stop: async () => {
      polling = false;
      await loop;
    },
  };
}

/** An onAssign hook whose answer for each partition waits until the test opens its gate. */
function gatedHook() {
  const gates = new Map<number, ReturnType<typeof gate>>();
  const gateOf = (partition: number): ReturnType<typeof gate> => {
    let g = gates.get(partition);
    if (g === undefined) gates.set(partition, (g = gate()));
    return g;
  };
  const asked: number[] = [];
  return {
    asked,
    open: (partition: number) => gateOf(partition).open(),
    onAssign: async ({ partition }: { partition: number }) => {
      asked.push(partition);
      await gateOf(partition).promise;
      return { offset: 100 + partition };
    },
  };
}

describe('RebalanceCoordinator', () => {
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

  describe('pending assignments', () => {
    it('answers an assignment still waiting for its start offsets when a revoke covers it', async () => {
      const hook = gatedHook();
      const s = world({ onAssign: hook.onAssign });
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => hook.asked.length === 1, 'the hook asked');
      assert.deepEqual(s.ops('assign'), [], 'librdkafka waits for the assign call');
      assert.equal(s.coordinator.busy, true);
      s.fake().rebalanceRevoke([tp(0)]);
      assert.deepEqual(s.ops('assign'), [`assign(${T}[0])`], 'answered, without start offsets');
      await until(() => s.types().includes('revoked'), 'revoked');
      hook.open(0);
      await until(() => !s.coordinator.busy, 'the lookup task ended');
      assert.deepEqual(s.ops('assign'), [`assign(${T}[0])`], 'never assigned a second time');
      assert.deepEqual(s.types(), ['assigned', 'revoking', 'drained', 'committed', 'revoked']);
      assert.deepEqual(s.fake().assignments(), []);
      assert.deepEqual(s.failures, []);
    });

    it('answers an assignment still waiting for its start offsets at close, its streams ended', async () => {
      const hook = gatedHook();
      const s = world({ onAssign: hook.onAssign });
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => hook.asked.length === 1, 'the hook asked');
      s.setStage('closing');
      s.coordinator.answerPending('the consumer is closing');
      assert.deepEqual(s.ops('assign'), [`assign(${T}[0])`]);
      const c = s.owner(0);
      assert.equal(c?.state, 'ending', 'assigned while leaving: ended at once');
      assert.deepEqual(s.started, [c]);
      hook.open(0);
      await until(() => !s.coordinator.busy, 'the lookup task ended');
      assert.equal(s.ops('assign').length, 1);
    });

    it('carries an assignment waiting for its start offsets over a cooperative revoke of other partitions', async () => {
      const hook = gatedHook();
      hook.open(0);
      const s = world({ onAssign: hook.onAssign }, { protocol: 'COOPERATIVE' });
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => s.types().includes('assigned'), 'partition 0 assigned');
      s.fake().rebalanceAssign([tp(1)]);
      await until(() => hook.asked.includes(1), 'the hook asked for partition 1');
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.types().includes('revoked'), 'partition 0 revoked');
      assert.deepEqual(
        s.ops('incremental'),
        [`incrementalAssign(${T}[0])`, `incrementalUnassign(${T}[0])`],
        'the revoke of partition 0 did not answer the assignment of partition 1',
      );
      hook.open(1);
      await until(() => s.owner(1) !== undefined, 'partition 1 assigned');
      const assigned = s.events.filter((e) => e.type === 'assigned');
      const revoking = s.events.find((e) => e.type === 'revoking');
      assert.equal(assigned.length, 2);
      assert.equal(
        assigned[1]?.generation,
        revoking?.generation,
        'applied in the generation the revoke started',
      );
      assert.deepEqual(s.fake().assignments(), [{ ...tp(1), offset: 101 }], 'with its start');
      assert.equal(s.owner(1)?.ledger.committable(), 101);
    });

    it('skips an assignment overtaken by a newer generation while its start offsets were looked up', async () => {
      const hook = gatedHook();
      const s = world({ onAssign: hook.onAssign });
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => hook.asked.includes(0), 'the hook asked for partition 0');
      s.fake().rebalanceAssign([tp(1)]);
      await until(() => hook.asked.includes(1), 'the hook asked for partition 1');
      hook.open(0);
      await new Promise((r) => setImmediate(r));
      hook.open(1);
      await until(() => !s.coordinator.busy, 'both lookups ended');
      assert.deepEqual(s.ops('assign'), [`assign(${T}[1])`], 'partition 0 is no longer ours');
      assert.equal(s.owner(0), undefined);
      assert.equal(s.owner(1)?.generation, 2);
      assert.deepEqual(s.failures, []);
    });
  });

  describe('assign', () => {
    it('eager: an assignment fences and drops what it no longer contains, and replaces what it does', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0), tp(1)]);
      const [c0, c1] = [s.owner(0), s.owner(1)];
      assert.ok(c0 && c1);
      s.fake().rebalanceAssign([tp(1)]);
      assert.equal(c0.state, 'fenced');
      assert.equal(s.owner(0), undefined, 'no longer assigned');
      assert.equal(c1.state, 'fenced', 'reassigned in a newer generation');
      assert.equal(s.owner(1)?.generation, 2);
      assert.deepEqual(
        s.started.map((c) => `${c.partition}@${c.generation}`),
        ['0@1', '1@1', '1@2'],
      );
    });

    it('cooperative: an assignment adds to the partitions already owned', async () => {
      const s = world({}, { protocol: 'COOPERATIVE' });
      s.fake().rebalanceAssign([tp(0)]);
      const c0 = s.owner(0);
      s.fake().rebalanceAssign([tp(1)]);
      assert.equal(s.owner(0), c0);
      assert.equal(c0?.active, true);
      assert.deepEqual(s.ops('incremental'), [
        `incrementalAssign(${T}[0])`,
        `incrementalAssign(${T}[1])`,
      ]);
    });

    it('cooperative: asks for the fetchers to be woken after each incremental assign and unassign, never before', async () => {
      const s = world({}, { protocol: 'COOPERATIVE' });
      s.fake().rebalanceAssign([tp(0), tp(1)]);
      assert.deepEqual(s.resumedAfter, [1], 'after the incremental assign');
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.types().includes('revoked'), 'partition 0 revoked');
      assert.deepEqual(s.ops('incremental'), [
        `incrementalAssign(${T}[0],${T}[1])`,
        `incrementalUnassign(${T}[0])`,
      ]);
      assert.deepEqual(s.resumedAfter, [1, 2], 'and after the incremental unassign');
    });

    it('eager: no wake (librdkafka starts the fetchers of an assignment, which wakes them)', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0), tp(1)]);
      s.fake().rebalanceRevoke([tp(0), tp(1)]);
      await until(() => s.types().includes('revoked'), 'revoked');
      assert.deepEqual(s.resumedAfter, []);
    });
  });

  describe('stale unassign', () => {
    it('eager: skips the unassign of a revoke overtaken by a newer assignment', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0)]);
      const finish = s.busy(s.owner(0)!);
      s.fake().rebalanceRevoke([tp(0)]);
      s.fake().rebalanceAssign([tp(1)]); // a newer generation while the revoke drains
      finish();
      await until(() => s.coordinator.revokesInFlight === 0, 'the revoke to finish');
      assert.deepEqual(s.ops('unassign'), [], 'the newer assignment stays');
      // Nothing was committed for the superseded stream: its revoke ends it lost (once), not revoked.
      assert.deepEqual(s.types(), [
        'assigned',
        'revoking',
        'assigned',
        'drained',
        'committed',
        'lost',
      ]);
      assert.deepEqual(s.fake().assignments(), [tp(1)]);
      assert.equal(s.owner(1)?.active, true);
    });

    it('cooperative: unassigns only the partitions still assigned and not re-owned by a newer generation', async () => {
      const s = world({}, { protocol: 'COOPERATIVE' });
      s.fake().rebalanceAssign([tp(0), tp(1), tp(2)]);
      s.processed(s.owner(1)!, 4);
      const finish = s.busy(s.owner(0)!);
      s.fake().rebalanceRevoke([tp(0), tp(1), tp(2)]);
      await until(() => s.types().includes('revoking'), 'revoking');
      // Meanwhile partition 1 is assigned again in a newer generation, and librdkafka dropped 2.
      s.fake().rebalanceAssign([tp(1)]);
      s.fake().incrementalUnassign([tp(2)]);
      const newer = s.owner(1);
      assert.equal(newer?.generation, 3);
      finish();
      await until(() => s.types().includes('revoked'), 'revoked');
      assert.deepEqual(s.ops('incrementalUnassign'), [
        `incrementalUnassign(${T}[2])`,
        `incrementalUnassign(${T}[0])`,
      ]);
      assert.equal(s.owner(1), newer, 'the newer stream still owns partition 1');
      assert.equal(newer?.active, true);
      assert.ok(
        s
          .fake()
          .assignments()
          .some((a) => a.partition === 1),
      );
      const committed = s.events.find((e) => e.type === 'committed');
      assert.ok(committed?.type === 'committed');
      const p1 = committed.results.find((r) => r.partition === 1);
      assert.equal(p1?.status, 'lost', 'not committed for a partition a newer assignment owns');
      assert.deepEqual(s.ops(`commit(${T}[1]`), [], 'nothing sent for partition 1');
      // The stream still owned ends revoked; the two nothing was committed for end lost.
      const endings = s.events
        .filter((e) => e.type === 'revoked' || e.type === 'lost')
        .map((e) => `${e.type}:${e.partitions.map((p) => p.partition).join(',')}`);
      assert.deepEqual(endings, ['revoked:0,2', 'lost:1']);
    });
  });

  describe('revokes', () => {
    it('leaves a revoke of partitions already being revoked to the revoke in flight', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0), tp(1)]);
      s.processed(s.owner(1)!, 2);
      const finish = s.busy(s.owner(0)!);
      s.fake().rebalanceRevoke([tp(0)]);
      s.fake().rebalanceRevoke([tp(0)]);
      assert.equal(s.coordinator.revokesInFlight, 1, 'the duplicate started nothing');
      s.fake().rebalanceRevoke([tp(0), tp(1)]); // an unsubscribe covering both
      assert.equal(s.coordinator.revokesInFlight, 2);
      const revoking = s.events.filter((e) => e.type === 'revoking');
      assert.deepEqual(
        revoking.map((e) => e.partitions.map((p) => p.partition)),
        [[0], [1]],
        'the second revoke releases only partition 1',
      );
      await until(() => s.events.filter((e) => e.type === 'revoked').length === 1, 'p1 revoked');
      assert.equal(s.owner(0)?.state, 'ending', 'partition 0 is still the first revoke’s');
      finish();
      await until(() => s.coordinator.revokesInFlight === 0, 'both revokes done');
      assert.deepEqual(s.ops('commit('), [`commit(${T}[1]@2)`, `commit(${T}[0]@1)`]);
    });

    it('counts a revoke in flight before it emits revoking', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0)]);
      assert.equal(s.coordinator.revokesInFlight, 0);
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.coordinator.revokesInFlight === 0, 'revoke done');
      assert.deepEqual(s.inFlightAt, [
        { type: 'assigned', revokes: 0 },
        { type: 'revoking', revokes: 1 },
        { type: 'drained', revokes: 1 },
        { type: 'committed', revokes: 1 },
        { type: 'revoked', revokes: 1 },
      ]);
    });

    it('turns the revoke after an announced loss into lost: handlers aborted, nothing committed', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0)]);
      const c = s.owner(0)!;
      s.processed(c, 5);
      s.coordinator.suspect('max.poll.interval.ms exceeded');
      assert.equal(s.coordinator.membershipLost, 'max.poll.interval.ms exceeded');
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.coordinator.revokesInFlight === 0, 'revoke done');
      assert.deepEqual(s.types(), ['assigned', 'lost']);
      const lost = s.events.at(-1);
      assert.ok(lost?.type === 'lost');
      assert.match(lost.reason, /max\.poll/);
      assert.equal(c.state, 'fenced');
      assert.equal(c.signal.aborted, true);
      assert.deepEqual(s.ops('commit('), []);
      assert.deepEqual(s.ops('unassign'), ['unassign']);
      assert.equal(s.owner(0), undefined);
      assert.equal(s.coordinator.membershipLost, undefined, 'consumed by the revoke');
    });

    it('forgets an announced loss when an assignment arrives first', () => {
      const s = world();
      s.coordinator.suspect('session timed out');
      s.fake().rebalanceAssign([tp(0)]);
      assert.equal(s.coordinator.membershipLost, undefined);
    });

    it('only unassigns in the final revoke fired while disconnecting', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0)]);
      const c = s.owner(0)!;
      s.processed(c, 3);
      s.setStage('disconnecting');
      s.fake().rebalanceRevoke([tp(0)]);
      assert.deepEqual(s.ops('unassign'), ['unassign']);
      assert.equal(c.state, 'fenced');
      assert.equal(s.owner(0), undefined);
      assert.equal(s.coordinator.revokesInFlight, 0);
      assert.deepEqual(s.ops('commit('), []);
      // Its work since the last confirmed commit will be redone: the assignment ends in `lost`.
      assert.deepEqual(s.types(), ['assigned', 'lost']);
      const lost = s.events[1] as Extract<RebalanceEvent, { type: 'lost' }>;
      assert.deepEqual(lost.partitions, [tp(0)]);
      assert.match(lost.reason, /disconnect/);
    });

    it('ends an assignment that arrived while closing in revoked when librdkafka revokes it at disconnect', async () => {
      const s = world();
      s.setStage('closing');
      s.fake().rebalanceAssign([tp(0), tp(1)]);
      assert.equal(s.owner(0)!.state, 'ending', 'assigned while leaving: ended at once');
      s.setStage('disconnecting');
      s.fake().rebalanceRevoke([tp(0), tp(1)]);
      assert.deepEqual(s.ops('commit('), []);
      assert.deepEqual(
        s.types(),
        ['assigned', 'revoking', 'drained', 'committed', 'revoked'],
        'nothing was processed: nothing to redo, the whole revoke sequence at once',
      );
      assert.deepEqual(s.events[4]!.partitions, [tp(0), tp(1)]);
      const committed = s.events[3] as Extract<RebalanceEvent, { type: 'committed' }>;
      assert.deepEqual(
        committed.results.map((r) => r.status),
        ['unchanged', 'unchanged'],
      );
    });

    it('ends streams an eager assignment drops or replaces without a revoke: lost with work to redo, else revoked', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0), tp(1)]);
      s.processed(s.owner(1)!, 2);
      s.fake().rebalanceAssign([tp(0)]);
      assert.deepEqual(s.types(), [
        'assigned',
        'lost', // 1: dropped, 0..1 processed and never committed
        'revoking', // 0: replaced by a new stream, nothing delivered: nothing to redo
        'drained',
        'committed',
        'revoked',
        'assigned',
      ]);
      assert.deepEqual(s.events[1]!.partitions, [tp(1)]);
      assert.deepEqual(s.events[5]!.partitions, [tp(0)]);
    });

    it('ends the assignment a rebalance error releases in lost, its handlers aborted', async () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0)]);
      const c = s.owner(0)!;
      s.coordinator.onRebalance({ code: -1, message: 'boom' } as never, [tp(0)]);
      assert.equal(c.state, 'fenced');
      assert.equal(s.owner(0), undefined);
      assert.deepEqual(s.types(), ['assigned', 'lost']);
      assert.match((s.events[1] as Extract<RebalanceEvent, { type: 'lost' }>).reason, /boom/);
    });

    it('releases the assignment on a rebalance error', () => {
      const s = world();
      s.fake().rebalanceAssign([tp(0)]);
      s.coordinator.onRebalance({ code: -1, message: 'boom' } as never, [tp(0)]);
      assert.deepEqual(s.ops('unassign'), ['unassign']);
      assert.deepEqual(s.failures, []);
    });
  });
});

describe('RebalanceCoordinator: a failure while a loss is applied', () => {
  it('a throw while concluding a revoke lost on arrival fails the consumer and still counts the revoke out', async () => {
    const s = setup({ drainTimeoutMs: 2000, commitTimeoutMs: 200 }, {}, (e) => {
      if (e.type === 'lost') throw new Error('a rebalances$ subscriber threw');
    });
    try {
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => s.assignments.size === 1, 'assigned');
      s.coordinator.suspect('max.poll.interval.ms exceeded');
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.failures.length === 1, 'the consumer to fail');
      // A revoke left counted in flight would make close() wait for it until its release bound.
      await until(() => s.coordinator.revokesInFlight === 0, 'the revoke to be counted out');
      assert.equal(s.coordinator.busy, false);
    } finally {
      await s.stop();
    }
  });
});
