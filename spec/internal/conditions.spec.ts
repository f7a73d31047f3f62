import assert from 'node:assert/strict';
import { Conditions, settlesWithin } from '../../lib/internal/loop/wait-conditions';

describe('Conditions', () => {
  it('resolves at once when the condition already holds', async () => {
    const c = new Conditions();
    assert.equal(await c.until(() => true, Date.now() + 1000), true);
    assert.equal(c.waiting, 0);
  });

  it('resolves true on the change that makes the condition hold', async () => {
    const c = new Conditions();
    let state = 0;
    const waiting = c.until(() => state === 2, Date.now() + 5000);
    state = 1;
    c.changed();
    assert.equal(c.waiting, 1, 'still waiting after an unrelated change');
    state = 2;
    c.changed();
    assert.equal(await waiting, true);
    assert.equal(c.waiting, 0, 'the waiter is removed');
  });

  it('resolves with the condition at the deadline when nobody announced a change', async () => {
    const c = new Conditions();
    let state = false;
    const started = Date.now();
    const first = c.until(() => state, Date.now() + 30);
    assert.equal(await first, false);
    assert.ok(Date.now() - started >= 25);
    state = true; // changed without an announcement: seen at the next deadline
    assert.equal(await c.until(() => state, Date.now() + 30), true);
  });

  it('re-checks a condition on unannounced state every pollMs', async () => {
    const c = new Conditions();
    let state = false;
    setTimeout(() => (state = true), 20);
    const started = Date.now();
    assert.equal(await c.until(() => state, Date.now() + 5000, 5), true);
    assert.ok(Date.now() - started < 1000);
  });

  it('lets a waiter that resolves during changed() not disturb the others', async () => {
    const c = new Conditions();
    let state = 0;
    const a = c.until(() => state >= 1, Date.now() + 5000);
    const b = c.until(() => state >= 1, Date.now() + 5000);
    state = 1;
    c.changed();
    assert.deepEqual(await Promise.all([a, b]), [true, true]);
  });
});

describe('settlesWithin', () => {
  it('tells whether a promise settled in time, rejected ones included', async () => {
    assert.equal(await settlesWithin(Promise.resolve(), 10), true);
    assert.equal(await settlesWithin(Promise.reject(new Error('x')), 10), true);
    assert.equal(await settlesWithin(new Promise(() => undefined), 10), false);
  });
});
