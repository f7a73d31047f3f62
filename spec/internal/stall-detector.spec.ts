import assert from 'node:assert/strict';
import { RunningHandler, StallDetector } from '../../lib/internal/observe/stall-detector';

describe('StallDetector', () => {
  const setup = (thresholdMs = 100) => {
    let now = 1000;
    const events: string[] = [];
    const d = new StallDetector(
      thresholdMs,
      {
        stalled: (h, ms) => events.push(`stalled ${h.partition}@${h.offset} ${ms}`),
        completed: (h, ms) => events.push(`completed ${h.partition}@${h.offset} ${ms}`),
      },
      () => now,
      () => 1_000_000 + now,
    );
    return { d, events, advance: (ms: number) => (now += ms), now: () => now };
  };

  it('reports a handler once when it passes the threshold and again when it completes', () => {
    const { d, events, advance, now } = setup();
    const a = d.start('t', 0, 5, 1, now());
    advance(99);
    d.sweep();
    assert.deepEqual(events, []);
    advance(1);
    d.sweep();
    d.sweep();
    assert.deepEqual(events, ['stalled 0@5 100']);
    assert.equal(d.stalledCount, 1);
    assert.deepEqual(
      d.stalled().map((s) => [s.topic, s.partition, s.offset, s.elapsedMs]),
      [['t', 0, 5, 100]],
    );
    advance(50);
    d.end(a);
    assert.deepEqual(events, ['stalled 0@5 100', 'completed 0@5 150']);
    assert.equal(d.stalledCount, 0);
    assert.equal(d.stallsTotal, 1);
    d.dispose();
  });

  it('says nothing about handlers that end in time', () => {
    const { d, events, advance, now } = setup();
    const a = d.start('t', 0, 1, 1, now());
    advance(50);
    d.end(a);
    advance(500);
    d.sweep();
    assert.deepEqual(events, []);
    assert.deepEqual(d.stalled(), []);
    d.dispose();
  });

  it('reports only the handlers past the threshold among many, oldest first', () => {
    const { d, events, advance, now } = setup();
    d.start('t', 0, 1, 1, now());
    advance(60);
    const b = d.start('t', 1, 1, 1, now());
    advance(40);
    d.start('t', 2, 1, 1, now());
    d.sweep();
    assert.deepEqual(events, ['stalled 0@1 100']);
    advance(60);
    d.sweep();
    assert.deepEqual(events, ['stalled 0@1 100', 'stalled 1@1 100']);
    d.end(b);
    assert.equal(d.stalledCount, 1);
    d.dispose();
  });

  it('tracks nothing when disabled (threshold 0)', () => {
    const { d, events, advance, now } = setup(0);
    assert.equal(d.start('t', 0, 1, 1, now()), undefined);
    const own = new RunningHandler('t', 0, 2, 1, now());
    d.track(own);
    assert.equal(own.tracked, false);
    advance(1_000_000);
    d.sweep();
    d.end(undefined);
    d.end(own);
    assert.deepEqual(events, []);
    assert.equal(d.enabled, false);
  });

  it('ignores an unknown or repeated end', () => {
    const { d, advance, now } = setup();
    const a = d.start('t', 0, 1, 1, now());
    advance(200);
    d.sweep();
    d.end(a);
    d.end(a);
    d.end(new RunningHandler('t', 9, 9, 1, now()));
    assert.equal(d.stalledCount, 0);
    d.dispose();
  });

  it('keeps start order when handlers end in any order (first, middle, last)', () => {
    const { d, events, advance, now } = setup();
    const hs = [0, 1, 2, 3, 4].map((p) => {
      const h = d.start('t', p, 1, 1, now());
      advance(10);
      return h;
    });
    d.end(hs[2]);
    d.end(hs[0]);
    d.end(hs[4]);
    const late = d.start('t', 5, 1, 1, now());
    advance(100);
    d.sweep();
    assert.deepEqual(events, ['stalled 1@1 140', 'stalled 3@1 120', 'stalled 5@1 100']);
    assert.deepEqual(
      d.stalled().map((s) => s.partition),
      [1, 3, 5],
    );
    d.end(hs[3]);
    d.end(late);
    d.end(hs[1]);
    assert.equal(d.stalledCount, 0);
    d.start('t', 6, 1, 1, now());
    advance(100);
    d.sweep();
    assert.equal(events.at(-1), 'stalled 6@1 100');
    d.dispose();
  });

  it('tracks records built by the caller, and reports start times on the wall clock in whole ms', () => {
    const { d, events, advance } = setup();
    const own = new RunningHandler('t', 7, 3, 2, d.clock());
    d.track(own);
    d.track(own);
    advance(100.75);
    d.sweep();
    assert.deepEqual(events, ['stalled 7@3 100']);
    const [s] = d.stalled();
    assert.deepEqual(s, {
      topic: 't',
      partition: 7,
      offset: 3,
      generation: 2,
      startedAt: 1_001_000, // the wall clock when it started
      elapsedMs: 100,
    });
    d.end(own);
    assert.deepEqual(events, ['stalled 7@3 100', 'completed 7@3 100']);
    d.dispose();
  });
});
