import assert from 'node:assert/strict';
import type { KafkaMessage } from '../../lib';
import { BatchSink } from '../../lib/internal/process/batch-sink';
import { until } from '../helpers/harness';

const m = (offset: number): KafkaMessage =>
  ({ topic: 't', partition: 0, offset, size: 1 }) as unknown as KafkaMessage;

function sink(maxSize: number, maxWaitMs: number) {
  const batches: number[][] = [];
  let completed = 0;
  const s = new BatchSink(
    {
      push: (b: KafkaMessage[]) => batches.push(b.map((x) => x.offset)),
      sourceComplete: () => (completed += 1),
    },
    maxSize,
    maxWaitMs,
  );
  return { s, batches, completed: () => completed };
}

describe('BatchSink (processBatch gathering)', () => {
  it('hands over full batches at once, in order', () => {
    const t = sink(2, 60_000);
    [0, 1, 2, 3, 4].forEach((o) => t.s.next(m(o)));
    assert.deepEqual(t.batches, [
      [0, 1],
      [2, 3],
    ]);
    t.s.dispose();
  });

  it('hands over a partial batch maxWaitMs after its first message', async () => {
    const t = sink(10, 1);
    t.s.next(m(0));
    t.s.next(m(1));
    await until(() => t.batches.length === 1, 'the timed flush');
    assert.deepEqual(t.batches, [[0, 1]]);
  });

  it('drops a partial batch when the stream completes (never started: the next owner gets it)', async () => {
    const t = sink(10, 1);
    t.s.next(m(0));
    t.s.complete();
    assert.equal(t.completed(), 1);
    // A later sink's timer fires after the first one's would have.
    const probe = sink(10, 1);
    probe.s.next(m(0));
    await until(() => probe.batches.length === 1, "the probe's timed flush");
    assert.deepEqual(t.batches, []);
  });
});
