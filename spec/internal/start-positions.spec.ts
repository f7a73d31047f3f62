import assert from 'node:assert/strict';
import { StartPositionError } from '../../lib';
import type { AssignedPartition, ReactiveConsumerOptions, StartPosition } from '../../lib';
import type { CompletedStore } from '../../lib/internal/commit/completed-store';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import { StartPositions } from '../../lib/internal/rebalance/start-positions';
import { clientOverFake } from '../helpers/client';

const T = 'orders';
const tp = (partition: number) => ({ topic: T, partition });

/** Start positions over a ConsumerClient over the fake; `commits` are the group's offsets. */
function setup(
  options: Partial<ReactiveConsumerOptions> = {},
  { commits = {}, store }: { commits?: Record<number, number>; store?: CompletedStore } = {},
) {
  const { client, fake, settings, logger } = clientOverFake({ commitTimeoutMs: 100, ...options });
  for (const [p, o] of Object.entries(commits)) fake().commits.set(`${T}[${p}]`, o);
  const positions = new StartPositions(client, settings, logger, store);
  return { positions, fake };
}

/** The rejection of `promise` (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  assert.fail('expected a rejection');
}

/** A memory store holding the given memories. */
const storeOf = (
  memories: Record<number, { base: number; completed: number[] }>,
  failure?: Error,
): CompletedStore => ({
  load: async () => {
    if (failure) throw failure;
    return new Map(Object.entries(memories).map(([p, m]) => [tpKey(T, Number(p)), m]));
  },
  save: async () => undefined,
  close: async () => undefined,
});

describe('StartPositions', () => {
  describe('whether an assignment waits for lookups', () => {
    it('needs none under auto.offset.reset=earliest without a hook or a memory', () => {
      const { positions } = setup({ topicConfig: { 'auto.offset.reset': 'earliest' } });
      assert.equal(positions.needed, false);
    });

    it('needs them under latest (librdkafka’s default), with an onAssign hook, or with a memory', () => {
      assert.equal(setup().positions.needed, true, 'default: latest');
      assert.equal(
        setup({
          config: {
            'bootstrap.servers': 'x',
            'group.id': 'g',
            'auto.offset.reset': 'end',
          } as unknown as ReactiveConsumerOptions['config'],
        }).positions.needed,
        true,
        'from the global config too',
      );
      const earliest = { topicConfig: { 'auto.offset.reset': 'smallest' as const } };
      assert.equal(setup({ ...earliest, onAssign: () => undefined }).positions.needed, true);
      assert.equal(setup(earliest, { store: storeOf({}) }).positions.needed, true);
    });
  });

  describe('resolve', () => {
    it('starts a partition with nothing committed at the end offset looked up now (latest)', async () => {
      const { positions, fake } = setup({}, { commits: { 1: 5 } });
      fake().watermarks.set(`${T}[0]`, 17);
      const { starts, memories } = await positions.resolve([tp(0), tp(1)], 1);
      assert.deepEqual([...starts], [[tpKey(T, 0), 17]], 'partition 1 resumes from its commit');
      assert.equal(memories.size, 0);
    });

    it('chooses no start under earliest: librdkafka resumes from the commit or the log start', async () => {
      const { positions } = setup({ topicConfig: { 'auto.offset.reset': 'earliest' } });
      const { starts } = await positions.resolve([tp(0)], 1);
      assert.equal(starts.size, 0);
    });

    it('asks the onAssign hook with the committed offset and generation, and honours each choice', async () => {
      const asked: AssignedPartition[] = [];
      const { positions, fake } = setup(
        {
          topicConfig: { 'auto.offset.reset': 'earliest' },
          onAssign: (p) => {
            asked.push(p);
            const choices: (StartPosition | undefined)[] = [{ offset: 7 }, 'latest', 'committed'];
            return choices[p.partition];
          },
        },
        { commits: { 2: 30, 3: 40 } },
      );
      fake().watermarks.set(`${T}[1]`, 99);
      const { starts } = await positions.resolve([tp(0), tp(1), tp(2), tp(3)], 4);
      assert.deepEqual(
        asked.map((p) => [p.partition, p.committed, p.generation]),
        [
          [0, undefined, 4],
          [1, undefined, 4],
          [2, 30, 4],
          [3, 40, 4],
        ],
      );
      assert.deepEqual(
        Object.fromEntries(starts),
        {
          [tpKey(T, 0)]: 7,
          [tpKey(T, 1)]: 99,
        },
        "'committed' and no choice leave partitions 2 and 3 to resume from their commits",
      );
    });

    it('turns a hook that throws into a StartPositionError naming the partition', async () => {
      const cause = new Error('no such tenant');
      const { positions } = setup({
        onAssign: ({ partition }) => {
          if (partition === 1) throw cause;
          return undefined;
        },
      });
      const err = await rejection(positions.resolve([tp(0), tp(1)], 1));
      assert.ok(err instanceof StartPositionError, String(err));
      assert.deepEqual(err.coordinates, tp(1));
      assert.match(err.message, /orders\[1\]: no such tenant/);
      assert.equal(err.cause, cause);
    });

    it('bounds the lookups: a hook that never answers fails with StartPositionError', async () => {
      const { positions } = setup({
        commitTimeoutMs: 50,
        onAssign: () => new Promise<undefined>(() => undefined),
      });
      const startedAt = Date.now();
      const err = await rejection(positions.resolve([tp(0)], 1));
      assert.ok(err instanceof StartPositionError);
      assert.match(err.message, /not resolved within 100 ms/);
      assert.ok(Date.now() - startedAt < 1000);
    });

    it('bounds the lookups without a hook too, with a plain error (the caller starts without them)', async () => {
      const { positions, fake } = setup({ commitTimeoutMs: 50 });
      fake().committed = () => fake(); // never answers
      const err = await rejection(positions.resolve([tp(0)], 1));
      assert.ok(!(err instanceof StartPositionError));
      assert.match(err.message, /timed out after 100 ms/);
    });

    it('turns a failed lookup the hook asked for into a StartPositionError', async () => {
      const { positions, fake } = setup({ onAssign: () => 'earliest' });
      fake().queryWatermarkOffsets = (_t, _p, _ms, cb) =>
        setImmediate(() => (cb as (err: unknown) => void)({ code: -185, message: 'timed out' }));
      const err = await rejection(positions.resolve([tp(0)], 1));
      assert.ok(err instanceof StartPositionError);
      assert.match(
        err.message,
        /Could not resolve the start positions the onAssign hook asked for/,
      );
    });
  });

  describe('completed-offset memories', () => {
    it('loads a memory only while the committed offset is the one it was written for', async () => {
      const store = storeOf({
        0: { base: 10, completed: [12, 13] },
        1: { base: 3, completed: [5] }, // committed moved to 8 since
        2: { base: 0, completed: [] },
      });
      const { positions } = setup(
        { topicConfig: { 'auto.offset.reset': 'earliest' } },
        { commits: { 0: 10, 1: 8, 2: 0 }, store },
      );
      const { memories } = await positions.resolve([tp(0), tp(1), tp(2)], 1);
      assert.deepEqual([...memories], [[tpKey(T, 0), [12, 13]]]);
    });

    it('starts without memories when the store cannot be read (work is redone, never skipped)', async () => {
      const store = storeOf({ 0: { base: 10, completed: [12] } }, new Error('store down'));
      const { positions } = setup(
        { topicConfig: { 'auto.offset.reset': 'earliest' } },
        { commits: { 0: 10 }, store },
      );
      const { memories } = await positions.resolve([tp(0)], 1);
      assert.equal(memories.size, 0);
    });
  });

  describe('resolvePosition', () => {
    it('resolves earliest, latest, committed, an offset and a timestamp', async () => {
      const { positions, fake } = setup({}, { commits: { 0: 4 } });
      fake().produce(T, 0, 6);
      const records = fake() as unknown as { logs: Map<string, { timestamp: number }[]> };
      records.logs.get(`${T}[0]`)?.forEach((m, i) => (m.timestamp = 1000 + i * 10));
      assert.equal(await positions.resolvePosition(tp(0), 'earliest'), 0);
      assert.equal(await positions.resolvePosition(tp(0), 'latest'), 6);
      assert.equal(await positions.resolvePosition(tp(0), 'committed'), 4);
      assert.equal(await positions.resolvePosition(tp(0), { offset: 3 }), 3);
      assert.equal(await positions.resolvePosition(tp(0), { timestamp: 1025 }), 3);
      assert.equal(
        await positions.resolvePosition(tp(0), { timestamp: 9999 }),
        6,
        'past the newest record: the end',
      );
    });

    it('rejects committed without a committed offset, and anything that is not a position', async () => {
      const { positions } = setup();
      const none = await rejection(positions.resolvePosition(tp(0), 'committed'));
      assert.ok(none instanceof StartPositionError);
      assert.match(none.message, /has no committed offset/);
      for (const bad of [{ offset: -1 }, { offset: 1.5 }, 'newest', null]) {
        const err = await rejection(positions.resolvePosition(tp(0), bad as never));
        assert.ok(err instanceof StartPositionError, JSON.stringify(bad));
        assert.match(err.message, /Expected a start position/);
      }
    });
  });
});
