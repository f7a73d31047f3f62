/**
 * The deterministic simulation (spec/sim): the real ReactiveConsumer, several members of one
 * group over member-mode fakes sharing a broker, on a virtual clock, with a seeded scheduler
 * exploring interleavings of rebalances, stops, seeks, pauses, handler outcomes and commit
 * results. See spec/sim/simulation.ts for the world and spec/sim/invariants.ts for what is checked.
 *
 * - `SIM_RUNS` (default 300) runs from `SIM_BASE_SEED` (default 1000); each run prints its seed.
 * - `SIM_SEED=n` replays one seed; `SIM_TRACE=1` prints its whole event trace.
 * - `SIM_WEIGHTS=close=0,seek=3` overrides action weights (to look past a known failure).
 * A failing seed goes to REGRESSIONS, named after what broke.
 */
import assert from 'node:assert/strict';
import { describeConfig, drawConfig, parseWeights } from './sim/config';
import type { ActionKind } from './sim/config';
import { InvariantChecker } from './sim/invariants';
import type { ViolationKind } from './sim/invariants';
import { Simulation } from './sim/simulation';
import type { SimResult } from './sim/simulation';
import type { TopicPartitionOffset } from 'node-rdkafka';
import type { FakeConsumer } from './fakes/fake-consumer';

const BASE_SEED = Number(process.env.SIM_BASE_SEED ?? 1000);
const RUNS = Number(process.env.SIM_RUNS ?? 300);
const FULL_TRACE = process.env.SIM_TRACE === '1';

/** Only the actions a regression needs (weights of the others set to 0). */
const ONLY_STOP_BY_CLOSE = 'unsubscribe=0,takeUntil=0,seek=0,fence=0,reentrant=0,settle=0';
const ONLY_STOP_BY_UNSUBSCRIBE = 'close=0,takeUntil=0,seek=0,fence=0,reentrant=0';
const ONLY_STOP_BY_TAKE_UNTIL = 'close=0,unsubscribe=0,seek=0,fence=0,reentrant=0';
const NO_STOPS = 'close=0,unsubscribe=0,takeUntil=0,seek=0,fence=0,reentrant=0';

/**
 * Seeds that failed, named after what broke; each replays with its weights. A seed names a
 * schedule of this simulation code: after changing the simulation, check that each still walks
 * its path (SIM_SEED + SIM_WEIGHTS + SIM_TRACE) against the engine before its fix.
 */
const REGRESSIONS: readonly { seed: number; weights?: string; what: string }[] = [
  {
    seed: 1007,
    weights: ONLY_STOP_BY_CLOSE,
    what: 'close() while a revoke retries its final commit (STALE_MEMBER_EPOCH): the unsubscribe revoke unassigns, the member leaves, then the first revoke commits again (KIP-848)',
  },
  {
    seed: 1016,
    weights: ONLY_STOP_BY_UNSUBSCRIBE,
    what: 'unsubscribing the process() subscription while handlers run tears them down: the offset below them stays uncommitted and the next owner redoes work finished above it',
  },
  {
    seed: 1020,
    weights: ONLY_STOP_BY_TAKE_UNTIL,
    what: 'takeUntil stops the pipeline while handlers run: their finished work is not counted and is redone',
  },
  {
    seed: 1034,
    weights: NO_STOPS,
    what: 'a retry in backoff at a revoke is abandoned: an offset finished above it is redone (partitionConcurrency 3)',
  },
  {
    seed: 1136,
    weights: NO_STOPS,
    what: 'a revoke cancels thousands of queued handlers (partitionConcurrency 6000+): the FairLimiter recurses and overflows the stack',
  },
  {
    seed: 62290,
    weights: NO_STOPS,
    what: 'completed-offset memory: a periodic commit computed before a revoke waits for a slow memory write, is sent after the final commit and the reassignment, and moves the committed offset back (19 → 13)',
  },
  {
    seed: 1077,
    weights: NO_STOPS,
    what: 'a periodic commit times out in the client and is applied late, after the final commit sent meanwhile: the committed offset moves back (12 → 4) (KIP-848)',
  },
  {
    seed: 1507,
    what: 'seek() called from an assigned subscriber, then a revoke and a reassignment: the seek is applied to the newer assignment (KIP-848)',
  },
];

async function simulate(
  seed: number,
  overrides: Partial<Record<ActionKind, number>> = {},
  mutate?: (fake: FakeConsumer) => void,
  unknownOutcomes = 0,
): Promise<SimResult> {
  return new Simulation(drawConfig(seed, overrides), {
    fullTrace: FULL_TRACE,
    ...(mutate ? { mutate } : {}),
    unknownOutcomes,
  }).run();
}

/** Runs of the unknown-outcome schedules (commits answered with an error, some applied late). */
const UNKNOWN_OUTCOME_RUNS = Number(process.env.SIM_UNKNOWN_RUNS ?? 100);
const UNKNOWN_OUTCOME_BASE_SEED = Number(process.env.SIM_UNKNOWN_BASE_SEED ?? 7000);

/** Makes the library's commits of explicit offsets go out rewritten (a broken consumer). */
function rewriteCommits(
  fake: FakeConsumer,
  rewrite: (offsets: TopicPartitionOffset[]) => TopicPartitionOffset[],
): void {
  const commit = fake.commit.bind(fake);
  fake.commit = (offsets) => {
    if (offsets === undefined || offsets === null) return commit(offsets);
    return commit(rewrite(Array.isArray(offsets) ? offsets : [offsets]));
  };
}

function report(r: SimResult, lines = 60): string {
  const v = r.violations[0];
  return [
    `seed ${r.config.seed}: ${describeConfig(r.config)}`,
    v ? `  ${v.kind} at ${v.at} ms: ${v.message}` : '  no violation',
    `  graceful=${r.graceful}${r.notGraceful.length > 0 ? ` (${r.notGraceful.slice(0, 3).join('; ')})` : ''}`,
    `  replay: SIM_SEED=${r.config.seed} SIM_TRACE=1 [SIM_WEIGHTS=…] node_modules/.bin/mocha --config .mocharc.unit.json spec/simulation.spec.ts`,
    '  trace (last lines):',
    ...r.trace.slice(-lines).map((l) => `    ${l}`),
  ].join('\n');
}

function summary(r: SimResult, ms: number): string {
  const outcome = r.violations.length === 0 ? 'ok' : `FAIL ${r.violations[0]?.kind ?? ''}`;
  return `      seed ${r.config.seed} ${outcome} (${ms} ms, ${r.virtualMs} virtual ms, ${r.steps} steps, ${JSON.stringify(r.stats)})`;
}

describe('deterministic simulation of a consumer group', function () {
  this.timeout(600_000);

  it(`keeps every invariant over ${process.env.SIM_SEED !== undefined ? `seed ${process.env.SIM_SEED}` : `${RUNS} seeded schedules from seed ${BASE_SEED}`}`, async () => {
    const one = process.env.SIM_SEED;
    const seeds =
      one !== undefined ? [Number(one)] : [...Array(RUNS).keys()].map((i) => BASE_SEED + i);
    const overrides = parseWeights(process.env.SIM_WEIGHTS);
    const failures: SimResult[] = [];
    const totals: Record<string, number> = {};
    const started = Date.now();
    for (const seed of seeds) {
      const t0 = Date.now();
      const r = await simulate(seed, overrides);
      console.log(summary(r, Date.now() - t0));
      if (FULL_TRACE) console.log(r.trace.join('\n'));
      if (r.violations.length > 0) failures.push(r);
      for (const [k, n] of Object.entries(r.stats)) totals[k] = (totals[k] ?? 0) + n;
    }
    console.log(`      exercised: ${JSON.stringify(totals)}`);
    console.log(
      `      ${seeds.length} runs in ${Date.now() - started} ms, ${failures.length} failed`,
    );
    assert.equal(
      failures.length,
      0,
      `${failures.length} of ${seeds.length} runs broke an invariant (seeds ${failures.map((f) => f.config.seed).join(', ')}):\n\n${failures
        .slice(0, 5)
        .map((f) => report(f))
        .join('\n\n')}`,
    );
  });

  it(`keeps every invariant when commits are answered with errors of unknown outcome and some are applied late (${UNKNOWN_OUTCOME_RUNS} schedules from seed ${UNKNOWN_OUTCOME_BASE_SEED})`, async () => {
    const failures: SimResult[] = [];
    const totals: Record<string, number> = {};
    for (let i = 0; i < UNKNOWN_OUTCOME_RUNS; i++) {
      const seed = UNKNOWN_OUTCOME_BASE_SEED + i;
      const t0 = Date.now();
      const r = await simulate(seed, parseWeights(process.env.SIM_WEIGHTS), undefined, 0.15);
      console.log(summary(r, Date.now() - t0));
      if (r.violations.length > 0) failures.push(r);
      for (const [k, n] of Object.entries(r.stats)) totals[k] = (totals[k] ?? 0) + n;
    }
    console.log(`      exercised: ${JSON.stringify(totals)}`);
    assert.ok(
      (totals.unknownAppliedLate ?? 0) > 0,
      'no commit was applied late: the runs proved nothing',
    );
    assert.equal(
      failures.length,
      0,
      `${failures.length} of ${UNKNOWN_OUTCOME_RUNS} runs broke an invariant (seeds ${failures.map((f) => f.config.seed).join(', ')}; replay with unknownOutcomes 0.15):\n\n${failures
        .slice(0, 3)
        .map((f) => report(f))
        .join('\n\n')}`,
    );
  });

  it('replays a seed exactly: the same trace twice', async () => {
    const a = await new Simulation(drawConfig(1019), { fullTrace: true }).run();
    const b = await new Simulation(drawConfig(1019), { fullTrace: true }).run();
    assert.ok(a.trace.length > 100, 'the run did something');
    assert.deepEqual(b.trace, a.trace);
  });

  describe('regressions', () => {
    for (const { seed, weights, what } of REGRESSIONS) {
      it(`seed ${seed}${weights ? ` (${weights})` : ''}: ${what}`, async () => {
        const r = await simulate(seed, parseWeights(weights));
        assert.deepEqual(r.violations, [], report(r));
      });
    }
  });

  describe('catches a consumer broken on purpose', () => {
    /** Runs seeds without stops or seeks (paths with known defects) until `kind` is reported. */
    async function catches(
      kind: ViolationKind,
      mutate: (fake: FakeConsumer) => void,
    ): Promise<void> {
      const seen: string[] = [];
      for (let seed = 3000; seed < 3040; seed++) {
        const r = await simulate(
          seed,
          { close: 0, unsubscribe: 0, takeUntil: 0, seek: 0, fence: 0 },
          mutate,
        );
        const v = r.violations[0];
        if (v?.kind === kind) return;
        if (v) seen.push(`${seed}: ${v.kind}`);
      }
      assert.fail(`no run reported ${kind}; saw ${seen.join(', ') || 'nothing'}`);
    }

    it('reports a commit one past what was processed', async () => {
      await catches('commit-past-unprocessed', (fake) =>
        rewriteCommits(fake, (list) => list.map((o) => ({ ...o, offset: o.offset + 1 }))),
      );
    });

    it('reports a commit sent after the unassign', async () => {
      await catches('commit-while-unassigned', (fake) => {
        const unassign = fake.incrementalUnassign.bind(fake);
        fake.incrementalUnassign = (partitions) => {
          unassign(partitions);
          fake.commit(
            partitions.map((p) => ({ topic: p.topic, partition: p.partition, offset: 0 })),
          );
          return fake;
        };
        const full = fake.unassign.bind(fake);
        fake.unassign = () => {
          const had = fake.assignments();
          full();
          if (had.length > 0) fake.commit(had.map((p) => ({ ...p, offset: 0 })));
          return fake;
        };
      });
    });

    it('reports work done twice when new owners start from the beginning', async () => {
      await catches('duplicate-processing', (fake) => {
        const assign = fake.assign.bind(fake);
        fake.assign = (ps) => assign(ps.map((p) => ({ ...p, offset: 0 })));
        const incremental = fake.incrementalAssign.bind(fake);
        fake.incrementalAssign = (ps) => incremental(ps.map((p) => ({ ...p, offset: 0 })));
      });
    });

    it('reports a committed offset moving backwards', async () => {
      let n = 0;
      // Every third commit goes one back.
      await catches('committed-backwards', (fake) =>
        rewriteCommits(fake, (list) =>
          ++n % 3 === 0 ? list.map((o) => ({ ...o, offset: Math.max(0, o.offset - 1) })) : list,
        ),
      );
    });
  });

  describe('the invariant checker', () => {
    const checker = (ends: number[] = [10]) => {
      let now = 0;
      const c = new InvariantChecker(
        () => (now += 1),
        (p) => ends[p] ?? 0,
      );
      return c;
    };
    const kinds = (c: InvariantChecker) => c.violations.map((v) => v.kind);

    it('flags a commit past an offset nobody processed, and past the log end', () => {
      const c = checker();
      c.handlerSucceeded('a', 0, 0);
      c.commitApplied('a', [{ partition: 0, offset: 1 }]);
      assert.deepEqual(kinds(c), []);
      c.commitApplied('a', [{ partition: 0, offset: 3 }]);
      c.commitApplied('a', [{ partition: 0, offset: 11 }]);
      assert.deepEqual(kinds(c), [
        'commit-past-unprocessed',
        'commit-past-unprocessed',
        'commit-past-unprocessed',
      ]);
    });

    it('flags a second success on a graceful path only, beyond what a seek replays', () => {
      const c = checker();
      c.handlerSucceeded('a', 0, 4);
      c.nativeSeek('a', 0, 2);
      c.handlerSucceeded('b', 0, 4);
      assert.deepEqual(kinds(c), []);
      c.handlerSucceeded('b', 0, 4);
      assert.deepEqual(kinds(c), ['duplicate-processing']);
      c.markNotGraceful('a crash');
      c.handlerSucceeded('c', 0, 4);
      assert.deepEqual(kinds(c), ['duplicate-processing']);
    });

    it('flags a commit after the final one, or while not assigned', () => {
      const c = checker();
      c.commitSent('a', [{ partition: 0, offset: 0 }]);
      c.assignCall('a', [0]);
      c.commitSent('a', [{ partition: 0, offset: 1 }]);
      c.finalCommitDone('a', [{ partition: 0, status: 'unchanged', offset: 1 }]);
      c.commitSent('a', [{ partition: 0, offset: 1 }]);
      c.unassignCall('a', [0]);
      c.assignCall('a', [0]);
      c.commitSent('a', [{ partition: 0, offset: 1 }]);
      assert.deepEqual(kinds(c), ['commit-while-unassigned', 'commit-after-final']);
    });

    it('flags a committed offset going backwards unless a seek went back', () => {
      const c = checker();
      for (let o = 0; o < 6; o++) c.handlerSucceeded('a', 0, o);
      c.commitApplied('a', [{ partition: 0, offset: 5 }]);
      c.commitApplied('a', [{ partition: 0, offset: 4 }]);
      assert.deepEqual(kinds(c), ['committed-backwards']);
      c.nativeSeek('a', 0, 2);
      c.commitApplied('a', [{ partition: 0, offset: 3 }]);
      assert.deepEqual(kinds(c), ['committed-backwards']);
    });

    it('flags a commit reported confirmed that the broker never applied', () => {
      const c = checker();
      c.handlerSucceeded('a', 0, 0);
      c.commitApplied('a', [{ partition: 0, offset: 1 }]);
      c.finalCommitDone('a', [{ partition: 0, status: 'committed', offset: 1 }]);
      c.finalCommitDone('b', [{ partition: 0, status: 'committed', offset: 1 }]);
      assert.deepEqual(kinds(c), ['confirmed-not-applied']);
    });

    it('flags a seek applied after its partition was revoked and reassigned', () => {
      const c = checker();
      c.assignCall('a', [0]);
      c.seekCalled('a', 0, 3);
      c.nativeSeek('a', 0, 3);
      const token = c.seekCalled('a', 0, 5);
      c.seekRejected('a', 0, token);
      c.seekCalled('a', 0, 5);
      c.unassignCall('a', [0]);
      c.assignCall('a', [0]);
      c.nativeSeek('a', 0, 5);
      assert.deepEqual(kinds(c), ['seek-newer-assignment']);
    });

    it('flags lost revokes, failed final commits and drain timeouts on a graceful path only', () => {
      const c = checker();
      c.rebalanceEvent('a', 'assigned', [0], {});
      c.rebalanceEvent('a', 'assigned', [0], {});
      c.rebalanceEvent('a', 'lost', [0], { reason: 'x' });
      c.rebalanceEvent('a', 'drained', [0], { timedOut: true });
      c.rebalanceEvent('a', 'committed', [0], { failed: [0] });
      c.rebalanceEvent('a', 'drained', [0], { timedOut: false });
      c.markNotGraceful('fenced');
      c.rebalanceEvent('a', 'lost', [0], { reason: 'x' });
      assert.deepEqual(kinds(c), [
        'graceful-revoke-failed',
        'graceful-revoke-failed',
        'graceful-revoke-failed',
      ]);
    });

    it('flags an assigned partition that never ended in revoked or lost when rebalances$ completes', () => {
      const c = checker([10, 10, 10]);
      c.rebalanceEvent('a', 'assigned', [0, 1], {});
      c.rebalanceEvent('a', 'revoked', [0], {});
      c.rebalanceEvent('a', 'assigned', [2], {});
      c.markNotGraceful('a crash');
      c.rebalanceEvent('a', 'lost', [2], { reason: 'x' });
      c.rebalanceEvent('b', 'assigned', [1], {});
      c.rebalanceEvent('b', 'revoked', [1], {});
      c.rebalancesCompleted('b');
      assert.deepEqual(kinds(c), []);
      c.rebalancesCompleted('a');
      assert.deepEqual(kinds(c), ['assignment-not-ended']);
      assert.match(c.violations[0]!.message, /\[1\]/);
    });

    it('counts overlapping assignments of a partition, and flags a second ending', () => {
      const c = checker([10]);
      c.rebalanceEvent('a', 'assigned', [0], {});
      c.rebalanceEvent('a', 'assigned', [0], {}); // eager, while the old stream's revoke drains
      c.markNotGraceful('superseded');
      c.rebalanceEvent('a', 'lost', [0], { reason: 'superseded' });
      c.rebalancesCompleted('a');
      assert.deepEqual(kinds(c), ['assignment-not-ended']);
      c.rebalanceEvent('a', 'revoked', [0], {});
      c.rebalanceEvent('a', 'revoked', [0], {});
      assert.deepEqual(kinds(c), ['assignment-not-ended', 'assignment-ended-twice']);
    });

    it("flags a revoke's phases out of order, per generation", () => {
      const c = checker([10]);
      c.rebalanceEvent('a', 'assigned', [0, 1], { generation: 1 });
      c.rebalanceEvent('a', 'revoking', [0], { generation: 2 });
      c.rebalanceEvent('a', 'revoking', [1], { generation: 3 });
      c.rebalanceEvent('a', 'drained', [0], { generation: 2 });
      c.rebalanceEvent('a', 'drained', [1], { generation: 3 });
      c.rebalanceEvent('a', 'committed', [1], { generation: 3 });
      c.rebalanceEvent('a', 'committed', [0], { generation: 2 });
      assert.deepEqual(kinds(c), []);
      c.rebalanceEvent('a', 'revoked', [0], { generation: 4 });
      c.rebalanceEvent('a', 'committed', [1], { generation: 5 });
      assert.deepEqual(kinds(c), ['revoke-phase-order', 'revoke-phase-order']);
    });

    it('lists what is unprocessed or uncommitted', () => {
      const c = checker([2, 0]);
      c.handlerSucceeded('a', 0, 0);
      assert.deepEqual(c.missing(2), [
        'p0: 1 offset(s) never processed (first 1)',
        'p0: committed 0, log end 2',
      ]);
      c.handlerSucceeded('a', 0, 1);
      c.commitApplied('a', [{ partition: 0, offset: 2 }]);
      assert.deepEqual(c.missing(2), []);
    });
  });
});
