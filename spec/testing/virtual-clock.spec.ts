import assert from 'node:assert/strict';
import { promisify } from 'node:util';
import { MockKafka, VirtualClock } from '../../lib/testing';

/** The VirtualClock of the testing kit: Node's timer semantics, on virtual time. */
describe('testing kit: VirtualClock', () => {
  let clock: VirtualClock | undefined;
  afterEach(() => clock?.uninstall());

  it("serves timers with Node's semantics: delays coerced and at least 1 ms, refresh re-arms the delay, promisify", async () => {
    clock = new VirtualClock({ start: 0 });
    clock.install();
    const fired: string[] = [];
    setTimeout(() => fired.push(`string@${Date.now()}`), '100' as never);
    setTimeout(() => fired.push(`zero@${Date.now()}`), 0);
    const every = setInterval(() => fired.push(`interval@${Date.now()}`), 0);
    const t = setTimeout(() => fired.push(`refreshed@${Date.now()}`), 50);
    await clock.advance(30);
    t.refresh(); // 50 ms from now: at 80
    clearInterval(every);
    const slept = promisify(setTimeout)(20, 'value');
    await clock.advance(100);
    assert.equal(await slept, 'value');
    assert.deepEqual(
      fired.filter((f) => !f.startsWith('interval')),
      ['zero@1', 'refreshed@80', 'string@100'],
    );
    assert.deepEqual(fired.filter((f) => f.startsWith('interval')).slice(0, 2), [
      'interval@1',
      'interval@2',
    ]);
    assert.throws(() => setTimeout('not a function' as never, 1), { code: 'ERR_INVALID_ARG_TYPE' });
  });

  it('refuses what would hang or corrupt time, and a second installed clock', async () => {
    clock = new VirtualClock();
    clock.install();
    await assert.rejects(clock.advance(Number.NaN), RangeError);
    await assert.rejects(clock.advance(Number.POSITIVE_INFINITY), RangeError);
    await assert.rejects(
      clock.runUntil(() => false, { withinMs: -1 }),
      RangeError,
    );
    await assert.rejects(
      clock.runUntil(() => false),
      /nothing left to run/,
    );
    assert.throws(() => new VirtualClock().install(), /another VirtualClock is installed/);
    assert.throws(() => clock!.install(), /installed already/);
    clock.uninstall();
    const other = new VirtualClock();
    other.install();
    other.uninstall();
    assert.equal(typeof setTimeout(() => undefined, 1).unref, 'function', 'real timers are back');
  });

  it('autoAdvance: time never moves backwards, and runUntil rejects when nothing is left to run', async () => {
    clock = new VirtualClock({ start: 0, autoAdvance: true });
    clock.install();
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    assert.equal(Date.now(), 10_000);
    await clock.advance(5);
    assert.ok(Date.now() >= 10_000, `time is ${Date.now()}`);
    await assert.rejects(
      clock.runUntil(() => false),
      /nothing left to run/,
    );
  });

  it('an exception of a timer callback reaches the real event loop, as without the clock', async () => {
    clock = new VirtualClock();
    clock.install();
    const listeners = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    let caught: unknown;
    process.once('uncaughtException', (err) => (caught = err));
    try {
      setTimeout(() => {
        throw new Error('boom');
      }, 10);
      await clock.advance(10);
      clock.uninstall();
      await new Promise((resolve) => setImmediate(resolve)); // the rethrow runs before this
    } finally {
      for (const l of listeners) process.on('uncaughtException', l);
    }
    assert.match(String(caught), /boom/);
    assert.match(String(clock.uncaught[0]), /boom/);
  });

  it('manual mode: immediates run as they come, so kit calls resolve without moving time', async () => {
    clock = new VirtualClock({ start: 0 });
    clock.install();
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 2 });
    const member = await mock.joinGroup('g', [topic]); // connect and join answer by immediates
    await clock.runUntil(() => member.assignment().length === 2, { what: 'the member assigned' });
    await mock.close();
    assert.equal(Date.now(), 0, 'no timer was needed');
  });

  it('re-arms a timeout refreshed after it fired, moves performance.now() with virtual time, and never lets immediates starve timers', async () => {
    clock = new VirtualClock({ start: 0, autoAdvance: true });
    clock.install();
    const fired: number[] = [];
    const t = setTimeout(() => fired.push(Date.now()), 50);
    await new Promise((resolve) => setTimeout(resolve, 60));
    t.refresh(); // fired at 50: again at 60 + 50
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(fired, [50, 110]);
    const cleared = setTimeout(() => fired.push(-1), 10);
    clearTimeout(cleared);
    cleared.refresh();
    const perfBefore = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    assert.equal(Math.round(performance.now() - perfBefore), 10_000);
    // A loop of immediates waiting for time to pass: Node's timers run between them.
    const deadline = Date.now() + 1000;
    setTimeout(() => undefined, 1000);
    while (Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
    assert.ok(!fired.includes(-1), 'a cleared timeout stays cleared');
    clock.uninstall();
    assert.ok(performance.now() < perfBefore, 'performance.now() is real again');
  });
});
