import assert from 'node:assert/strict';
import { PartitionControl } from '../../lib/internal/partition/partition-control';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import type { KafkaMessage } from '../../lib';
import { flowOverFake } from '../helpers/client';

const T = 'orders';

function setup() {
  /** What the engine was told was resumed (it wakes the broker threads: fetch-waker.ts). */
  const resumed: string[] = [];
  const { flow, fake, owned } = flowOverFake(
    { maxBufferedMessages: 4, resumeThreshold: 0.5 },
    (tps) => resumed.push(tps.map((tp) => tp.partition).join(',')),
  );
  const add = (partition: number): PartitionControl => {
    const c = new PartitionControl(T, partition, 1, tpKey(T, partition), () => undefined);
    owned.take(c);
    return c;
  };
  const message = (c: PartitionControl, offset: number): KafkaMessage =>
    ({
      topic: T,
      partition: c.partition,
      offset,
      generation: 1,
      size: 1,
      signal: c.signal,
    }) as unknown as KafkaMessage;
  return { flow, fake, add, message, owned, resumed };
}

describe('FlowControl', () => {
  it('pauses a partition whose buffer is full and resumes it below the threshold', () => {
    const s = setup();
    const c = s.add(0);
    const pushed = [0, 1, 2, 3].map((o) => s.message(c, o));
    for (const m of pushed) {
      c.push(m);
      s.flow.afterPush(c);
    }
    assert.equal(c.paused, true);
    assert.equal(s.fake().isPaused(T, 0), true);
    c.ack(pushed[0]!);
    s.flow.afterAck(c);
    assert.equal(c.paused, true, 'still above the resume threshold (2)');
    c.ack(pushed[1]!);
    s.flow.afterAck(c);
    assert.equal(c.paused, false);
    assert.equal(s.fake().isPaused(T, 0), false);
    assert.deepEqual(s.resumed, ['0'], 'the resume was reported (to wake its broker thread)');
  });

  it('reports the resumes librdkafka gets, and which partitions it fetches', () => {
    const s = setup();
    const [c0, c1, c2] = [s.add(0), s.add(1), s.add(2)];
    const fill = (c: PartitionControl) => {
      const pushed = [0, 1, 2, 3].map((o) => s.message(c, o));
      for (const m of pushed) {
        c.push(m);
        s.flow.afterPush(c);
      }
      return pushed;
    };
    const p0 = fill(c0);
    fill(c1);
    s.flow.pause([{ topic: T, partition: 2 }]);
    assert.deepEqual(
      [...s.flow.fetching()].map((c) => c.partition),
      [],
      '0 and 1 full, 2 paused by the application',
    );
    s.flow.pause([{ topic: T, partition: 0 }]);
    for (const m of p0) c0.ack(m);
    s.flow.afterAck(c0);
    assert.deepEqual(s.resumed, [], 'backpressure lifted under an application pause: no resume');
    s.flow.resume([{ topic: T, partition: 0 }]);
    s.flow.resume([{ topic: T, partition: 1 }]); // still full: stays paused
    assert.deepEqual(s.resumed, ['0']);
    assert.deepEqual(
      [...s.flow.fetching()].map((c) => c.partition),
      [0],
    );
    assert.equal(c2.paused, false);
  });

  it('keeps a partition the application paused paused when backpressure lifts', () => {
    const s = setup();
    const c = s.add(0);
    const pushed = [0, 1, 2, 3].map((o) => s.message(c, o));
    for (const m of pushed) {
      c.push(m);
      s.flow.afterPush(c);
    }
    s.flow.pause([{ topic: T, partition: 0 }]);
    for (const m of pushed) c.ack(m);
    s.flow.afterAck(c);
    assert.equal(c.paused, false, 'backpressure lifted');
    assert.equal(s.fake().isPaused(T, 0), true, 'the application pause holds');
    s.flow.resume();
    assert.equal(s.fake().isPaused(T, 0), false);
  });

  it('re-applies application pauses to partitions assigned again, and pause() to future ones', () => {
    const s = setup();
    s.flow.pause([{ topic: T, partition: 1 }]);
    const c0 = s.add(0);
    const c1 = s.add(1);
    s.flow.assigned([c0, c1]);
    assert.equal(s.fake().isPaused(T, 0), false);
    assert.equal(s.fake().isPaused(T, 1), true);
    s.flow.pause();
    const c2 = s.add(2);
    s.flow.assigned([c2]);
    assert.equal(s.fake().isPaused(T, 2), true, 'pause() without partitions covers new ones');
    assert.deepEqual(
      s.flow
        .pausedByUser()
        .map((p) => p.partition)
        .sort(),
      [0, 1, 2],
    );
  });

  it('never touches a partition through a stream that no longer owns it', () => {
    const s = setup();
    const old = s.add(0);
    const pushed = [0, 1, 2, 3].map((o) => s.message(old, o));
    for (const m of pushed) old.push(m);
    s.add(0); // a newer assignment owns the partition now
    s.flow.afterPush(old);
    assert.equal(old.paused, false);
    assert.equal(s.fake().isPaused(T, 0), false);
  });
});
