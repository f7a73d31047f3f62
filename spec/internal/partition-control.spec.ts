import assert from 'node:assert/strict';
import { AlreadySubscribedError, ErrorCode } from '../../lib';
import type { KafkaMessage } from '../../lib';
import { PartitionControl } from '../../lib/internal/partition/partition-control';

const message = (c: PartitionControl, offset: number): KafkaMessage => ({
  topic: c.topic,
  partition: c.partition,
  offset,
  key: null,
  value: null,
  headers: [],
  timestamp: 0,
  size: 1,
  generation: c.generation,
  signal: c.signal,
});

const control = (): PartitionControl =>
  new PartitionControl('t', 0, 1, 't\u00000', () => undefined);

describe('PartitionControl.attach', () => {
  it('hands an attached sink what was pushed before and after, and completes it at the end', () => {
    const c = control();
    c.push(message(c, 0));
    const seen: number[] = [];
    let completed = 0;
    c.attach({ next: (m) => seen.push(m.offset), complete: () => (completed += 1) });
    c.push(message(c, 1));
    c.end();
    assert.equal(c.push(message(c, 2)), false);
    assert.deepEqual(seen, [0, 1]);
    assert.equal(completed, 1);
  });

  it('completes a sink attached after the end at once', () => {
    const c = control();
    c.end();
    let completed = 0;
    c.attach({ next: () => assert.fail('nothing to deliver'), complete: () => (completed += 1) });
    assert.equal(completed, 1);
  });

  it('accepts a single consumer: attach after messages$, and messages$ after attach, are refused', () => {
    const a = control();
    a.messages$.subscribe();
    assert.throws(
      () => a.attach({ next: () => undefined, complete: () => undefined }),
      (e: unknown) => e instanceof AlreadySubscribedError && /single/.test(e.message),
    );
    const b = control();
    b.attach({ next: () => undefined, complete: () => undefined });
    let error: unknown;
    b.messages$.subscribe({ error: (e: unknown) => (error = e) });
    assert.match(String(error), /single subscriber/);
    assert.ok(error instanceof AlreadySubscribedError, 'a typed error');
    assert.equal(error.code, ErrorCode.AlreadySubscribed);
  });

  it('stops delivering to a detached sink', () => {
    const c = control();
    const seen: number[] = [];
    const detach = c.attach({ next: (m) => seen.push(m.offset), complete: () => undefined });
    c.push(message(c, 0));
    detach();
    c.push(message(c, 1));
    assert.deepEqual(seen, [0]);
  });
});
