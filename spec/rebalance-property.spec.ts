import assert from 'node:assert/strict';
import fc from 'fast-check';
import { lastValueFrom, toArray } from 'rxjs';
import { ReactiveConsumer } from '../lib';
import type { KafkaMessage, RebalanceEvent } from '../lib';
import { fakeFactory } from './fakes/fake-consumer';

const T = 't';
const P = 3;

interface Scenario {
  protocol: 'EAGER' | 'COOPERATIVE';
  counts: number[];
  concurrency: number;
  partitionConcurrency: number;
  ordering: 'default' | 'key' | 'none';
  /** Number of distinct keys (key = offset mod keys; 0 = no key at all). */
  keys: number;
  steps: { subset: number; gapMs: number }[];
  delays: number[];
}

const scenario: fc.Arbitrary<Scenario> = fc.record({
  protocol: fc.constantFrom('EAGER' as const, 'COOPERATIVE' as const),
  counts: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: P, maxLength: P }),
  concurrency: fc.integer({ min: 1, max: 6 }),
  partitionConcurrency: fc.integer({ min: 1, max: 4 }),
  ordering: fc.constantFrom('default' as const, 'key' as const, 'none' as const),
  keys: fc.integer({ min: 0, max: 4 }),
  steps: fc.array(
    fc.record({
      subset: fc.integer({ min: 1, max: 2 ** P - 1 }),
      gapMs: fc.integer({ min: 0, max: 8 }),
    }),
    {
      minLength: 1,
      maxLength: 6,
    },
  ),
  delays: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 16, maxLength: 16 }),
});

async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

const partitionsOf = (mask: number) =>
  [...Array(P).keys()].filter((p) => mask & (1 << p)).map((partition) => ({ topic: T, partition }));

async function run(s: Scenario): Promise<void> {
  const processed = new Map<string, number>(); // "p@o" → times
  const perGeneration = new Set<string>();
  const violations: string[] = [];
  const runningKeys = new Set<string>();
  const lastStartedOfKey = new Map<string, number>();
  const running = new Map<number, number>();
  const { factory, fake } = fakeFactory({
    protocol: s.protocol,
    commitResult: (offsets) => {
      // Invariant: a commit never passes a message whose handler has not succeeded.
      for (const o of offsets) {
        for (let off = 0; off < o.offset; off++) {
          if (!processed.has(`${o.partition}@${off}`))
            violations.push(`commit ${o.partition}@${o.offset} passes unprocessed ${off}`);
        }
      }
      return undefined;
    },
  });
  const consumer = new ReactiveConsumer(
    {
      config: { 'bootstrap.servers': 'fake:9092', 'group.id': 'g' },
      topicConfig: { 'auto.offset.reset': 'earliest' },
      topics: [T],
      commitIntervalMs: 5,
      consumeTimeoutMs: 1,
    },
    { consumerFactory: factory as never },
  );
  const events: RebalanceEvent[] = [];
  consumer.rebalances$.subscribe((e) => events.push(e));
  const done = lastValueFrom(
    consumer
      .process(
        async (m: KafkaMessage) => {
          const id = `${m.generation}/${m.partition}@${m.offset}`;
          if (perGeneration.has(id)) violations.push(`twice in one generation: ${id}`);
          perGeneration.add(id);
          // Same-key order (ordering 'key'): nothing of this key runs, and every earlier offset of
          // this key delivered in this generation already finished.
          const k = `${m.generation}/${m.partition}/${m.key?.toString() ?? '∅'}`;
          if (s.ordering === 'key' || s.partitionConcurrency === 1) {
            if (runningKeys.has(k)) violations.push(`key ${k} ran concurrently at ${m.offset}`);
            const last = lastStartedOfKey.get(k);
            if (last !== undefined && last > m.offset)
              violations.push(`key ${k}: ${m.offset} started after ${last}`);
          }
          runningKeys.add(k);
          lastStartedOfKey.set(k, m.offset);
          running.set(m.partition, (running.get(m.partition) ?? 0) + 1);
          if ((running.get(m.partition) ?? 0) > s.partitionConcurrency)
            violations.push(`more than ${s.partitionConcurrency} in flight on ${m.partition}`);
          const delay = s.delays[(m.partition * 7 + m.offset) % s.delays.length]!;
          if (delay > 0) await new Promise((r) => setTimeout(r, delay));
          runningKeys.delete(k);
          running.set(m.partition, (running.get(m.partition) ?? 1) - 1);
          processed.set(
            `${m.partition}@${m.offset}`,
            (processed.get(`${m.partition}@${m.offset}`) ?? 0) + 1,
          );
        },
        {
          concurrency: s.concurrency,
          partitionConcurrency: s.partitionConcurrency,
          ...(s.ordering === 'default' ? {} : { ordering: s.ordering }),
        },
      )
      .pipe(toArray()),
  );
  await until(() => fake().isConnected(), 'connect');
  s.counts.forEach((n, p) => fake().produce(T, p, n));
  // Keys: offset mod s.keys (0 keys: no key at all).
  const logs = (fake() as unknown as { logs: Map<string, { offset: number; key: unknown }[]> })
    .logs;
  for (const log of logs.values())
    for (const m of log) m.key = s.keys === 0 ? null : Buffer.from(`key${m.offset % s.keys}`);

  let assigned = 0;
  const settle = async () => until(() => !fake().revokeInProgress, 'the revoke to finish');
  for (const step of s.steps) {
    if (s.protocol === 'EAGER') {
      if (assigned !== 0) {
        fake().rebalanceRevoke(partitionsOf(assigned));
        await settle();
      }
      assigned = step.subset;
      fake().rebalanceAssign(partitionsOf(assigned));
    } else {
      const revoke = assigned & step.subset;
      if (revoke !== 0) {
        fake().rebalanceRevoke(partitionsOf(revoke));
        await settle();
        assigned &= ~revoke;
      } else {
        const add = step.subset & ~assigned;
        fake().rebalanceAssign(partitionsOf(add));
        assigned |= add;
      }
    }
    await new Promise((r) => setTimeout(r, step.gapMs));
  }
  // Finally own everything and finish the backlog.
  if (s.protocol === 'EAGER') {
    if (assigned !== 0) {
      fake().rebalanceRevoke(partitionsOf(assigned));
      await settle();
    }
    fake().rebalanceAssign(partitionsOf(2 ** P - 1));
  } else if (assigned !== 2 ** P - 1) {
    fake().rebalanceAssign(partitionsOf(2 ** P - 1 - assigned));
  }
  const total = s.counts.reduce((a, b) => a + b, 0);
  await until(() => processed.size === total, `all ${total} processed`);
  await consumer.close();
  await done;

  assert.deepEqual(violations, []);
  const dups = [...processed].filter(([, n]) => n > 1);
  assert.deepEqual(dups, [], 'no message processed twice across graceful rebalances');
  s.counts.forEach((n, p) =>
    assert.equal(fake().commits.get(`${T}[${p}]`) ?? 0, n, `final commit of ${p}`),
  );
  // Every revoke ran its phases in order.
  const byGen = new Map<number, string[]>();
  for (const e of events)
    if (e.type !== 'assigned')
      byGen.set(e.generation, [...(byGen.get(e.generation) ?? []), e.type]);
  for (const [gen, types] of byGen)
    assert.deepEqual(types, ['revoking', 'drained', 'committed', 'revoked'], `generation ${gen}`);
}

describe('rebalance properties (fake consumer)', function () {
  this.timeout(120_000);
  it('never commits past unprocessed work, never runs a message twice, keeps same-key order, loses nothing over random rebalances', async () => {
    const seed = Number(process.env.FC_SEED ?? Date.now() % 1_000_000);
    console.log(`      fast-check seed=${seed}`);
    await fc.assert(fc.asyncProperty(scenario, run), { seed, numRuns: 40, endOnFailure: true });
  });
});
