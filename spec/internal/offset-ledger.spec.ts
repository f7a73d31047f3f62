import assert from 'node:assert/strict';
import fc from 'fast-check';
import { OffsetLedger } from '../../lib/internal/partition/offset-ledger';

describe('OffsetLedger', () => {
  it('has nothing to commit before any delivery without a start position', () => {
    assert.equal(new OffsetLedger().committable(), undefined);
  });

  it('commits the start position when nothing was delivered', () => {
    assert.equal(new OffsetLedger(42).committable(), 42);
  });

  it('knows the next offset to read: the start, then one past the last delivered, or the position beyond', () => {
    assert.equal(new OffsetLedger().nextToRead, undefined);
    const l = new OffsetLedger(3);
    assert.equal(l.nextToRead, 3);
    [3, 4, 5].forEach((o) => l.deliver(o));
    assert.equal(l.nextToRead, 6, 'whatever is finished');
    assert.equal(l.committable(), 3);
    l.advanceTo(9); // a transaction marker and aborted records skipped
    assert.equal(l.nextToRead, 9);
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

  describe('advanceTo (the client position past offsets never delivered)', () => {
    it('commits up to a trailing transaction marker once everything delivered is finished', () => {
      // A committed transaction at 0..2, its commit marker at 3: the client's position is 4.
      const l = new OffsetLedger();
      [0, 1, 2].forEach((o) => l.deliver(o));
      l.advanceTo(4);
      assert.equal(l.committable(), 0, 'never past an unfinished offset');
      l.complete(0);
      l.complete(2);
      assert.equal(l.committable(), 1);
      l.complete(1);
      assert.equal(l.committable(), 4, 'the marker is committed too');
    });

    it('skips an aborted transaction read under read_committed (nothing delivered from it)', () => {
      const l = new OffsetLedger(0);
      l.advanceTo(13);
      assert.equal(l.committable(), 13);
    });

    it('keeps the first unfinished offset when more is delivered after the position', () => {
      const l = new OffsetLedger();
      l.deliver(5);
      l.complete(5);
      l.advanceTo(8); // 6 and 7: a marker and an aborted record
      l.deliver(8);
      assert.equal(l.committable(), 8);
      l.complete(8);
      assert.equal(l.committable(), 9);
    });

    it('ignores positions at or below the last delivered offset, and positions going back', () => {
      const l = new OffsetLedger();
      [1, 2].forEach((o) => l.deliver(o));
      l.complete(1);
      l.complete(2);
      l.advanceTo(2);
      assert.equal(l.committable(), 3);
      l.advanceTo(10);
      l.advanceTo(6);
      assert.equal(l.committable(), 10);
    });

    it('property: never passes an unfinished delivered offset', () => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.integer({ min: 1, max: 4 }), fc.boolean(), fc.boolean()), {
            minLength: 1,
            maxLength: 200,
          }),
          (steps) => {
            // Each step: skip `gap - 1` offsets (markers, aborted records), deliver one, maybe
            // finish the oldest unfinished, maybe report the position (one past the delivery).
            const l = new OffsetLedger(0);
            const unfinished: number[] = [];
            let offset = -1;
            for (const [gap, finish, report] of steps) {
              offset += gap;
              l.deliver(offset);
              unfinished.push(offset);
              if (finish) l.complete(unfinished.shift()!);
              if (report) l.advanceTo(offset + 1 + (gap % 2));
              const c = l.committable()!;
              if (unfinished.length > 0) assert.equal(c, unfinished[0]);
              else assert.ok(c > offset);
            }
          },
        ),
        { seed: Number(process.env.FC_SEED ?? 20261130), numRuns: 200 },
      );
    });
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

  it('property: agrees with a model over long, mostly consecutive runs completed in any order', () => {
    // Runs of consecutive offsets (the direct lookup) with occasional gaps (the binary search),
    // windows past the compaction threshold, and the window reset when everything is finished.
    const seed = Number(process.env.FC_SEED ?? 20261201);
    console.log(`      offset-ledger model property: FC_SEED=${seed}`);
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            deliver: fc.integer({ min: 0, max: 1500 }),
            gapEvery: fc.integer({ min: 0, max: 50 }),
            finish: fc.array(fc.nat(), { maxLength: 1500 }),
            probe: fc.integer({ min: -3, max: 3 }),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        (rounds) => {
          const l = new OffsetLedger();
          const open: number[] = []; // delivered, unfinished, increasing
          const done = new Set<number>();
          let next = 0;
          for (const r of rounds) {
            for (let k = 0; k < r.deliver; k++) {
              if (r.gapEvery > 0 && k % r.gapEvery === r.gapEvery - 1) next += 2;
              l.deliver(next);
              open.push(next);
              next += 1;
            }
            for (const f of r.finish) {
              if (open.length === 0) break;
              // Mostly the oldest (in-order acks), sometimes any.
              const at = f % 4 === 0 ? f % open.length : 0;
              const o = open.splice(at, 1)[0]!;
              assert.equal(l.complete(o), true);
              done.add(o);
              assert.equal(l.complete(o), false, 'already finished');
            }
            const probe = (open[0] ?? next) + r.probe;
            if (!open.includes(probe)) assert.equal(l.complete(probe), false);
            assert.equal(l.unfinished, open.length);
            assert.equal(l.idle, open.length === 0);
            let maxDone = -1;
            for (const d of done) maxDone = Math.max(maxDone, d);
            const expected = open[0] ?? (maxDone >= 0 ? maxDone + 1 : undefined);
            assert.equal(l.committable(), expected);
            const above = l.completedAbove(Number.MAX_SAFE_INTEGER);
            const first = open[0];
            const model =
              first === undefined ? [] : [...done].filter((d) => d > first).sort((a, b) => a - b);
            assert.deepEqual(above, model);
          }
        },
      ),
      { seed, numRuns: 150 },
    );
  });
});
