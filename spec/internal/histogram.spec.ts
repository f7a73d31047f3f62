import assert from 'node:assert/strict';
import { Histogram } from '../../lib/internal/observe/histogram';

describe('Histogram', () => {
  it('is empty before the first observation', () => {
    const s = new Histogram([0.01, 0.1]).snapshot();
    assert.deepEqual(s, {
      count: 0,
      sumMs: 0,
      maxMs: 0,
      buckets: [
        { leMs: 10, count: 0 },
        { leMs: 100, count: 0 },
      ],
    });
  });

  it('keeps cumulative bucket counts, the sum and the maximum; values above the last bound count only in count', () => {
    const h = new Histogram([0.01, 0.1]);
    for (const ms of [1, 10, 50, 100, 5000]) h.observe(ms);
    const s = h.snapshot();
    assert.equal(s.count, 5);
    assert.equal(s.sumMs, 5161);
    assert.equal(s.maxMs, 5000);
    assert.deepEqual(
      s.buckets.map((b) => b.count),
      [2, 4],
    );
  });
});
