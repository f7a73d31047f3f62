/**
 * processTransactional(): close() stays within its deadline while a revoke that began before the
 * close is in its final transactional commit and the coordinator cannot be reached
 * (sendOffsetsToTransaction and abortTransaction time out): the offsets' retries and the abort
 * that follows are brought forward to the close's deadline, not only a commit being resumed.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import type { KafkaMessage, OutputRecord } from '../lib';
import type { TxnOp } from './fakes/fake-transactional-producer';
import { T, committed, tp, until } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';

const one = (m: KafkaMessage): OutputRecord[] => [
  { topic: 'out', key: m.key, value: `${m.partition}:${m.offset}` },
];

describe('processTransactional(): close() during a revoke’s final transactional commit', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('close({timeoutMs: 2000}) settles within its deadline when the revoke (begun before it) cannot send its offsets nor abort', async () => {
    let down = false;
    const s = transactionalHarness(
      {
        plan: (op: TxnOp) =>
          down && (op === 'send' || op === 'abort')
            ? { code: -185, retriable: true, afterTimeout: true }
            : undefined,
      },
      { commitTimeoutMs: 500, drainTimeoutMs: 20_000, closeTimeoutMs: 25_000 },
    );
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-close-deadline',
          maxMs: 10_000,
          producerConfig: { 'transaction.timeout.ms': 30_000 },
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.producer().transactions[0]?.records.length === 3, '0..2 written');
    down = true; // the transaction coordinator becomes unreachable
    s.fake().rebalanceRevoke([tp(0)]);
    await until(
      () => s.producer().calls.filter((c) => c === 'send').length >= 2,
      'the revoke retries its offsets',
    );
    const startedAt = Date.now();
    let done = false;
    void s.consumer.close({ timeoutMs: 2000 }).finally(() => (done = true));
    await until(() => done, 'close() to settle', 25_000);
    const tookMs = Date.now() - startedAt;
    assert.ok(tookMs < 3500, `close({timeoutMs: 2000}) took ${tookMs} ms`);
    assert.equal(committed(s, 0), undefined);
    void error;
  });

  it('a second close({timeoutMs: 1000}) during the final commit of the revoke the first close({timeoutMs: 20000}) started is honoured when the coordinator cannot be reached', async () => {
    let down = false;
    const s = transactionalHarness(
      {
        plan: (op: TxnOp) =>
          down && (op === 'send' || op === 'abort')
            ? { code: -185, retriable: true, afterTimeout: true }
            : undefined,
      },
      { commitTimeoutMs: 500, drainTimeoutMs: 20_000, closeTimeoutMs: 25_000 },
    );
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-close-deadline-2',
          maxMs: 10_000,
          producerConfig: { 'transaction.timeout.ms': 30_000 },
        })
        .subscribe({ error: () => undefined }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.producer().transactions[0]?.records.length === 3, '0..2 written');
    down = true;
    void s.consumer.close({ timeoutMs: 20_000 }); // e.g. the pipeline unsubscribed
    await until(
      () => s.producer().calls.filter((c) => c === 'send').length >= 2,
      'the close’s revoke retries its offsets',
    );
    const startedAt = Date.now();
    let done = false;
    void s.consumer.close({ timeoutMs: 1000 }).finally(() => (done = true)); // SIGTERM
    await until(() => done, 'close() to settle', 25_000);
    const tookMs = Date.now() - startedAt;
    assert.ok(tookMs < 2500, `the second close({timeoutMs: 1000}) took ${tookMs} ms`);
  });
});
