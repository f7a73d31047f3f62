import assert from 'node:assert/strict';
import fc from 'fast-check';
import { OffsetLedger } from '../../lib/internal/offset-ledger';

describe('OffsetLedger', () => {
  it('has nothing to commit before any delivery without a start position', () => {
    assert.equal(new OffsetLedger().committable(), undefined);
  });

  it('commits the start position when nothing was delivered', () => {
    assert.equal(new OffsetLedger(42).committable(), 42);
  });

  it('commits one past the last finished offset when completed in order', () => {
    const l = new OffsetLedger();
    [5, 6, 7].forEach((o) => l.deliver(o));
    l.complete(5);
    assert.equal(l.committable(), 6);
    l.complete(6);
    l.complete(7);
    assert.equal(l.committable(), 8);
    assert.ok(l.idle);
  });

  it('never passes an unfinished offset when completions arrive out of order', () => {
    const l = new OffsetLedger(5);
    [5, 6, 7].forEach((o) => l.deliver(o));
    l.complete(7);
    assert.equal(l.committable(), 5);
    l.complete(6);
    assert.equal(l.committable(), 5);
    l.complete(5);
    assert.equal(l.committable(), 8);
  });

  it('treats gaps in delivered offsets (compaction, transaction markers) as contiguous', () => {
    const l = new OffsetLedger();
    [3, 10, 11, 20].forEach((o) => l.deliver(o));
    l.complete(3);
    assert.equal(l.committable(), 10);
    l.complete(10);
    l.complete(11);
    assert.equal(l.committable(), 20);
    l.complete(20);
    assert.equal(l.committable(), 21);
  });

  it('ignores completions of offsets never delivered or already finished', () => {
    const l = new OffsetLedger();
    l.deliver(1);
    assert.equal(l.complete(2), false);
    assert.equal(l.complete(1), true);
    assert.equal(l.complete(1), false);
    assert.equal(l.committable(), 2);
  });

  it('rejects deliveries that go backwards', () => {
    const l = new OffsetLedger();
    l.deliver(5);
    assert.throws(() => l.deliver(5), RangeError);
    assert.throws(() => l.deliver(4), RangeError);
  });

  it('counts unfinished offsets', () => {
    const l = new OffsetLedger();
    [1, 2, 3].forEach((o) => l.deliver(o));
    l.complete(2);
    assert.equal(l.unfinished, 2);
    assert.equal(l.idle, false);
  });

  it('stays correct across compaction of long runs', () => {
    const l = new OffsetLedger();
    for (let o = 0; o < 10_000; o++) l.deliver(o);
    for (let o = 0; o < 9_000; o++) l.complete(o);
    assert.equal(l.committable(), 9_000);
    l.complete(9_999);
    assert.equal(l.committable(), 9_000);
    for (let o = 9_000; o < 9_999; o++) l.complete(o);
    assert.equal(l.committable(), 10_000);
    assert.equal(l.unfinished, 0);
  });

  it('property: the committable offset is exactly the first unfinished delivered offset', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 5_000 }), { minLength: 1, maxLength: 300 }),
        fc.array(fc.nat(), { maxLength: 400 }),
        fc.option(fc.integer({ min: 0, max: 10 }), { nil: undefined }),
        (raw, picks, start) => {
          const delivered = [...raw].sort((a, b) => a - b);
          const l = new OffsetLedger(start);
          const finished = new Set<number>();
          let committedSoFar = -1;
          delivered.forEach((o) => l.deliver(o));
          for (const p of picks) {
            const o = delivered[p % delivered.length]!;
            assert.equal(l.complete(o), !finished.has(o));
            finished.add(o);
            const c = l.committable()!;
            const firstUnfinished = delivered.find((d) => !finished.has(d));
            const expected = firstUnfinished ?? delivered[delivered.length - 1]! + 1;
            assert.equal(c, expected);
            // Invariant: everything below the committable offset that was delivered is finished.
            for (const d of delivered) if (d < c) assert.ok(finished.has(d));
            // Monotonic.
            assert.ok(c >= committedSoFar);
            committedSoFar = c;
          }
          assert.equal(l.unfinished, delivered.length - finished.size);
        },
      ),
      { seed: Number(process.env.FC_SEED ?? 20261130), numRuns: 300 },
    );
  });
});
