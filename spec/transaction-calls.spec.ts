import assert from 'node:assert/strict';
import { retrying } from '../lib/internal/transactions/transaction-calls';
import type { TransactionContext } from '../lib/internal/transactions/transaction-context';
import {
  TxnCallError,
  classifyTxnError,
} from '../lib/internal/transactions/transactional-producer';

/**
 * retrying(): a transactional call is made again only while its deadline allows — never after it,
 * whatever the backoff between attempts — and a call that failed with librdkafka's "timed out"
 * counts as one that waited its whole call (made again at once), even when the clock says it
 * returned a millisecond early.
 */
describe('retrying(): transactional calls and their deadline', () => {
  const logged: string[] = [];
  const ctx = {
    settings: { commitTimeoutMs: 200 },
    closeDeadline: { by: Infinity },
    logger: {
      debug: (_: unknown, msg: string) => logged.push(`debug ${msg}`),
      warn: (_: unknown, msg: string) => logged.push(`warn ${msg}`),
    },
  } as unknown as TransactionContext;
  beforeEach(() => logged.splice(0));
  const retriable = (code: number): TxnCallError =>
    new TxnCallError(
      classifyTxnError(
        Object.assign(new Error(`commit failed (${code})`), { code, isRetriable: true }),
        'commitTransaction failed',
      ),
    );

  /** Runs retrying() on a call that always fails retriably (not a timeout); the call times. */
  async function failingUntilGivenUp(
    by: number | (() => number),
    onCall: (calls: number[]) => void = () => undefined,
  ): Promise<number[]> {
    const calls: number[] = [];
    await assert.rejects(
      retrying(
        ctx,
        async () => {
          calls.push(Date.now());
          onCall(calls);
          throw retriable(-181); // retriable, not a timeout: backoff 100, 200, 300… ms
        },
        by,
      ),
      TxnCallError,
    );
    return calls;
  }

  it('never calls again after the deadline, however long the backoff would be', async () => {
    const deadline = Date.now() + 450;
    const calls = await failingUntilGivenUp(deadline);
    assert.ok(calls.length >= 2, `called again before the deadline (${calls.length})`);
    for (const at of calls)
      assert.ok(at < deadline, `a call ${at - deadline} ms after the deadline`);
  });

  it('makes a call that timed out (-185) again at once, even one that returned early', async () => {
    const calls: number[] = [];
    await retrying(
      ctx,
      async (timeoutMs) => {
        calls.push(Date.now());
        if (calls.length < 4) {
          await new Promise((r) => setTimeout(r, Math.max(0, timeoutMs - 20)));
          throw retriable(-185);
        }
      },
      Date.now() + 5000,
    );
    assert.equal(calls.length, 4);
    // Each made again at once, none after a backoff pause.
    assert.deepEqual(logged, Array(3).fill('debug transactional call timed out; calling it again'));
  });

  it('never calls again after a deadline brought forward during the pause (a close)', async () => {
    let by = Date.now() + 5000;
    const calls = await failingUntilGivenUp(
      () => by,
      (c) => {
        if (c.length === 1) setTimeout(() => (by = Date.now() + 20), 30);
      },
    );
    assert.equal(calls.length, 1, 'no call after the deadline moved before it');
  });

  it('pauses after a "timed out" that came back at once, instead of spinning', async () => {
    const calls: number[] = [];
    await retrying(
      ctx,
      async () => {
        calls.push(Date.now());
        if (calls.length < 3) throw retriable(-185);
      },
      Date.now() + 5000,
    );
    assert.equal(calls.length, 3);
    assert.deepEqual(logged, Array(2).fill('warn transactional call failed (retriable); retrying'));
  });
});
