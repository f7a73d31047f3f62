/**
 * processTransactional() and the transaction's own deadline: the broker aborts a transaction open
 * longer than `transaction.timeout.ms`, so no call of it may reach the broker later — whatever the
 * drain deadline of the revoke that commits it — and work finished during a long drain still gets
 * committed in transactions young enough.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { TransactionError } from '../lib';
import type { KafkaMessage, OutputRecord, TransactionalHandler } from '../lib';
import type { TxnOp } from './fakes/fake-transactional-producer';
import { T, committed, gate, tp, until } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';
import type { TransactionalHarness } from './helpers/transactional';

const one = (m: KafkaMessage): OutputRecord[] => [
  { topic: 'out', key: m.key, value: `${m.partition}:${m.offset}` },
];

const TIMEOUT_MS = 2000;

describe('processTransactional(): the transaction’s own deadline (transaction.timeout.ms)', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  function run(
    s: TransactionalHarness,
    handler: TransactionalHandler,
    maxMs: number,
    partitionConcurrency = 1,
  ) {
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(handler, {
          transactionalId: 'tx-deadline',
          maxMs,
          partitionConcurrency,
          producerConfig: { 'transaction.timeout.ms': TIMEOUT_MS },
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    return () => error;
  }

  it('ends a revoke’s final commit that keeps timing out by the transaction’s deadline, not the drain deadline: no call reaches the broker after it aborted the transaction', async () => {
    let failing = false;
    const s = transactionalHarness(
      {
        plan: (op: TxnOp) =>
          failing && op === 'commit'
            ? { code: -185, retriable: true, afterTimeout: true }
            : undefined,
      },
      { commitTimeoutMs: 200, drainTimeoutMs: 20_000 },
    );
    const error = run(s, one, 1000);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(
      () => s.producer().transactions[0]?.records.length === 4,
      '0..3 in the transaction',
    );
    failing = true;
    const revokedAt = Date.now();
    s.fake().rebalanceRevoke([tp(0)]);
    // Resumed up to the transaction's deadline (2 s after its first record), then stopped: never
    // kept going until the drain deadline 20 s away.
    await until(() => error() !== undefined, 'the consumer stops', 10_000);
    const stoppedAfterMs = Date.now() - revokedAt;
    assert.ok(error() instanceof TransactionError, String(error()));
    assert.match((error() as Error).message, /commitTransaction kept timing out/);
    assert.ok(stoppedAfterMs < 10_000, `stopped ${stoppedAfterMs} ms after the revoke`);
    assert.deepEqual(s.producer().expiredCalls, [], 'no call after the broker aborted it');
    assert.ok(s.producer().calls.filter((c) => c === 'commit').length >= 2, 'resumed');
    assert.equal(committed(s, 0), undefined, 'no offset committed');
    assert.equal(s.producer().committed.length, 0, 'nothing visible');
  });

  it('a drain longer than transaction.timeout.ms: messages finishing meanwhile are committed in transactions young enough, none aborted by the broker', async () => {
    const gates = [gate(), gate(), gate()];
    const s = transactionalHarness({}, { commitTimeoutMs: 200, drainTimeoutMs: 20_000 });
    const error = run(
      s,
      async (m) => {
        if (m.offset >= 5) await gates[m.offset - 5]?.promise;
        return one(m);
      },
      100,
      4,
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 8);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 5, '0..4 committed');
    s.fake().rebalanceRevoke([tp(0)]);
    await until(() => s.events.some((e) => e.type === 'revoking'), 'revoking');
    const revokingAt = Date.now();
    // The three in flight finish one by one over longer than the transaction timeout.
    for (const [i, g] of gates.entries()) {
      await until(() => Date.now() - revokingAt > ((i + 1) * (TIMEOUT_MS + 500)) / 3, `step ${i}`);
      g.open();
      await until(() => committed(s, 0) === 6 + i, `0:${5 + i} committed during the drain`);
    }
    await until(() => s.events.some((e) => e.type === 'revoked'), 'revoked', 10_000);
    assert.equal(error(), undefined, String(error()));
    const ev = s.events.find((e) => e.type === 'committed');
    assert.ok(ev?.type === 'committed');
    assert.deepEqual(ev.results, [{ topic: T, partition: 0, status: 'committed', offset: 8 }]);
    assert.deepEqual(s.producer().expiredCalls, [], 'no transaction outlived its timeout');
    assert.equal(s.consumer.metrics().transactions?.aborted, 0);
    assert.deepEqual(
      s.producer().committed.map((r) => String(r.value)),
      Array.from({ length: 8 }, (_, i) => `0:${i}`),
    );
  });
});
