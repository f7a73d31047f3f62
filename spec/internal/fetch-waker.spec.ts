import assert from 'node:assert/strict';
import pino from 'pino';
import type { ConsumerClient } from '../../lib/internal/consumer-client';
import { FetchWaker } from '../../lib/internal/fetch-waker';
import type { TopicPartition } from '../../lib/types';
import { until } from '../helpers/harness';

/**
 * A client whose metadata names each partition's leader and which records every request; answers
 * are held until the test releases them, so that coalescing can be observed.
 */
function world(opts: { leaders: Record<string, number[]>; held: TopicPartition[] }) {
  const requests: string[] = [];
  const pending: (() => void)[] = [];
  let open = true;
  let metadataFails = false;
  const raw = {
    getMetadata: (
      o: { topic: string },
      cb: (err: Error | null, md?: { topics: { name: string; partitions: unknown[] }[] }) => void,
    ) => {
      requests.push(`metadata(${o.topic})`);
      pending.push(() =>
        metadataFails
          ? cb(new Error('broker down'))
          : cb(null, {
              topics: Object.entries(opts.leaders).map(([name, leaders]) => ({
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
  /** Held partitions librdkafka fetches now (all of them unless the test says otherwise). */
  let fetching: TopicPartition[] | undefined;
  const waker = new FetchWaker({
    client: { raw } as unknown as ConsumerClient,
    logger: pino({ level: 'silent' }),
    canRequest: () => open,
    held: () => held,
    fetching: () => fetching ?? held,
    timeoutMs: 1000,
  });
  /** Answers every request sent so far (and, repeatedly, those their answers led to). */
  const answerAll = async (): Promise<void> => {
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setImmediate(r));
      const batch = pending.splice(0);
      if (batch.length === 0 && !waker['busy']) return;
      for (const answer of batch) answer();
    }
  };
  return {
    waker,
    requests,
    answerAll,
    setHeld: (tps: TopicPartition[]) => (held = tps),
    setFetching: (tps: TopicPartition[]) => (fetching = tps),
    close: () => (open = false),
    failMetadata: () => (metadataFails = true),
  };
}

const tps = (topic: string, ...partitions: number[]): TopicPartition[] =>
  partitions.map((partition) => ({ topic, partition }));

describe('FetchWaker', () => {
  it('asks each topic’s metadata, then one ListOffsets from each leader of the held partitions', async () => {
    // Partitions 0..5 of t: leaders 1, 2, 3, 1, 2, 3; held: 0, 1, 3, 4 (leaders 1 and 2 only).
    const w = world({ leaders: { t: [1, 2, 3, 1, 2, 3] }, held: tps('t', 0, 1, 3, 4) });
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests, ['metadata(t)', 'listOffsets(t[0])', 'listOffsets(t[1])']);
    assert.equal(w.waker.wakes, 1);
  });

  it('wakes the leaders of every topic held, each broker once', async () => {
    const w = world({
      leaders: { a: [1, 2], b: [2, 3] },
      held: [...tps('a', 0, 1), ...tps('b', 0, 1)],
    });
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests.slice(0, 2).sort(), ['metadata(a)', 'metadata(b)']);
    assert.deepEqual(w.requests.slice(2), [
      'listOffsets(a[0])', // broker 1
      'listOffsets(a[1])', // broker 2
      'listOffsets(b[1])', // broker 3 (broker 2 is woken already)
    ]);
  });

  it('coalesces wakes asked while one runs into one more, with the partitions held then', async () => {
    const w = world({ leaders: { t: [1, 2] }, held: tps('t', 0) });
    w.waker.wake();
    w.waker.wake();
    w.waker.wake();
    w.setHeld(tps('t', 1));
    await w.answerAll();
    assert.deepEqual(w.requests, [
      'metadata(t)',
      'listOffsets(t[0])',
      'metadata(t)',
      'listOffsets(t[1])',
    ]);
    assert.equal(w.waker.wakes, 2);
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

  it('gives up quietly when the metadata request fails, and wakes again next time', async () => {
    const w = world({ leaders: { t: [1] }, held: tps('t', 0) });
    w.failMetadata();
    w.waker.wake();
    await w.answerAll();
    assert.deepEqual(w.requests, ['metadata(t)']);
    await until(() => !w.waker['busy'], 'the failed wake ended');
    w.waker.wake();
    assert.equal(w.waker.wakes, 2);
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
      w.waker.wake();
      await w.answerAll();
      w.requests.length = 0;
      w.setFetching(tps('t', 1)); // broker 2 fetches t[1]; broker 1 fetches nothing
      w.waker.resumed(tps('t', 0)); // broker 1: asleep → woken
      w.waker.resumed(tps('t', 3)); // broker 2: awake (t[1]) → nothing
      await w.answerAll();
      assert.deepEqual(w.requests, ['listOffsets(t[0])']);
      assert.equal(w.waker.resumeWakes, 1);
    });

    it('sends one request at a time (each holds a libuv pool thread), every leader in turn', async () => {
      const w = world({ leaders: { t: [1, 2, 3] }, held: tps('t', 0, 1, 2) });
      w.waker.wake();
      await w.answerAll();
      w.requests.length = 0;
      w.setFetching([]);
      w.waker.resumed(tps('t', 0, 1, 2));
      assert.deepEqual(w.requests, ['listOffsets(t[0])']);
      await w.answerAll();
      assert.deepEqual(w.requests, ['listOffsets(t[0])', 'listOffsets(t[1])', 'listOffsets(t[2])']);
      assert.equal(w.waker.resumeWakes, 3);
    });

    it('queues a leader once and asks it about the latest partition resumed', async () => {
      const w = world({ leaders: { t: [1, 1, 1] }, held: tps('t', 0, 1, 2) });
      w.waker.wake();
      await w.answerAll();
      w.requests.length = 0;
      w.setFetching([]);
      w.waker.resumed(tps('t', 0));
      w.waker.resumed(tps('t', 1));
      w.waker.resumed(tps('t', 2));
      assert.deepEqual(w.requests, ['listOffsets(t[0])'], 'one in flight');
      await w.answerAll();
      assert.deepEqual(w.requests, ['listOffsets(t[0])', 'listOffsets(t[2])'], 'then the latest');
    });
  });
});
