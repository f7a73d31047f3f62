import assert from 'node:assert/strict';
import pino from 'pino';
import { ConnectError } from '../../lib';
import { OAuthBearerRefresher, tokenProblem } from '../../lib/internal/binding/oauth-bearer';

const logger = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('OAuthBearerRefresher', () => {
  let refresher: OAuthBearerRefresher | undefined;
  afterEach(() => refresher?.stop());

  it('sets the first token before start() resolves, then refreshes at 80% of its lifetime', async () => {
    const set: string[] = [];
    let n = 0;
    refresher = new OAuthBearerRefresher(
      () => ({ value: `t${++n}`, lifetimeMs: Date.now() + 1500 }),
      { setOauthBearerToken: (v) => set.push(v) },
      logger,
      1000,
    );
    await refresher.start();
    assert.deepEqual(set, ['t1']);
    await sleep(1000); // MIN_REFRESH_MS floors 0.8 × 1500 = 1200 to ≥ 1000
    await sleep(300);
    assert.deepEqual(set, ['t1', 't2']);
    refresher.stop();
    await sleep(1300);
    assert.deepEqual(set, ['t1', 't2'], 'no refresh after stop()');
  });

  it('a token living longer than the largest timer delay (~24.8 days) is not refreshed at once, over and over', async () => {
    // 80 % of 60 days is past 2^31 ms: setTimeout would fire after 1 ms, every time.
    let calls = 0;
    refresher = new OAuthBearerRefresher(
      () => ({ value: `t${++calls}`, lifetimeMs: Date.now() + 60 * 24 * 3600_000 }),
      { setOauthBearerToken: () => undefined },
      logger,
      1000,
    );
    await refresher.start();
    await sleep(100);
    assert.equal(calls, 1, `${calls} provider calls in 100 ms`);
  });

  it('rejects start() with a ConnectError naming the provider failure', async () => {
    refresher = new OAuthBearerRefresher(
      () => Promise.reject(new Error('idp down')),
      { setOauthBearerToken: () => undefined },
      logger,
      1000,
    );
    await assert.rejects(refresher.start(), (err: unknown) => {
      assert.ok(err instanceof ConnectError);
      assert.match(err.message, /oauthBearerToken provider failed: idp down/);
      return true;
    });
  });

  it('times out a provider that never answers', async () => {
    refresher = new OAuthBearerRefresher(
      () => new Promise(() => undefined),
      { setOauthBearerToken: () => undefined },
      logger,
      50,
    );
    await assert.rejects(refresher.start(), /did not answer within 50 ms/);
  });

  it('counts a failed refresh, keeps the current token and retries', async () => {
    const set: string[] = [];
    let n = 0;
    refresher = new OAuthBearerRefresher(
      () => {
        n += 1;
        if (n === 2) throw new Error('flaky');
        return { value: `t${n}`, lifetimeMs: Date.now() + 1250 };
      },
      { setOauthBearerToken: (v) => set.push(v) },
      logger,
      1000,
    );
    await refresher.start();
    await sleep(1100); // refresh 1 fails at 1000 ms; retried after MIN_REFRESH_MS
    assert.equal(refresher.failures, 1);
    assert.deepEqual(set, ['t1']);
    await sleep(1100);
    assert.deepEqual(set, ['t1', 't3']);
  });

  it('refuses unusable tokens with the reason', () => {
    const now = Date.now();
    assert.match(tokenProblem(undefined, now) ?? '', /object/);
    assert.match(tokenProblem({ value: '', lifetimeMs: now + 1 }, now) ?? '', /non-empty/);
    assert.match(tokenProblem({ value: 'x', lifetimeMs: now }, now) ?? '', /expired/);
    assert.match(tokenProblem({ value: 'x', lifetimeMs: '1' }, now) ?? '', /ms since the epoch/);
    assert.match(
      tokenProblem({ value: 'x', lifetimeMs: now + 1, extensions: { a: 'b' } }, now) ?? '',
      /extensions/,
    );
    assert.equal(
      tokenProblem({ value: 'x', lifetimeMs: now + 1000, principal: 'p' }, now),
      undefined,
    );
  });
});
