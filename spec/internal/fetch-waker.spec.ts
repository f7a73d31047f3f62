import assert from 'node:assert/strict';
import pino from 'pino';
import type { ConsumerClient } from '../../lib/internal/binding/consumer-client';
import {
  FetchWaker,
  LEARN_INTERVAL_MS,
  MIN_WAKE_INTERVAL_MS,
} from '../../lib/internal/loop/fetch-waker';
import { PartitionControl } from '../../lib/internal/partition/partition-control';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import type { TopicPartition } from '../../lib/types';
import { flowOverFake } from '../helpers/client';

/**
 * A binding whose metadata names each partition's leader and which records every request; answers
 * are held until the test releases them (answerAll), and the waker's clock is the test's.
 */
function world(opts: { leaders: Record<string, number[]>; held: TopicPartition[] }) {
  const requests: string[] = [];
  const pending: (() => void)[] = [];
  let open = true;
  let metadataFails = false;
  let clock = 0;
  const raw = {
    getMetadata: (
      o: { topic?: string },
      cb: (err: Error | null, md?: { topics: { name: string; partitions: unknown[] }[] }) => void,
    ) => {
      requests.push(`metadata(${o.topic ?? '*'})`);
      pending.push(() =>
        metadataFails
          ? cb(new Error('broker down'))
          : cb(null, {
              topics: Object.entries(opts.leaders)
                .filter(([name]) => o.topic === undefined || name === o.topic)
                .map(([name, leaders]) => ({
                  name,
                  partitions: leaders.map((leader, id) => ({ id, leader })),
                })),
            }),
      );
    },
    queryWatermarkOffsets: (topic: string, partition: number, _t: number, cb: () => void) => {
      requests.push(`listOffsets(${topic}[${partition}])`);
      pending.push(cb);
    },
  };
  let held = opts.held;
  /** Held partitions librdkafka fetches now (none unless the test says otherwise). */
  let fetching: () => Iterable<TopicPartition> = () => [];
  const waker = new FetchWaker(
    {
      client: { raw } as unknown as ConsumerClient,
      logger: pino({ level: 'silent' }),
      canRequest: () => open,
      held: () => held,
      fetching: () => fetching(),
      timeoutMs: 1000,
    },
    () => clock,
  );
  const internals = waker as unknown as {
    busy: boolean;
    timer: unknown;
    topics: Map<string, unknown>;
  };
  /** Answers every request sent so far, and those their answers led to, until the waker is idle. */
  const answerAll = async (): Promise<void> => {
    for (let i = 0; i < 200; i++) {
      await new Promise((r) => setImmediate(r));
      const batch = pending.splice(0);
      for (const answer of batch) answer();
      if (batch.length > 0) continue;
      if (internals.busy) continue;
      if (internals.timer !== undefined) {
        await new Promise((r) => setTimeout(r, MIN_WAKE_INTERVAL_MS + 10));
        continue;
      }
      return;
    }
  };
  /** The waker was taught the leaders (a rebalance) and the clock moved past every interval. */
  const learned = async (): Promise<void> => {
    waker.wake();
    await answerAll();
    requests.length = 0;
    clock += MIN_WAKE_INTERVAL_MS;
  };
  return {
    waker,
    requests,
    answerAll,
    learned,
    internals,
    advance: (ms: number) => (clock += ms),
    setHeld: (tps: TopicPartition[]) => (held = tps),
    setFetching: (tps: TopicPartition[] | (() => Iterable<TopicPartition>)) =>
      (fetching = typeof tps === 'function' ? tps : () => tps),
    close: () => (open = false),
    failMetadata: (fails = true) => (metadataFails = fails),
  };
}

const tps = (topic: string, ...partitions: number[]): TopicPartition[] =>
  partitions.map((partition) => ({ topic, partition }));

describe('FetchWaker', () => {
  it('asks the topic’s metadata, then one ListOffsets from each leader of the held partitions', async () => {
    // Partitions 0..5 of t: leaders 1, 2, 3, 1, 2, 3; held: 0, 1, 3, 4 (leaders 1 and 2 only).
    const w = world({ leaders: { t: [1, 2, 3, 1, 2, 3] }, held: tps('t', 0, 1, 3, 4) });
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests, ['metadata(t)', 'listOffsets(t[0])', 'listOffsets(t[1])']);
    assert.equal(w.waker.wakes, 1);
    assert.equal(w.waker.requests, 3);
  });

  it('wakes the leaders of every topic held, each broker once', async () => {
    const w = world({
      leaders: { a: [1, 2], b: [2, 3] },
      held: [...tps('a', 0, 1), ...tps('b', 0, 1)],
    });
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests, [
      'metadata(a)',
      'metadata(b)',
      'listOffsets(a[0])', // broker 1
      'listOffsets(a[1])', // broker 2
      'listOffsets(b[1])', // broker 3 (broker 2 is woken already)
    ]);
  });

  it('asks every topic in one metadata request when more than a few are held', async () => {
    const leaders: Record<string, number[]> = {};
    const held: TopicPartition[] = [];
    for (let i = 0; i < 20; i++) {
      leaders[`t${i}`] = [1 + (i % 3)];
      held.push({ topic: `t${i}`, partition: 0 });
    }
    const w = world({ leaders, held });
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests, [
      'metadata(*)',
      'listOffsets(t0[0])',
      'listOffsets(t1[0])',
      'listOffsets(t2[0])',
    ]);
    // The 17th topic and later are known too: a resume there wakes its leader, no metadata.
    w.advance(MIN_WAKE_INTERVAL_MS);
    w.requests.length = 0;
    w.waker.resumed([{ topic: 't16', partition: 0 }]);
    await w.answerAll();
    assert.deepEqual(w.requests, ['listOffsets(t16[0])']);
  });

  it('coalesces wakes asked while one runs into one more, with the partitions held then', async () => {
    const w = world({ leaders: { t: [1, 2] }, held: tps('t', 0) });
    w.waker.wake();
    w.waker.wake();
    w.waker.wake();
    w.setHeld(tps('t', 1));
    await w.answerAll();
    // The leaders of t were learned a moment ago: the second wake does not ask them again.
    assert.deepEqual(w.requests, ['metadata(t)', 'listOffsets(t[0])', 'listOffsets(t[1])']);
    assert.equal(w.waker.wakes, 2);
  });

  it('asks a topic’s leaders again only after LEARN_INTERVAL_MS, and forgets topics no longer held', async () => {
    const w = world({ leaders: { a: [1], b: [2] }, held: tps('a', 0) });
    await w.learned();
    w.setHeld(tps('b', 0));
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests, ['metadata(b)', 'listOffsets(b[0])']);
    assert.deepEqual([...w.internals.topics.keys()], ['b'], 'a is no longer held: forgotten');
    w.requests.length = 0;
    w.advance(LEARN_INTERVAL_MS);
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests, ['metadata(b)', 'listOffsets(b[0])'], 'asked again');
  });

  it('sends nothing when nothing is held, or once the client may not send requests', async () => {
    const w = world({ leaders: { t: [1] }, held: [] });
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests, []);
    const closing = world({ leaders: { t: [1] }, held: tps('t', 0) });
    closing.waker.wake();
    closing.close(); // disconnecting while the metadata request is out
    await closing.answerAll();
    assert.deepEqual(closing.requests, ['metadata(t)'], 'no ListOffsets after the close');
  });

  it('a broker down: the metadata request fails once, and resumes do not each ask again', async () => {
    const w = world({ leaders: { t: [1] }, held: tps('t', 0) });
    w.failMetadata();
    w.waker.wake();
    await w.answerAll();
    for (let i = 0; i < 5; i++) {
      w.waker.resumed(tps('t', 0));
      await w.answerAll();
    }
    assert.deepEqual(w.requests, ['metadata(t)'], 'each would hold a pool thread up to 2 s');
    w.failMetadata(false);
    w.advance(LEARN_INTERVAL_MS);
    w.waker.resumed(tps('t', 0));
    await w.answerAll();
    assert.deepEqual(w.requests, ['metadata(t)', 'metadata(t)', 'listOffsets(t[0])']);
  });

  describe('after a resume', () => {
    it('learns the leaders first when it does not know them (a full wake)', async () => {
      const w = world({ leaders: { t: [1, 2] }, held: tps('t', 0, 1) });
      w.waker.resumed(tps('t', 0));
      await w.answerAll();
      assert.deepEqual(w.requests, ['metadata(t)', 'listOffsets(t[0])', 'listOffsets(t[1])']);
    });

    it('wakes only the leader of a resumed partition, and only when nothing else it serves is fetched', async () => {
      // t[0], t[2] on broker 1; t[1], t[3] on broker 2.
      const w = world({ leaders: { t: [1, 2, 1, 2] }, held: tps('t', 0, 1, 2, 3) });
      await w.learned();
      w.setFetching(tps('t', 1)); // broker 2 fetches t[1]; broker 1 fetches nothing
      w.waker.resumed(tps('t', 0)); // broker 1: asleep → woken
      w.waker.resumed(tps('t', 3)); // broker 2: awake (t[1]) → nothing
      await w.answerAll();
      assert.deepEqual(w.requests, ['listOffsets(t[0])']);
      assert.equal(w.waker.resumeWakes, 1);
    });

    it('partitions resumed together do not keep each other’s leader from being woken', async () => {
      // The application's resume() of everything: all partitions of broker 1 at once.
      const T = 'orders';
      const w = world({ leaders: { [T]: [1, 1] }, held: tps(T, 0, 1) });
      const { flow, owned } = flowOverFake({ maxBufferedMessages: 4 }, (list) =>
        w.waker.resumed(list),
      );
      for (const p of [0, 1]) {
        const c = new PartitionControl(T, p, 1, tpKey(T, p), () => undefined);
        owned.take(c);
      }
      w.setFetching(() => flow.fetching());
      await w.learned();
      flow.pause();
      flow.resume();
      await w.answerAll();
      assert.deepEqual(w.requests, ['listOffsets(orders[0])'], 'broker 1 is woken once');
    });

    it('never asks about a partition without a leader (it would wait the whole timeout)', async () => {
      const w = world({ leaders: { t: [-1, 2] }, held: tps('t', 0, 1) });
      await w.learned();
      w.waker.resumed(tps('t', 0));
      await w.answerAll();
      assert.deepEqual(w.requests, [], 'leader unknown, and asked a moment ago');
    });

    it('sends one request at a time (each holds a libuv pool thread), every leader in turn', async () => {
      const w = world({ leaders: { t: [1, 2, 3] }, held: tps('t', 0, 1, 2) });
      await w.learned();
      w.waker.resumed(tps('t', 0, 1, 2));
      assert.deepEqual(w.requests, ['listOffsets(t[0])']);
      await w.answerAll();
      assert.deepEqual(w.requests, ['listOffsets(t[0])', 'listOffsets(t[1])', 'listOffsets(t[2])']);
      assert.equal(w.waker.resumeWakes, 3);
    });

    it('wakes a leader at most every MIN_WAKE_INTERVAL_MS, once more with the latest partition', async () => {
      const w = world({ leaders: { t: [1, 1, 1] }, held: tps('t', 0, 1, 2) });
      await w.learned();
      w.waker.resumed(tps('t', 0));
      await w.answerAll();
      const start = Date.now();
      // Resumes as fast as the answers come: without the interval, one request each.
      for (let i = 0; i < 50; i++) {
        w.waker.resumed(tps('t', 1 + (i % 2)));
        await new Promise((r) => setImmediate(r));
      }
      assert.deepEqual(w.requests, ['listOffsets(t[0])'], 'within the interval: queued');
      w.advance(MIN_WAKE_INTERVAL_MS);
      await w.answerAll();
      assert.deepEqual(w.requests, ['listOffsets(t[0])', 'listOffsets(t[2])'], 'then the latest');
      assert.ok(Date.now() - start < 5_000);
    });
  });
});
