import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { Subscription } from 'rxjs';
import { ReactiveConsumer } from '../lib';
import type { KafkaMessage, ReactiveConsumerOptions, TopicPartition } from '../lib';
import { decodeCompleted, encodeCompleted, toRuns } from '../lib/internal/commit/completed-codec';
import type { CompletedMemory } from '../lib/internal/commit/completed-codec';
import type { CompletedStore } from '../lib/internal/commit/completed-store';
import { tpKey } from '../lib/internal/binding/rdkafka';
import { FakeConsumer } from './fakes/fake-consumer';
import { T, tp, until } from './helpers/harness';

/** An in-memory store that records the order of writes relative to the fake's commits. */
class MemoryStore implements CompletedStore {
  readonly records = new Map<string, CompletedMemory>();
  readonly log: string[] = [];
  constructor(private readonly fake: () => FakeConsumer | undefined) {}
  load(partitions: readonly TopicPartition[]): Promise<Map<string, CompletedMemory>> {
    const out = new Map<string, CompletedMemory>();
    for (const p of partitions) {
      const r = this.records.get(tpKey(p.topic, p.partition));
      if (r) out.set(tpKey(p.topic, p.partition), r);
    }
    return Promise.resolve(out);
  }
  save(entries: readonly (TopicPartition & CompletedMemory)[]): Promise<void> {
    for (const e of entries) {
      // Round trip through the codec, as the Kafka store does.
      this.records.set(tpKey(e.topic, e.partition), decodeCompleted(encodeCompleted(e, 512)));
      this.log.push(`save ${e.partition}@${e.base}+${e.completed.length}`);
    }
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** A consumer over a fake that shares its logs and commits with `from` (a restart). */
function start(
  from: FakeConsumer | undefined,
  store: MemoryStore,
  remember = true,
  extra: Partial<ReactiveConsumerOptions> = {},
) {
  let created: FakeConsumer | undefined;
  const consumer = new ReactiveConsumer(
    {
      config: { 'bootstrap.servers': 'fake:9092', 'group.id': 'g' },
      topicConfig: { 'auto.offset.reset': 'earliest' },
      topics: [T],
      commitIntervalMs: 5,
      consumeTimeoutMs: 1,
      rememberCompleted: remember,
      ...extra,
    },
    {
      consumerFactory: ((g: Record<string, unknown>) => {
        created = new FakeConsumer(g);
        if (from) {
          const a = from as unknown as { logs: Map<string, unknown>; commits: Map<string, number> };
          const b = created as unknown as {
            logs: Map<string, unknown>;
            commits: Map<string, number>;
          };
          for (const [k, v] of a.logs) b.logs.set(k, v);
          for (const [k, v] of a.commits) b.commits.set(k, v);
        }
        return created as never;
      }) as never,
      storeFactory: () => store,
    },
  );
  return { consumer, fake: () => created as FakeConsumer };
}

describe('completed-offset memory', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('encodes and decodes any ascending set of offsets above its base (codec v1)', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 2 ** 40 }),
        fc.uniqueArray(fc.integer({ min: 1, max: 5000 }), { maxLength: 300 }),
        (base, deltas) => {
          const completed = deltas.map((d) => base + d).sort((a, b) => a - b);
          const back = decodeCompleted(encodeCompleted({ base, completed }, 100_000));
          assert.deepEqual(back, { base, completed });
        },
      ),
    );
    assert.throws(() => decodeCompleted(Buffer.from([2, 0, 0])), /version/);
    assert.throws(() => decodeCompleted(Buffer.from([1, 5, 1, 0])), /truncated/);
  });

  it('caps the memory at maxRuns runs, keeping the lowest', () => {
    assert.deepEqual(toRuns([1, 2, 3, 5, 7, 8], 2), [
      [1, 3],
      [5, 1],
    ]);
    const m = decodeCompleted(encodeCompleted({ base: 0, completed: [1, 2, 3, 5, 7, 8] }, 2));
    assert.deepEqual(m.completed, [1, 2, 3, 5]);
  });

  it('after a crash, the next owner redoes only what was unfinished (random keys and concurrency)', async function () {
    this.timeout(60_000);
    const seed = Number(process.env.FC_SEED ?? Date.now() % 1_000_000);
    console.log(`      fast-check seed=${seed}`);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 4, max: 80 }),
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 2, max: 8 }),
        fc.boolean(),
        async (count, keys, partitionConcurrency, remember) => {
          const store = new MemoryStore(() => undefined);
          const first = start(undefined, store, remember);
          const done = new Set<number>();
          const release: (() => void)[] = [];
          const sub1 = first.consumer
            .process(
              async (m: KafkaMessage) => {
                // Key 0's first message hangs (until the crash): the other keys finish around it.
                if (m.offset === 0) return new Promise<void>((r) => release.push(r));
                await new Promise((r) => setImmediate(r));
                done.add(m.offset);
              },
              { ordering: 'key', partitionConcurrency },
            )
            .subscribe();
          await until(() => first.fake().isConnected(), 'connect');
          first.fake().produce(T, 0, count);
          setKeys(first.fake(), keys);
          first.fake().rebalanceAssign([tp(0)]);
          const expectedDone = [...Array(count).keys()].filter((o) => o % keys !== 0);
          await until(() => expectedDone.every((o) => done.has(o)), 'the other keys done');
          await until(
            () =>
              !remember ||
              (store.records.get(tpKey(T, 0))?.completed.length ?? 0) === expectedDone.length,
            'the memory written',
          );
          await until(() => first.fake().commits.get(`${T}[0]`) === 0, 'the commit held at 0');
          // Crash: the second owner starts from what Kafka holds now (committed offset 0).
          const second = start(first.fake(), store, remember);
          const redelivered: number[] = [];
          subs.push(
            second.consumer
              .process((m: KafkaMessage) => void redelivered.push(m.offset), {
                ordering: 'key',
                partitionConcurrency,
              })
              .subscribe(),
          );
          await until(() => second.fake().isConnected(), 'connect again');
          second.fake().rebalanceAssign([tp(0)]);
          await until(
            () => second.fake().commits.get(`${T}[0]`) === count,
            'the second owner to finish',
          );
          await second.consumer.close();
          release.forEach((r) => r());
          sub1.unsubscribe();
          const unfinished = [...Array(count).keys()].filter((o) => !done.has(o));
          // Nothing lost; with the memory, nothing finished is redone; without it, all of it is.
          assert.deepEqual(
            [...redelivered].sort((a, b) => a - b),
            remember ? unfinished : [...Array(count).keys()],
          );
        },
      ),
      { seed, numRuns: 12, endOnFailure: true },
    );
  });

  it('ignores a memory written for another committed offset (redoes instead of skipping)', async () => {
    const store = new MemoryStore(() => undefined);
    store.records.set(tpKey(T, 0), { base: 3, completed: [5, 6] });
    const c = start(undefined, store, true);
    const seen: number[] = [];
    subs.push(c.consumer.process((m: KafkaMessage) => void seen.push(m.offset)).subscribe());
    await until(() => c.fake().isConnected(), 'connect');
    c.fake().produce(T, 0, 8);
    c.fake().commits.set(`${T}[0]`, 4); // committed 4, memory for 3
    c.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 4, 'from 4 on');
    assert.deepEqual(seen, [4, 5, 6, 7]);
    await c.consumer.close();
  });
});

describe('completed-offset memory and a replay the application asked for', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('an onAssign start other than the committed offset runs everything from there (the memory is not applied)', async () => {
    const store = new MemoryStore(() => undefined);
    store.records.set(tpKey(T, 0), { base: 3, completed: [5, 6] });
    const c = start(undefined, store, true, { onAssign: () => 'earliest' });
    const seen: number[] = [];
    subs.push(c.consumer.process((m: KafkaMessage) => void seen.push(m.offset)).subscribe());
    await until(() => c.fake().isConnected(), 'connect');
    c.fake().produce(T, 0, 8);
    c.fake().commits.set(`${T}[0]`, 3); // committed 3: the memory would apply at 3
    c.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 8, 'the whole replay');
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7]);
    await c.consumer.close();
  });

  it('the onAssign hook keeping the committed offset still uses the memory', async () => {
    const store = new MemoryStore(() => undefined);
    store.records.set(tpKey(T, 0), { base: 3, completed: [5, 6] });
    const c = start(undefined, store, true, { onAssign: () => 'committed' });
    const seen: number[] = [];
    subs.push(c.consumer.process((m: KafkaMessage) => void seen.push(m.offset)).subscribe());
    await until(() => c.fake().isConnected(), 'connect');
    c.fake().produce(T, 0, 8);
    c.fake().commits.set(`${T}[0]`, 3);
    c.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 3, '3, 4 and 7');
    assert.deepEqual(seen, [3, 4, 7]);
    await c.consumer.close();
  });

  it('a seek back replaces the memory written before it: after a crash the replay is redone, not skipped', async () => {
    const store = new MemoryStore(() => undefined);
    const first = start(undefined, store, true);
    const seen: number[] = [];
    const hang = new Promise<void>(() => undefined);
    let seeking = false;
    const sub1 = first.consumer
      .process(
        (m: KafkaMessage) => {
          seen.push(m.offset);
          // Offset 3 hangs the first time (5 and 6 finish above it: remembered), and after the
          // seek everything from 3 hangs (the crash comes before any of it finishes).
          if (m.offset === 3 || (seeking && m.offset > 3)) return hang;
          return undefined;
        },
        { partitionConcurrency: 4 },
      )
      .subscribe();
    await until(() => first.fake().isConnected(), 'connect');
    first.fake().produce(T, 0, 7);
    first.fake().rebalanceAssign([tp(0)]);
    await until(
      () => store.records.get(tpKey(T, 0))?.completed.includes(6) === true,
      'the memory of 4, 5 and 6 above the committed 3',
    );
    seeking = true;
    await first.consumer.seek(tp(0), { offset: 3 });
    await until(
      () => store.records.get(tpKey(T, 0))?.completed.length === 0,
      'the seek’s stream replaced the memory (nothing finished above 3 since)',
    );
    // "Crash": the next owner starts from the committed offset and the store.
    const second = start(first.fake(), store, true);
    const again: number[] = [];
    subs.push(second.consumer.process((m: KafkaMessage) => void again.push(m.offset)).subscribe());
    await until(() => second.fake().isConnected(), 'connect the next owner');
    second.fake().rebalanceAssign([tp(0)]);
    await until(() => again.length === 4, 'the replay from 3');
    assert.deepEqual(again, [3, 4, 5, 6]);
    await second.consumer.close();
    // The crashed owner's hung handlers are cut off at its close deadline.
    sub1.unsubscribe();
    await first.consumer.close({ timeoutMs: 500 });
  });
});

function setKeys(fake: FakeConsumer, keys: number): void {
  const logs = (fake as unknown as { logs: Map<string, { offset: number; key: unknown }[]> }).logs;
  for (const m of logs.get(`${T}[0]`) ?? []) m.key = Buffer.from(`k${m.offset % keys}`);
}
