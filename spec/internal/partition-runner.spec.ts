import assert from 'node:assert/strict';
import { FairLimiter } from '../../lib/internal/partition/fair-limiter';
import { PartitionRunner } from '../../lib/internal/partition/partition-runner';
import type {
  KeyOrdering,
  RunningUnit,
  UnitExecutor,
} from '../../lib/internal/partition/partition-runner';
import { Random } from '../sim/random';

interface Unit {
  readonly runner: number;
  readonly position: number;
  readonly key: string;
}

const BY_KEY: KeyOrdering<Unit> = { keyOf: (u) => u.key, positionOf: (u) => u.position };

/** A handle the test finishes (or the runner cancels). */
class Pending implements RunningUnit {
  cancelled = false;
  constructor(
    readonly unit: Unit,
    readonly runner: PartitionRunner<Unit>,
    private readonly onCancel: () => void = () => undefined,
  ) {}
  cancel(): void {
    this.cancelled = true;
    this.onCancel();
  }
}

/** An executor that finishes units synchronously or hands back a handle, as told. */
function executor(
  decide: (u: Unit) => 'sync' | 'async',
  onStart: (u: Unit) => void,
  pending: Pending[],
  runnerOf: () => PartitionRunner<Unit>,
): UnitExecutor<Unit> {
  return {
    start(u) {
      onStart(u);
      if (decide(u) === 'sync') return undefined;
      const p = new Pending(u, runnerOf());
      pending.push(p);
      return p;
    },
  };
}

function single(
  concurrency: number,
  options: { limiter?: FairLimiter; keyed?: boolean; decide?: (u: Unit) => 'sync' | 'async' } = {},
) {
  const limiter = options.limiter ?? new FairLimiter(64);
  const ended = new AbortController();
  const stop = new AbortController();
  const started: Unit[] = [];
  const pending: Pending[] = [];
  let completed = 0;
  const runner: PartitionRunner<Unit> = new PartitionRunner<Unit>(
    executor(
      options.decide ?? (() => 'async'),
      (u) => started.push(u),
      pending,
      () => runner,
    ),
    limiter,
    concurrency,
    ended.signal,
    stop.signal,
    () => (completed += 1),
    options.keyed ? BY_KEY : undefined,
  );
  const finish = (p: Pending): void => {
    pending.splice(pending.indexOf(p), 1);
    runner.finish(p, p.unit);
  };
  return {
    limiter,
    runner,
    ended,
    stop,
    started,
    pending,
    finish,
    completed: () => completed,
  };
}

const unit = (position: number, key = `k${position}`): Unit => ({ runner: 0, position, key });

describe('PartitionRunner', () => {
  it('completes at once on a source that completes empty', () => {
    const t = single(2);
    t.runner.sourceComplete();
    assert.equal(t.completed(), 1);
  });

  it('runs at most `concurrency` units, in arrival order, and completes after the last one', () => {
    const t = single(2);
    [0, 1, 2, 3, 4].forEach((o) => t.runner.push(unit(o)));
    assert.deepEqual(
      t.started.map((u) => u.position),
      [0, 1],
    );
    t.runner.sourceComplete();
    t.finish(t.pending[1]!);
    t.finish(t.pending[0]!);
    assert.deepEqual(
      t.started.map((u) => u.position),
      [0, 1, 2, 3],
    );
    while (t.pending.length > 0) t.finish(t.pending[0]!);
    assert.deepEqual(
      t.started.map((u) => u.position),
      [0, 1, 2, 3, 4],
    );
    assert.equal(t.completed(), 1);
    assert.equal(t.limiter.running, 0);
  });

  it('drops waiting units when the partition ends, and completes once running ones finish', () => {
    const t = single(1);
    [0, 1, 2].forEach((o) => t.runner.push(unit(o)));
    t.ended.abort();
    t.runner.push(unit(3));
    assert.equal(t.completed(), 0, 'unit 0 still runs');
    t.finish(t.pending[0]!);
    assert.deepEqual(
      t.started.map((u) => u.position),
      [0],
    );
    assert.equal(t.completed(), 1);
    assert.equal(t.limiter.running, 0);
  });

  it('keyed: one unit per key at a time, other keys concurrently; an end keeps units before the last started', () => {
    const t = single(3, { keyed: true });
    t.runner.push(unit(0, 'a'));
    t.runner.push(unit(1, 'a'));
    t.runner.push(unit(2, 'b'));
    t.runner.push(unit(3, 'a'));
    t.runner.push(unit(4, 'c'));
    t.runner.push(unit(5, 'c'));
    assert.deepEqual(
      t.started.map((u) => u.position),
      [0, 2, 4],
    );
    t.ended.abort(); // last started: 4 → 1 and 3 still run (below it), 5 is dropped
    while (t.pending.length > 0) t.finish(t.pending[0]!);
    assert.deepEqual(
      t.started.map((u) => u.position),
      [0, 2, 4, 1, 3],
    );
    assert.equal(t.completed(), 1);
  });

  it('keyed: a stop drops every waiting unit', () => {
    const t = single(1, { keyed: true });
    [0, 1, 2].forEach((o) => t.runner.push(unit(o)));
    // 0 runs, 1 and 2 wait; unit 2 started? no: concurrency 1. Start 1 by finishing 0 first.
    t.finish(t.pending[0]!);
    t.ended.abort();
    t.stop.abort();
    t.finish(t.pending[0]!);
    assert.deepEqual(
      t.started.map((u) => u.position),
      [0, 1],
    );
    assert.equal(t.completed(), 1);
  });

  it('close() cancels running units, gives every slot and place back and never completes', () => {
    const limiter = new FairLimiter(1);
    const a = single(2, { limiter });
    const b = single(2, { limiter });
    a.runner.push(unit(0));
    b.runner.push(unit(0));
    b.runner.push(unit(1));
    assert.equal(limiter.running, 1);
    assert.equal(limiter.waiting, 2);
    b.runner.close();
    a.runner.close();
    assert.equal(a.pending[0]!.cancelled, true);
    assert.equal(limiter.running, 0);
    assert.equal(limiter.waiting, 0);
    assert.equal(a.completed() + b.completed(), 0);
    assert.equal(b.started.length, 0);
  });

  it('runs 200,000 synchronous units one after another without growing the stack', () => {
    const t = single(1, { decide: () => 'sync' });
    for (let o = 0; o < 200_000; o++) t.runner.push(unit(o));
    t.runner.sourceComplete();
    assert.equal(t.started.length, 200_000);
    assert.equal(t.completed(), 1);
  });

  it('gives up 10,000 places in the limiter at an end without growing the stack', () => {
    const limiter = new FairLimiter(1);
    const blocker = single(1, { limiter });
    blocker.runner.push(unit(0));
    const t = single(10_000, { limiter, decide: () => 'sync' });
    for (let o = 0; o < 10_000; o++) t.runner.push(unit(o));
    assert.equal(limiter.waiting, 10_000);
    t.ended.abort();
    assert.equal(t.completed(), 1);
    blocker.finish(blocker.pending[0]!);
    assert.equal(limiter.waiting, 0);
    assert.equal(limiter.running, 0);
    assert.equal(t.started.length, 0);
  });

  it('property: limits, order, fairness, ends, stops and closes over seeded schedules', () => {
    const seed = Number(process.env.RUNNER_SEED ?? 20261201);
    const runs = 300;
    console.log(`      partition-runner property: RUNNER_SEED=${seed} (${runs} schedules)`);
    for (let s = seed; s < seed + runs; s++) {
      try {
        schedule(s);
      } catch (err) {
        throw new Error(`schedule ${s} failed (RUNNER_SEED=${s}): ${(err as Error).message}`, {
          cause: err,
        });
      }
    }
  });
});

/** One seeded schedule of several runners sharing a limiter; invariants checked at every step. */
function schedule(seed: number): void {
  const rnd = new Random(seed);
  const max = rnd.int(1, 6);
  const limiter = new FairLimiter(max);
  const n = rnd.int(1, 4);
  const keyed = rnd.chance(0.4);
  const syncShare = rnd.pick([0, 0.5, 0.9]);
  interface State {
    runner: PartitionRunner<Unit>;
    ended: AbortController;
    stop: AbortController;
    pushed: Unit[];
    started: Unit[];
    running: Set<Unit>;
    /** The highest position started when the partition ended. */
    lastStartedAtEnd: number | undefined;
    stopped: boolean;
    closed: boolean;
    sourceDone: boolean;
    completed: number;
    concurrency: number;
    next: number;
  }
  const pending: Pending[] = [];
  let globalRunning = 0;
  const states: State[] = [];
  for (let i = 0; i < n; i++) {
    const ended = new AbortController();
    const stop = new AbortController();
    const concurrency = rnd.int(1, 4);
    const st = {
      ended,
      stop,
      pushed: [],
      started: [],
      running: new Set<Unit>(),
      lastStartedAtEnd: undefined,
      stopped: false,
      closed: false,
      sourceDone: false,
      completed: 0,
      concurrency,
      next: 0,
    } as unknown as State;
    const onStart = (u: Unit): void => {
      assert.ok(!st.closed, 'no start after close');
      assert.ok(!st.stopped, 'no start after stop');
      if (st.lastStartedAtEnd !== undefined) {
        assert.ok(keyed, 'FIFO: nothing starts after the end');
        assert.ok(u.position < st.lastStartedAtEnd, 'keyed: only units before the last started');
      }
      if (keyed) {
        for (const r of st.running) assert.notEqual(r.key, u.key, 'one unit per key at a time');
        const earlier = st.pushed.filter((p) => p.key === u.key && p.position < u.position);
        for (const e of earlier) assert.ok(st.started.includes(e), 'keyed: in order within a key');
      } else {
        assert.equal(u.position, st.started.length, 'FIFO: in arrival order');
      }
      st.started.push(u);
      st.running.add(u);
      globalRunning += 1;
      assert.ok(st.running.size <= concurrency, 'partition concurrency');
      assert.ok(globalRunning <= max, 'global limit');
    };
    const ex: UnitExecutor<Unit> = {
      start(u) {
        onStart(u);
        if (rnd.chance(syncShare)) {
          st.running.delete(u);
          globalRunning -= 1;
          return undefined;
        }
        const p = new Pending(u, st.runner, () => {
          if (st.running.delete(u)) globalRunning -= 1;
        });
        pending.push(p);
        return p;
      },
    };
    st.runner = new PartitionRunner<Unit>(
      ex,
      limiter,
      concurrency,
      ended.signal,
      stop.signal,
      () => {
        st.completed += 1;
        assert.ok(st.sourceDone || st.lastStartedAtEnd !== undefined, 'completes after the end');
        assert.equal(st.running.size, 0, 'completes after every started unit finished');
      },
      keyed ? BY_KEY : undefined,
    );
    states.push(st);
  }
  const cancelled = (p: Pending): boolean => p.cancelled;
  for (let step = 0; step < 200; step++) {
    const st = rnd.pick(states);
    const i = states.indexOf(st);
    const action = rnd.int(0, 99);
    if (action < 45) {
      if (st.closed || st.sourceDone) continue; // a source never emits after it completed
      const u = { runner: i, position: st.next, key: `k${rnd.int(0, 3)}` };
      st.next += 1;
      if (st.lastStartedAtEnd === undefined) st.pushed.push(u);
      st.runner.push(u);
    } else if (action < 85) {
      const live = pending.filter((p) => !cancelled(p));
      pending.length = 0;
      pending.push(...live);
      if (live.length > 0) {
        const p = rnd.pick(live);
        pending.splice(pending.indexOf(p), 1);
        const owner = states[p.unit.runner]!;
        owner.running.delete(p.unit);
        globalRunning -= 1;
        p.runner.finish(p, p.unit);
      }
    } else if (action < 90) {
      if (st.lastStartedAtEnd === undefined) {
        st.lastStartedAtEnd = Math.max(-1, ...st.started.map((u) => u.position));
        if (!keyed) st.lastStartedAtEnd = -1;
        st.ended.abort();
      }
    } else if (action < 93) {
      if (st.lastStartedAtEnd === undefined) {
        st.lastStartedAtEnd = -1;
        st.ended.abort();
      }
      st.stopped = true;
      st.stop.abort();
    } else if (action < 97) {
      st.sourceDone = true;
      st.runner.sourceComplete();
    } else {
      st.closed = true;
      st.runner.close();
      for (const p of pending) if (p.unit.runner === i) assert.ok(p.cancelled, 'close cancels');
    }
    for (const p of pending) cancelled(p);
    assert.ok(limiter.running <= max);
    assert.ok(st.completed <= 1, 'completes once');
    assert.equal(limiter.running, globalRunning, 'every running unit holds exactly one slot');
  }
  // Let everything finish: with no end, every pushed unit runs (no starvation).
  for (let guard = 0; guard < 10_000; guard++) {
    const live = pending.filter((p) => !cancelled(p));
    if (live.length === 0) break;
    const p = live[0]!;
    pending.splice(pending.indexOf(p), 1);
    states[p.unit.runner]!.running.delete(p.unit);
    globalRunning -= 1;
    p.runner.finish(p, p.unit);
  }
  for (const st of states) {
    if (st.closed) continue;
    if (keyed && !st.stopped && st.lastStartedAtEnd !== undefined) {
      // An end keeps what lies below work already started: all of it runs.
      for (const u of st.pushed)
        if (u.position < st.lastStartedAtEnd)
          assert.ok(st.started.includes(u), `unit ${u.position} below the last started ran`);
    }
    if (st.lastStartedAtEnd === undefined) {
      assert.equal(st.started.length, st.pushed.length, 'every unit of a live partition ran');
      st.sourceDone = true;
      st.runner.sourceComplete();
    }
    assert.equal(st.completed, 1, 'a runner that is not closed completes');
  }
  assert.equal(limiter.running, 0, 'every slot given back');
  // Stale places are released as they come up: none is left waiting.
  assert.equal(limiter.waiting, 0, 'no place left in the limiter');
}
