import assert from 'node:assert/strict';
import { CommitDoubts } from '../../lib/internal/commit/commit-doubts';

const T = 'orders';

describe('CommitDoubts', () => {
  it('has no doubt for a partition nothing was recorded for', () => {
    const d = new CommitDoubts(100);
    assert.equal(d.of(T, 0), undefined);
    assert.equal(d.openUntil(T, 0), 0);
    assert.equal(d.size, 0);
  });

  it('keeps every doubtful offset of a partition and the latest time, per partition', () => {
    const d = new CommitDoubts(100);
    d.add([{ topic: T, partition: 0, offset: 5 }], 1000);
    d.add(
      [
        { topic: T, partition: 0, offset: 7 },
        { topic: T, partition: 1, offset: 3 },
      ],
      1500,
    );
    d.add([{ topic: T, partition: 0, offset: 5 }], 1200);
    assert.deepEqual(d.of(T, 0), { topic: T, partition: 0, offsets: [5, 7], since: 1500 });
    assert.deepEqual(d.of(T, 1)?.offsets, [3]);
    assert.equal(d.openUntil(T, 0), 1600);
    assert.equal(d.size, 2);
  });

  it('settles a doubt only when its offset was known after the window passed', () => {
    const d = new CommitDoubts(100);
    d.add([{ topic: T, partition: 0, offset: 5 }], 1000);
    d.settle(T, 0, 1099); // still within the window: the commit may land after this
    assert.ok(d.of(T, 0));
    d.settle(T, 1, 5000); // another partition
    assert.ok(d.of(T, 0));
    d.settle(T, 0, 1100);
    assert.equal(d.of(T, 0), undefined);
  });

  it('keeps a doubt recorded again after an earlier settle time', () => {
    const d = new CommitDoubts(100);
    d.add([{ topic: T, partition: 0, offset: 5 }], 1000);
    d.add([{ topic: T, partition: 0, offset: 6 }], 2000);
    d.settle(T, 0, 1500);
    assert.deepEqual(d.of(T, 0)?.offsets, [5, 6]);
  });
});
