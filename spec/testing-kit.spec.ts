import assert from 'node:assert/strict';
import { EMPTY, NEVER, Subject } from 'rxjs';
import { nextRebalance, waitFor } from '../lib/testing/wait';

describe('the testing kit: waits', () => {
  it('waitFor rejects at its deadline even while an async condition is still pending', async () => {
    const started = Date.now();
    await assert.rejects(
      waitFor(() => new Promise<boolean>(() => undefined), { timeoutMs: 100, what: 'x' }),
      /waitFor: x did not hold within 100 ms/,
    );
    assert.ok(Date.now() - started < 2000, `rejected after ${Date.now() - started} ms`);
  });

  it('waitFor and nextRebalance with a timeout beyond the largest timer delay wait, not give up at once', async () => {
    const huge = 2 ** 31 + 10;
    await waitFor(() => new Promise<boolean>((r) => setTimeout(() => r(true), 50)), {
      timeoutMs: huge,
    });
    const rebalances$ = new Subject<never>();
    const waiting = nextRebalance({ rebalances$ } as never, 'assigned', { timeoutMs: huge }).then(
      () => 'resolved',
      (e: unknown) => `rejected: ${String(e)}`,
    );
    const outcome = await Promise.race([
      waiting,
      new Promise<string>((r) => setTimeout(() => r('still waiting'), 100)),
    ]);
    assert.equal(outcome, 'still waiting');
    rebalances$.complete(); // ends the wait (and its timer: the suite runs without --exit)
    assert.match(await waiting, /closed before/);
  });

  it('waitFor resolves on a sync or async true, and rejects at once when the condition throws', async () => {
    let n = 0;
    await waitFor(() => ++n >= 3, { intervalMs: 1 });
    assert.equal(n, 3);
    await waitFor(() => Promise.resolve(true));
    await assert.rejects(
      waitFor(() => {
        throw new Error('boom');
      }),
      /boom/,
    );
  });

  it('nextRebalance names the wait when the consumer closes before the event, and times out by name', async () => {
    await assert.rejects(
      nextRebalance({ rebalances$: EMPTY }, 'revoked'),
      /nextRebalance: the consumer closed before a 'revoked' event/,
    );
    await assert.rejects(
      nextRebalance({ rebalances$: NEVER }, 'assigned', { timeoutMs: 20 }),
      /nextRebalance: no 'assigned' event within 20 ms/,
    );
  });
});
