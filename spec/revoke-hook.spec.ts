/**
 * The `onRevoke` hook through the public API: after the drain, before the final commit; its
 * failures and overruns reported while the commit still covers what finished; not run for a loss.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { ConfigError, TimeoutError } from '../lib';
import type { ConsumerEvent, KafkaMessage, ReactiveConsumerOptions } from '../lib';
import { ReactiveConsumer } from '../lib';
import { T, committed, gate, harness, tp, until } from './helpers/harness';
import type { Harness } from './helpers/harness';
import { echoTransactional, transactionalHarness } from './helpers/transactional';
import type { TransactionalHarness } from './helpers/transactional';

describe('onRevoke (the revoke hook)', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  /** A consumer with `onRevoke`, processing 0..n-1 of partition 0, the handler of `hang` held. */
  async function running(
    onRevoke: ReactiveConsumerOptions['onRevoke'],
    options: Partial<ReactiveConsumerOptions> = {},
  ) {
    const h = harness({ onRevoke, ...options });
    const events: ConsumerEvent[] = [];
    h.consumer.events$.subscribe((e) => events.push(e));
    const processed: number[] = [];
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => {
          processed.push(m.offset);
        })
        .subscribe({ error: () => undefined }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => processed.length === 5, 'the messages processed');
    return { h, events };
  }

  const phases = (h: Harness): string[] => h.events.map((e) => e.type);

  it('runs after the drain and before the final commit, with the revoked partitions', async () => {
    const seen: { partitions: unknown; phases: string[]; committed: number | undefined }[] = [];
    const hold: { h?: Harness } = {};
    // No periodic commit: only the final one can commit, so the hook sees nothing committed yet.
    const r = await running(
      (partitions, context) => {
        assert.equal(context.signal.aborted, false);
        assert.ok(context.deadline > Date.now());
        seen.push({
          partitions,
          phases: phases(hold.h as Harness),
          committed: committed(hold.h as Harness),
        });
      },
      { commitIntervalMs: 600_000 },
    );
    const h = r.h;
    hold.h = h;
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => phases(h).includes('revoked'), 'revoked');
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0]?.partitions, [{ topic: T, partition: 0 }]);
    assert.deepEqual(seen[0]?.phases, ['assigned', 'revoking', 'drained']);
    assert.equal(seen[0]?.committed, undefined, 'nothing committed before the hook ran');
    assert.equal(committed(h), 5, 'the final commit after it');
    await h.consumer.close();
  });

  it('is waited for: the final commit follows an async hook that resolves later', async () => {
    const flushed = gate();
    let started = false;
    const { h } = await running(
      async () => {
        started = true;
        await flushed.promise;
      },
      { commitIntervalMs: 600_000 },
    );
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => started, 'the hook to start');
    await new Promise((r) => setImmediate(r));
    assert.ok(!phases(h).includes('committed'), 'no final commit while the hook runs');
    assert.equal(committed(h), undefined);
    flushed.open();
    await until(() => phases(h).includes('revoked'), 'revoked');
    assert.equal(committed(h), 5);
    await h.consumer.close();
  });

  it('a hook that throws is reported, and the final commit still covers what finished', async () => {
    const { h, events } = await running(() => {
      throw new Error('the sink refused the flush');
    });
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => phases(h).includes('revoked'), 'revoked');
    const failed = events.find((e) => e.type === 'revoke-hook-failed');
    assert.ok(failed?.type === 'revoke-hook-failed');
    assert.match((failed.error as Error).message, /sink refused/);
    assert.deepEqual(failed.partitions, [{ topic: T, partition: 0 }]);
    assert.equal(committed(h), 5);
    await h.consumer.close();
  });

  it('a hook still running at its deadline is aborted and reported; the commit goes ahead in time', async () => {
    let signal: AbortSignal | undefined;
    const { h, events } = await running(
      (_partitions, context) => {
        signal = context.signal;
        return new Promise<void>(() => undefined); // never settles
      },
      { drainTimeoutMs: 1200, commitTimeoutMs: 200 },
    );
    const revokedAt = Date.now();
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => phases(h).includes('revoked'), 'revoked', 5000);
    assert.ok(Date.now() - revokedAt < 1200 + 500, 'within the drain deadline');
    assert.equal(signal?.aborted, true);
    const failed = events.find((e) => e.type === 'revoke-hook-failed');
    assert.ok(failed?.type === 'revoke-hook-failed' && failed.error instanceof TimeoutError);
    assert.equal(committed(h), 5);
    await h.consumer.close();
  });

  it('a close() while the hook runs brings its deadline forward: the final commit still happens in time', async () => {
    let signal: AbortSignal | undefined;
    const { h } = await running(
      (_partitions, context) => {
        signal = context.signal;
        return new Promise<void>(() => undefined); // ignores its signal, never settles
      },
      { commitIntervalMs: 600_000, drainTimeoutMs: 10_000 },
    );
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => signal !== undefined, 'the hook to start');
    const closedAt = Date.now();
    await h.consumer.close({ timeoutMs: 1000 });
    assert.ok(Date.now() - closedAt < 1500, `close took ${Date.now() - closedAt} ms`);
    assert.equal(signal?.aborted, true, 'the hook was told to stop');
    assert.equal(committed(h), 5, 'the final commit made it before the close ended');
    assert.ok(phases(h).includes('revoked'), phases(h).join(','));
  });

  it('with processTransactional(): nothing of the revoked partitions is committed while the hook runs', async () => {
    const hold = gate();
    const box: { s?: TransactionalHarness } = {};
    let atHookEnd: number | undefined = -1;
    const s = transactionalHarness(
      {},
      {
        commitIntervalMs: 600_000,
        onRevoke: async () => {
          await hold.promise;
          atHookEnd = committed(box.s as TransactionalHarness);
        },
      },
    );
    box.s = s;
    const { handled, subscription } = echoTransactional(s, {
      transactionalId: 'tx-hook',
      maxMs: 50,
      maxMessages: 1000,
    });
    subs.push(subscription);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => handled.length === 3, 'handled');
    // A periodic commit may have committed some already; the rest waits for the hook.
    const before = committed(s);
    s.fake().rebalanceRevoke([tp(0)]);
    await until(() => phases(s).includes('drained'), 'drained');
    // Several maxMs periods pass while the hook holds: no periodic commit may move the offset.
    const heldSince = Date.now();
    await until(() => Date.now() - heldSince > 300, 'several maxMs periods', 2000);
    assert.equal(committed(s), before, 'nothing committed while the hook runs');
    hold.open();
    await until(() => phases(s).includes('revoked'), 'revoked');
    assert.equal(atHookEnd, before);
    assert.equal(committed(s), 3, 'the final commit after the hook');
    await s.consumer.close();
  });

  it('is not called for partitions lost', async () => {
    let calls = 0;
    const { h } = await running(() => {
      calls += 1;
    });
    h.fake().rebalanceRevoke([tp(0)], { lost: true });
    await until(() => phases(h).includes('lost'), 'lost');
    assert.equal(calls, 0);
    await h.consumer.close();
  });

  it('must be a function', () => {
    assert.throws(
      () =>
        new ReactiveConsumer({
          config: { 'bootstrap.servers': 'fake:9092', 'group.id': 'g' },
          topics: [T],
          onRevoke: 'flush' as never,
        }),
      (e: unknown) => e instanceof ConfigError && e.key === 'onRevoke',
    );
  });
});
