/**
 * A partition assigned while another producer's transaction holds offsets of it (a member killed,
 * or stuck in a commit whose outcome is unknown): processTransactional() must start it at the
 * offset that transaction leaves committed — waiting for it to end — and never around it.
 *
 * librdkafka 2.12 starts such a partition at auto.offset.reset when its own committed-offset fetch
 * was answered "unstable offset commit" and the assignment changed while that fetch was in flight
 * (the fake models it: `unstableStartsAtReset`). Under cooperative rebalancing and KIP-848 an
 * assignment often arrives in steps, so that is an ordinary path, not a corner.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { StartPositionError } from '../lib';
import type { KafkaMessage, OutputRecord } from '../lib';
import { T, tp, until } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';
import { captureLogger } from './helpers/observability';

describe('processTransactional(): a partition whose offsets an open transaction holds', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  /** Another producer's transaction: offsets of T[0] pending until `end(committedAt)`. */
  function openTransaction(s: ReturnType<typeof transactionalHarness>, committedBefore: number) {
    const fake = s.fake();
    fake.commits.set(`${T}[0]`, committedBefore);
    let open = true;
    fake.pendingTxnOffsets = (k) => open && k === `${T}[0]`;
    return {
      /** The transaction ends: committed with `offset`, or aborted (undefined). */
      end(offset?: number) {
        if (offset !== undefined) fake.commits.set(`${T}[0]`, offset);
        open = false;
      },
    };
  }

  function run(s: ReturnType<typeof transactionalHarness>) {
    const handled = new Map<number, number[]>();
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(
          (m: KafkaMessage): OutputRecord[] => {
            handled.set(m.partition, [...(handled.get(m.partition) ?? []), m.offset]);
            return [{ topic: 'out', value: `${m.partition}:${m.offset}` }];
          },
          { transactionalId: 'tx-next-owner' },
        )
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    return { handled, error: () => error };
  }

  for (const outcome of ['committed', 'aborted'] as const) {
    it(`assigned in two steps while it is open: starts where the ${outcome} transaction leaves the group, nothing read around it`, async () => {
      const s = transactionalHarness({}, {}, { protocol: 'COOPERATIVE' });
      const r = run(s);
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 40);
      s.fake().produce(T, 1, 10);
      const txn = openTransaction(s, 10);
      // The assignment arrives in steps, as under KIP-848: T[1] as soon as T[0]'s assign call
      // was made (librdkafka delivers no rebalance event before it).
      const assignedT0 = (): boolean =>
        s
          .fake()
          .calls.some((c) => c.op === 'incrementalAssign' && c.partitions?.includes(`${T}[0]`));
      s.fake().rebalanceAssign([tp(0)]);
      let secondStep = false;
      const step = (): void => {
        if (secondStep || !assignedT0()) return;
        secondStep = true;
        s.fake().rebalanceAssign([tp(1)]);
      };
      const opened = Date.now();
      await until(() => (step(), secondStep || Date.now() - opened > 300), 'a first step');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(
        r.handled.get(0),
        undefined,
        'nothing of T[0] while the transaction is open',
      );
      txn.end(outcome === 'committed' ? 25 : undefined);
      await until(() => (step(), secondStep), 'T[0] assigned');
      await until(() => (r.handled.get(1)?.length ?? 0) === 10, 'T[1] handled');
      const from = outcome === 'committed' ? 25 : 10;
      await until(() => (r.handled.get(0)?.length ?? 0) === 40 - from, 'T[0] handled');
      await new Promise((resolve) => setTimeout(resolve, 30));
      assert.deepEqual(
        r.handled.get(0),
        Array.from({ length: 40 - from }, (_, i) => from + i),
        `T[0] from ${from}, each once`,
      );
      assert.deepEqual(s.fake().readAroundPending, [], 'librdkafka never chose the start');
      assert.equal(r.error(), undefined);
      await until(() => s.fake().commits.get(`${T}[0]`) === 40, 'T[0] committed at its end');
    });
  }

  it('the open transaction never ends within max.poll.interval.ms: the consumer stops with a StartPositionError, nothing handled', async () => {
    const s = transactionalHarness(
      {},
      { config: { 'max.poll.interval.ms': 1500, 'session.timeout.ms': 1000 } },
      { protocol: 'COOPERATIVE' },
    );
    const r = run(s);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 20);
    openTransaction(s, 5);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => r.error() !== undefined, 'the consumer to stop', 10_000);
    const err = r.error();
    assert.ok(err instanceof StartPositionError, String(err));
    assert.match(err.message, /max\.poll\.interval\.ms/);
    assert.match(err.message, /last answer: .*Timed out/);
    assert.match(err.message, new RegExp(`${T}\\[0\\]`));
    assert.deepEqual(r.handled.get(0), undefined);
    assert.equal(s.fake().commits.get(`${T}[0]`), 5, 'the group still holds what it held');
  });

  for (const protocol of ['COOPERATIVE', 'EAGER'] as const) {
    it(`${protocol}: close() while it waits ends promptly, nothing handled or committed, no read after it`, async () => {
      const s = transactionalHarness({}, { closeTimeoutMs: 4000 }, { protocol });
      const r = run(s);
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 20);
      openTransaction(s, 5);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => s.fake().committedReads >= 1, 'the stable read');
      const startedAt = Date.now();
      await s.consumer.close();
      const closeMs = Date.now() - startedAt;
      const reads = s.fake().committedReads;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.ok(closeMs < 2500, `close() took ${closeMs} ms (its deadline: 4000 ms)`);
      assert.equal(s.fake().committedReads, reads, 'no committed() read after close()');
      assert.equal(r.handled.get(0), undefined);
      assert.equal(r.error(), undefined, 'a close is no failure');
      assert.equal(s.fake().commits.get(`${T}[0]`), 5);
      assert.deepEqual(s.fake().readAroundPending, []);
    });
  }

  for (const reset of ['earliest', 'latest'] as const) {
    it(`auto.offset.reset=${reset}, nothing committed, the reset position's lookup fails: librdkafka resets, the consumer goes on`, async () => {
      const s = transactionalHarness({}, { topicConfig: { 'auto.offset.reset': reset } });
      const r = run(s);
      await until(() => s.fake().isConnected(), 'connect');
      const fake = s.fake();
      fake.produce(T, 0, 10);
      const query = fake.queryWatermarkOffsets.bind(fake);
      let failed = false;
      fake.queryWatermarkOffsets = ((...args: Parameters<typeof query>) => {
        if (!failed) {
          failed = true;
          const cb = args[3] as unknown as (err: Error) => void;
          setImmediate(() =>
            cb(Object.assign(new Error('Broker: Leader not available'), { code: 5 })),
          );
          return fake;
        }
        return query(...args);
      }) as typeof fake.queryWatermarkOffsets;
      fake.rebalanceAssign([tp(0)]);
      await until(() => failed, 'the failed lookup');
      fake.produce(T, 0, 5);
      await until(() => (r.handled.get(0)?.length ?? 0) > 0, 'records handled');
      assert.equal(r.error(), undefined, `the consumer stopped: ${String(r.error())}`);
    });
  }

  it('a refused read (authorization) stops the consumer at once with a StartPositionError naming it, nothing handled', async () => {
    const s = transactionalHarness({}, {}, { protocol: 'COOPERATIVE' });
    const r = run(s);
    await until(() => s.fake().isConnected(), 'connect');
    const fake = s.fake();
    fake.produce(T, 0, 10);
    const refusal = new Error('Broker: Group authorization failed');
    fake.committed = ((_tps: unknown, _timeout: number, cb: (e: null, r: unknown[]) => void) => {
      setImmediate(() => cb(null, [refusal]));
      return fake;
    }) as unknown as typeof fake.committed;
    const startedAt = Date.now();
    fake.rebalanceAssign([tp(0)]);
    await until(() => r.error() !== undefined, 'the consumer to stop');
    const err = r.error();
    assert.ok(err instanceof StartPositionError, String(err));
    assert.match(err.message, /Group authorization failed/);
    assert.ok(Date.now() - startedAt < 3000, 'not waited out until max.poll.interval.ms');
    assert.equal(r.handled.get(0), undefined);
  });

  it('warns at the start when a crashed member’s transaction could outlast the next owner’s wait (transaction.timeout.ms vs max.poll.interval.ms)', async () => {
    const { logger, lines } = captureLogger();
    const s = transactionalHarness(
      {},
      {
        logger,
        commitTimeoutMs: 2000,
        config: { 'max.poll.interval.ms': 20_000, 'session.timeout.ms': 6000 },
      },
    );
    subs.push(
      s.consumer
        .processTransactional(() => [], {
          transactionalId: 'tx-warn',
          producerConfig: { 'transaction.timeout.ms': 15_000 },
        })
        .subscribe({ error: () => undefined }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    const warning = lines.find(
      (l) => l.level === 40 && /not below max\.poll\.interval\.ms/.test(String(l.msg)),
    );
    assert.ok(warning, 'the warning');
    assert.equal(warning.transactionTimeoutMs, 15_000);
    assert.equal(warning.maxPollIntervalMs, 20_000);
  });

  it('COOPERATIVE: close() while it waits; the close revokes the group view (the partition answered empty): that revoke is answered', async () => {
    const s = transactionalHarness({}, { closeTimeoutMs: 4000 }, { protocol: 'COOPERATIVE' });
    const r = run(s);
    await until(() => s.fake().isConnected(), 'connect');
    const fake = s.fake();
    fake.produce(T, 0, 20);
    openTransaction(s, 5);
    // librdkafka's group view holds T[0] from the assign callback on, whatever the answer; its
    // unsubscribe (the close) revokes that view.
    fake.unsubscribe = (() => {
      fake.calls.push({ op: 'unsubscribe' } as (typeof fake.calls)[number]);
      setImmediate(() => fake.rebalanceRevoke([tp(0)]));
      return fake;
    }) as typeof fake.unsubscribe;
    fake.rebalanceAssign([tp(0)]);
    await until(() => fake.committedReads >= 1, 'the stable read');
    await s.consumer.close();
    assert.equal(r.error(), undefined);
    assert.equal(fake.revokeInProgress, false, 'librdkafka still waits for the revoke’s answer');
    assert.ok(
      fake.calls.some((c) => c.op === 'incrementalUnassign' && c.partitions?.length === 0),
      'answered with an empty incremental unassign',
    );
    assert.equal(r.handled.get(0), undefined);
    assert.equal(fake.commits.get(`${T}[0]`), 5);
  });
});
