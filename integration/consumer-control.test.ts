import assert from 'node:assert/strict';
import {
  commitOffsetsForGroup,
  committedOffsets,
  createTopic,
  produce,
  uniqueName,
  waitFor,
} from './helpers/kafka';
import { useConsumers } from './helpers/consumers';
import { useTestOutput } from './helpers/output';

/**
 * Start positions, seek, pause/resume and batches against the real broker, checked against what
 * Kafka holds (committed offsets) and what the handlers saw.
 */
describe('consumer control (real broker)', function () {
  this.timeout(120_000);
  const output = useTestOutput();
  const { consumer, subs } = useConsumers(output);

  async function topicWith(count: number, partitions = 1): Promise<string> {
    const topic = uniqueName('ctl');
    await createTopic(topic, partitions);
    await produce(
      topic,
      Array.from({ length: count }, (_, i) => ({
        key: `k${i}`,
        value: `v${i}`,
        partition: i % partitions,
      })),
    );
    return topic;
  }

  it('starts each partition where the onAssign hook says: an explicit offset, a timestamp, the committed offset', async () => {
    const topic = uniqueName('start');
    await createTopic(topic, 3);
    const before = Date.now();
    await produce(
      topic,
      Array.from({ length: 30 }, (_, i) => ({ key: `a${i}`, value: 'old', partition: i % 3 })),
    );
    await waitFor(() => Date.now() > before + 50, { timeoutMs: 1000, what: 'the clock to move' });
    const cut = Date.now();
    await produce(
      topic,
      Array.from({ length: 15 }, (_, i) => ({ key: `b${i}`, value: 'new', partition: i % 3 })),
    );
    const groupId = uniqueName('start-group');
    await commitOffsetsForGroup(groupId, [{ topic, partition: 2, offset: 7 }]);
    const hookSaw: (number | undefined)[] = [];
    const c = consumer('start', {
      config: { 'group.id': groupId },
      topics: [topic],
      onAssign: (p) => {
        hookSaw[p.partition] = p.committed;
        if (p.partition === 0) return { offset: 8 };
        if (p.partition === 1) return { timestamp: cut };
        return 'committed';
      },
    });
    const seen: string[] = [];
    subs.push(
      c
        .process((m) => void seen.push(`${m.partition}@${m.offset}:${m.value?.toString()}`))
        .subscribe(),
    );
    // p0: offsets 8..14 (7); p1: the 5 'new' ones (10..14); p2: from committed 7 (7..14: 8).
    await waitFor(() => seen.length >= 20, { timeoutMs: 60_000, what: '20 records' });
    await waitFor(
      async () => JSON.stringify(await committedOffsets(groupId, topic, 3)) === '[15,15,15]',
      {
        timeoutMs: 15_000,
        what: 'commits at the end',
      },
    );
    assert.equal(seen.length, 20);
    const by = (p: number) => seen.filter((s) => s.startsWith(`${p}@`));
    assert.deepEqual(
      by(0).map((s) => Number(s.split('@')[1]?.split(':')[0])),
      [8, 9, 10, 11, 12, 13, 14],
    );
    assert.ok(by(1).length === 5 && by(1).every((s) => s.endsWith(':new')), by(1).join(' '));
    assert.equal(by(2).length, 8);
    assert.deepEqual(hookSaw, [undefined, undefined, 7]);
  });

  it('replays a partition with seek(): the replayed records run again and the commit ends at the end', async () => {
    const topic = await topicWith(20);
    const groupId = uniqueName('seek-group');
    const c = consumer('seek', { config: { 'group.id': groupId }, topics: [topic] });
    const seen: number[] = [];
    subs.push(c.process((m) => void seen.push(m.offset)).subscribe());
    await waitFor(() => seen.length === 20, { timeoutMs: 60_000, what: 'the first pass' });
    await waitFor(async () => (await committedOffsets(groupId, topic, 1))[0] === 20, {
      timeoutMs: 15_000,
      what: 'the first pass committed',
    });
    assert.equal(await c.seek({ topic, partition: 0 }, { offset: 12 }), 12);
    await waitFor(() => seen.length === 28, { timeoutMs: 30_000, what: 'the replay of 12..19' });
    assert.deepEqual(seen.slice(20), [12, 13, 14, 15, 16, 17, 18, 19]);
    await c.close();
    assert.deepEqual(await committedOffsets(groupId, topic, 1), [20]);
    assert.equal(seen.length, 28, 'nothing else ran twice');
  });

  it('pause() before the first assignment keeps it paused; resume() one partition, then all', async () => {
    const topic = await topicWith(10, 2);
    const groupId = uniqueName('pause-group');
    const c = consumer('pause', { config: { 'group.id': groupId }, topics: [topic] });
    c.pause();
    const seen: string[] = [];
    const assigned: number[] = [];
    subs.push(
      c.rebalances$.subscribe((e) => e.type === 'assigned' && assigned.push(e.partitions.length)),
    );
    subs.push(c.process((m) => void seen.push(`${m.partition}@${m.offset}`)).subscribe());
    await waitFor(() => assigned.length > 0, { timeoutMs: 60_000, what: 'an assignment' });
    await produce(topic, [{ key: 'late', value: 'late', partition: 0 }]);
    const producedAt = Date.now();
    // Paused: nothing arrives while the consume loop keeps polling for 1.5 s more (librdkafka had
    // every chance to fetch), and nothing is committed.
    await waitFor(() => c.metrics().lastPollAt > producedAt + 1500, {
      timeoutMs: 10_000,
      what: 'the consume loop to poll 1.5 s past the late record',
    });
    await waitFor(
      async () => (await committedOffsets(groupId, topic, 2)).every((o) => o === undefined),
      {
        timeoutMs: 5000,
        what: 'nothing committed while paused',
      },
    );
    assert.equal(seen.length, 0);
    assert.deepEqual(
      c
        .paused()
        .map((p) => p.partition)
        .sort(),
      [0, 1],
    );
    c.resume([{ topic, partition: 1 }]);
    await waitFor(() => seen.length === 5, { timeoutMs: 30_000, what: 'partition 1 only' });
    assert.ok(seen.every((s) => s.startsWith('1@')));
    c.resume();
    await waitFor(() => seen.length === 11, { timeoutMs: 30_000, what: 'everything' });
  });

  it('processBatch(): ordered batches per partition, every offset committed once', async () => {
    const topic = await topicWith(500, 4);
    const groupId = uniqueName('batch-group');
    const c = consumer('batch', { config: { 'group.id': groupId }, topics: [topic] });
    const seen = new Map<number, number[]>();
    let batches = 0;
    let largest = 0;
    subs.push(
      c
        .processBatch(
          async (b) => {
            batches += 1;
            largest = Math.max(largest, b.messages.length);
            const list = seen.get(b.partition) ?? [];
            list.push(...b.messages.map((m) => m.offset));
            seen.set(b.partition, list);
            await new Promise((r) => setImmediate(r));
          },
          { maxSize: 50, maxWaitMs: 50 },
        )
        .subscribe(),
    );
    await waitFor(() => [...seen.values()].reduce((n, l) => n + l.length, 0) === 500, {
      timeoutMs: 60_000,
      what: '500 records in batches',
    });
    await c.close();
    for (const [partition, offsets] of seen) {
      assert.deepEqual(
        offsets,
        Array.from({ length: offsets.length }, (_, i) => i),
        `p${partition} in order, once`,
      );
    }
    assert.ok(largest <= 50 && largest > 1, `largest batch ${largest}`);
    assert.ok(batches < 500);
    assert.deepEqual(await committedOffsets(groupId, topic, 4), [125, 125, 125, 125]);
  });
});
