import assert from 'node:assert/strict';
import type { KafkaMessage } from '../lib';
import { decodeCompleted } from '../lib/internal/commit/completed-codec';
import {
  committedOffsets,
  createTopic,
  produce,
  readAll,
  uniqueName,
  waitFor,
} from './helpers/kafka';
import { useConsumers } from './helpers/consumers';
import { useTestOutput } from './helpers/output';
import { seededRandom } from './helpers/random';

/**
 * Key-ordered concurrency and the completed-offset memory against the real broker: different keys
 * of one partition really run concurrently while each key keeps its order, and after a crash the
 * next owner redoes only the unfinished work when the memory is on.
 */
describe('ordering and completed-offset memory (real broker)', function () {
  this.timeout(120_000);
  const output = useTestOutput();
  const { consumer, subs } = useConsumers(output, { commitIntervalMs: 100 });

  it("'key' runs different keys of one partition concurrently and each key in offset order", async () => {
    const seed = Number(process.env.TEST_SEED ?? Date.now() % 1_000_000);
    console.log(`      seed=${seed}`);
    const random = seededRandom(seed);
    const topic = uniqueName('keyed');
    await createTopic(topic, 1);
    // A skewed workload: many keys, a few slow messages among many fast ones.
    const records = Array.from({ length: 300 }, () => ({
      key: `k${Math.floor(random() * 20)}`,
      value: random() < 0.05 ? 'slow' : 'fast',
      partition: 0,
    }));
    await produce(topic, records);
    const c = consumer('keyed', {
      config: { 'group.id': uniqueName('keyed-group') },
      topics: [topic],
    });
    const running = new Set<string>();
    let inFlight = 0;
    let maxInFlight = 0;
    const violations: string[] = [];
    const lastOfKey = new Map<string, number>();
    let done = 0;
    subs.push(
      c
        .process(
          async (m: KafkaMessage) => {
            const key = m.key?.toString() ?? '';
            if (running.has(key)) violations.push(`${key} concurrent at ${m.offset}`);
            if ((lastOfKey.get(key) ?? -1) > m.offset)
              violations.push(`${key} out of order at ${m.offset}`);
            lastOfKey.set(key, m.offset);
            running.add(key);
            inFlight += 1;
            maxInFlight = Math.max(maxInFlight, inFlight);
            await new Promise((r) => setTimeout(r, m.value?.toString() === 'slow' ? 50 : 1));
            inFlight -= 1;
            running.delete(key);
            done += 1;
          },
          { ordering: 'key', partitionConcurrency: 8 },
        )
        .subscribe(),
    );
    await waitFor(() => done === records.length, { timeoutMs: 60_000, what: 'all records' });
    await c.close();
    assert.deepEqual(violations, []);
    assert.ok(
      maxInFlight > 1,
      `different keys of one partition ran concurrently (max ${maxInFlight})`,
    );
    assert.ok(maxInFlight <= 8);
    assert.deepEqual(await committedOffsets(c.settings.groupId, topic, 1), [records.length]);
  });

  for (const remember of [true, false]) {
    it(`after a crash the next owner redoes ${remember ? 'only unfinished work (memory on)' : 'everything above the commit (memory off)'}`, async () => {
      const topic = uniqueName('remember');
      await createTopic(topic, 1);
      const count = 200;
      // Key k0's first record hangs in the first owner, holding the committed offset at 0 while
      // the other keys finish above it.
      await produce(
        topic,
        Array.from({ length: count }, (_, i) => ({
          key: `k${i % 10}`,
          value: `v${i}`,
          partition: 0,
        })),
      );
      const groupId = uniqueName('remember-group');
      const memory = remember ? { rememberCompleted: { topic: `${topic}.completed` } } : {};
      const first = consumer('first', {
        config: { 'group.id': groupId },
        topics: [topic],
        drainTimeoutMs: 1500,
        ...memory,
      });
      const done = new Set<number>();
      let hang!: () => void;
      const sub1 = first
        .process(
          async (m: KafkaMessage) => {
            if (m.offset === 0) {
              await new Promise<void>((r) => (hang = r));
              return;
            }
            done.add(m.offset);
          },
          { ordering: 'key', partitionConcurrency: 8 },
        )
        .subscribe();
      const others = Array.from({ length: count }, (_, i) => i).filter((i) => i % 10 !== 0);
      await waitFor(() => others.every((o) => done.has(o)), {
        timeoutMs: 60_000,
        what: 'the other keys',
      });
      // Let a commit (and its memory) go out, then "crash": the second owner starts from Kafka.
      await waitFor(async () => (await committedOffsets(groupId, topic, 1))[0] === 0, {
        timeoutMs: 15_000,
        what: 'the commit held at the hung record',
      });
      if (remember) {
        // The memory covering every finished record is confirmed in its topic (a later write
        // carries no more: nothing else finishes while k0's first record hangs).
        await waitFor(
          async () => {
            const written = await readAll(`${topic}.completed`, 1).catch(() => []);
            const last = written[written.length - 1]?.value;
            if (!last) return false;
            const memory = decodeCompleted(last);
            return memory.base === 0 && others.every((o) => memory.completed.includes(o));
          },
          { timeoutMs: 15_000, what: 'the completed-offset memory of every finished record' },
        );
      }
      // The first owner goes away without the hung record: its close-time revoke waits for it
      // until the drain deadline, then commits only what is contiguous (offset 0 stays
      // uncommitted), as a crash right after the last commit would.
      sub1.unsubscribe();
      await first.close();
      hang();
      const committedAfterFirst = (await committedOffsets(groupId, topic, 1))[0] ?? 0;

      const second = consumer('second', {
        config: { 'group.id': groupId },
        topics: [topic],
        ...memory,
      });
      const redone: number[] = [];
      subs.push(
        second
          .process((m: KafkaMessage) => void redone.push(m.offset), {
            ordering: 'key',
            partitionConcurrency: 8,
          })
          .subscribe(),
      );
      await waitFor(async () => (await committedOffsets(groupId, topic, 1))[0] === count, {
        timeoutMs: 60_000,
        what: 'the second owner to finish',
      });
      const again = redone.filter((o) => done.has(o));
      console.log(
        `      memory ${remember ? 'on' : 'off'}: committed after the first owner ${committedAfterFirst}, redone ${again.length} of ${done.size} finished`,
      );
      // Nothing lost: the second owner got everything the first did not finish.
      for (let o = committedAfterFirst; o < count; o++) {
        if (!done.has(o)) assert.ok(redone.includes(o), `offset ${o} lost`);
      }
      if (remember) assert.equal(again.length, 0, `redone with the memory: ${again.join(',')}`);
      else
        assert.ok(
          again.length > 0,
          'without the memory the finished work above the commit is redone',
        );
    });
  }
});
