/**
 * processTransactional() over random schedules (fast-check, seeded; the seed is printed): random
 * rebalances (eager or cooperative, some of them lost), commits that time out and are applied
 * meanwhile or not, commits and offset sends that fail as abortable, producer queues full part-way
 * through a message, handlers finishing out of order. Whatever the schedule, once the consumer owns
 * everything again and the backlog is done: every input's records are committed exactly once and
 * whole, each committed offset carries only records below it, no call of a transaction reaches the
 * broker after it aborted the transaction for its age, and sendOffsetsToTransaction never runs on a
 * disconnected consumer.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { Subscription } from 'rxjs';
import type { KafkaMessage, OutputRecord } from '../lib';
import type { TxnFailurePlan, TxnOp } from './fakes/fake-transactional-producer';
import { T, committed, tp, until } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';

const P = 3;

type CommitFault = 'timeout-applied' | 'timeout' | 'abortable';

interface Scenario {
  protocol: 'EAGER' | 'COOPERATIVE';
  counts: number[];
  partitionConcurrency: number;
  maxMs: number;
  maxMessages: number;
  steps: { subset: number; lost: boolean; gapMs: number }[];
  /** Faults of the commitTransaction calls 3k + 1 (never two calls in a row). */
  commitFaults: (CommitFault | null)[];
  /** Which sendOffsetsToTransaction calls fail as abortable. */
  sendFaults: number[];
  /** Which produce() calls are refused once with QUEUE_FULL. */
  queueFull: number[];
  delays: number[];
}

const scenario: fc.Arbitrary<Scenario> = fc.record({
  protocol: fc.constantFrom('EAGER' as const, 'COOPERATIVE' as const),
  counts: fc.array(fc.integer({ min: 0, max: 20 }), { minLength: P, maxLength: P }),
  partitionConcurrency: fc.integer({ min: 1, max: 3 }),
  maxMs: fc.integer({ min: 1, max: 30 }),
  maxMessages: fc.integer({ min: 1, max: 20 }),
  steps: fc.array(
    fc.record({
      subset: fc.integer({ min: 1, max: 2 ** P - 1 }),
      lost: fc.boolean(),
      gapMs: fc.integer({ min: 0, max: 30 }),
    }),
    { minLength: 1, maxLength: 5 },
  ),
  commitFaults: fc.array(
    fc.constantFrom<CommitFault | null>('timeout-applied', 'timeout', 'abortable', null, null),
    { maxLength: 8 },
  ),
  sendFaults: fc.uniqueArray(fc.integer({ min: 1, max: 20 }), { maxLength: 3 }),
  queueFull: fc.uniqueArray(fc.integer({ min: 1, max: 120 }), { maxLength: 6 }),
  delays: fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 11, maxLength: 11 }),
});

const recordsOf = (partition: number, offset: number): number => 1 + ((partition + offset) % 3);

const partitionsOf = (mask: number) =>
  [...Array(P).keys()].filter((p) => mask & (1 << p)).map((p) => tp(p));

function planOf(s: Scenario): (op: TxnOp, n: number) => TxnFailurePlan | undefined {
  return (op, n) => {
    if (op === 'send' && s.sendFaults.includes(n)) return { code: -185, abortable: true };
    if (op !== 'commit' || n % 3 !== 1) return undefined;
    switch (s.commitFaults[(n - 1) / 3] ?? null) {
      case 'timeout-applied':
        return { code: -185, retriable: true, afterTimeout: true, committedMeanwhile: true };
      case 'timeout':
        return { code: -185, retriable: true, afterTimeout: true };
      case 'abortable':
        return { code: 48, abortable: true };
      case null:
        return undefined;
    }
  };
}

async function run(s: Scenario): Promise<void> {
  const refused = new Set<number>();
  const h = transactionalHarness(
    {
      plan: planOf(s),
      queueFull: (n) => s.queueFull.includes(n) && !refused.has(n) && refused.add(n) !== undefined,
    },
    { commitTimeoutMs: 50, drainTimeoutMs: 3000 },
    { protocol: s.protocol },
  );
  let error: unknown;
  const handler = async (m: KafkaMessage): Promise<OutputRecord[]> => {
    const delay = s.delays[(m.partition * 5 + m.offset) % s.delays.length] ?? 0;
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    return Array.from({ length: recordsOf(m.partition, m.offset) }, (_, i) => ({
      topic: 'out',
      key: m.key,
      value: `${m.partition}:${m.offset}:${i}`,
    }));
  };
  const sub: Subscription = h.consumer
    .processTransactional(handler, {
      transactionalId: 'tx-property',
      maxMs: s.maxMs,
      maxMessages: s.maxMessages,
      partitionConcurrency: s.partitionConcurrency,
    })
    .subscribe({ error: (e: unknown) => (error = e) });
  try {
    await until(() => h.fake().isConnected(), 'connect');
    s.counts.forEach((n, p) => h.fake().produce(T, p, n));
    const settle = () =>
      until(() => !h.fake().revokeInProgress || error !== undefined, 'the revoke to end', 10_000);
    let assigned = 0;
    // librdkafka delivers no rebalance event before the assign call of the one before it (the
    // library may hold that call while it reads start offsets): each assignment is answered first.
    const assignCalls = (): number =>
      h.fake().calls.filter((c) => c.op === 'assign' || c.op === 'incrementalAssign').length;
    const rebalanceAssign = async (mask: number): Promise<void> => {
      const before = assignCalls();
      h.fake().rebalanceAssign(partitionsOf(mask));
      await until(() => assignCalls() > before || error !== undefined, 'the assign call', 10_000);
    };
    for (const step of s.steps) {
      if (s.protocol === 'EAGER') {
        if (assigned !== 0) {
          h.fake().rebalanceRevoke(partitionsOf(assigned), { lost: step.lost });
          await settle();
        }
        assigned = step.subset;
        await rebalanceAssign(assigned);
      } else {
        const revoke = assigned & step.subset;
        if (revoke !== 0) {
          h.fake().rebalanceRevoke(partitionsOf(revoke), { lost: step.lost });
          await settle();
          assigned &= ~revoke;
        } else {
          await rebalanceAssign(step.subset & ~assigned);
          assigned |= step.subset;
        }
      }
      await until(() => true, 'a step'); // let the loop run between steps
      await new Promise((r) => setTimeout(r, step.gapMs));
    }
    if (s.protocol === 'EAGER') {
      if (assigned !== 0) {
        h.fake().rebalanceRevoke(partitionsOf(assigned));
        await settle();
      }
      await rebalanceAssign(2 ** P - 1);
    } else if (assigned !== 2 ** P - 1) {
      await rebalanceAssign(2 ** P - 1 - assigned);
    }
    await until(
      () => error !== undefined || s.counts.every((n, p) => (committed(h, p) ?? 0) === n),
      `every partition committed to its end (${s.counts.join(', ')})`,
      15_000,
    );
    assert.equal(error, undefined, `the pipeline failed: ${String(error)}`);
    await h.consumer.close();
  } finally {
    sub.unsubscribe();
  }

  const producer = h.producer();
  // Every input's records exactly once, whole, in the committed (read_committed) view.
  const seen = new Map<string, number>();
  for (const r of producer.committed)
    seen.set(String(r.value), (seen.get(String(r.value)) ?? 0) + 1);
  const twice = [...seen].filter(([, n]) => n > 1).map(([v]) => v);
  assert.deepEqual(twice, [], 'no output committed twice');
  const missing: string[] = [];
  s.counts.forEach((n, p) => {
    for (let o = 0; o < n; o++) {
      for (let i = 0; i < recordsOf(p, o); i++) {
        if (!seen.has(`${p}:${o}:${i}`)) missing.push(`${p}:${o}:${i}`);
      }
    }
  });
  assert.deepEqual(missing, [], 'no output lost');
  // Each committed transaction's offsets carry only its records' inputs (below, not before).
  const last = new Map<number, number>();
  for (const t of producer.transactions.filter((x) => x.outcome === 'committed')) {
    for (const r of t.records) {
      const [p, o] = String(r.value).split(':').map(Number) as [number, number];
      const carried = t.offsets.find((x) => x.partition === p)?.offset;
      assert.ok(carried !== undefined && carried > o, `offset of ${p}@${o} carried`);
      assert.ok((last.get(p) ?? 0) <= o, `${p}@${o} not committed before`);
    }
    for (const x of t.offsets) last.set(x.partition, x.offset);
  }
  assert.deepEqual(producer.expiredCalls, [], 'no call after the broker aborted for age');
  assert.equal(producer.disconnectedConsumerCalls, 0, 'no offsets sent on a disconnected consumer');
  console.log(
    JSON.stringify({
      calls: producer.calls
        .filter((c) => c !== 'produce')
        .join(' ')
        .slice(0, 300),
      aborted: producer.transactions.filter((t) => t.outcome === 'aborted').length,
      committedTx: producer.transactions.filter((t) => t.outcome === 'committed').length,
      lost: s.steps.filter((x) => x.lost).length,
    }),
  );
}

describe('processTransactional() properties (fakes)', function () {
  this.timeout(300_000);
  it('commits every input’s records exactly once and whole over random rebalances, commit timeouts (applied or not), aborts and full queues', async () => {
    const seed = Number(process.env.FC_SEED ?? Date.now() % 1_000_000);
    console.log(`      fast-check seed=${seed}`);
    await fc.assert(fc.asyncProperty(scenario, run), {
      seed,
      numRuns: Number(process.env.FC_RUNS ?? 25),
      endOnFailure: true,
    });
  });
});
