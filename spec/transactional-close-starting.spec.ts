/**
 * processTransactional(): close() stays within its deadline while the transactional producer is
 * still starting (initTransactions waiting for the transaction coordinator — e.g.
 * CONCURRENT_TRANSACTIONS while the broker aborts a crashed predecessor's open transaction): the
 * start calls initTransactions in short calls and stops once a close begins.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import type { KafkaMessage, OutputRecord } from '../lib';
import { FakeTransactionalProducer } from './fakes/fake-transactional-producer';
import { harness, tp, T, until } from './helpers/harness';

const one = (m: KafkaMessage): OutputRecord[] => [
  { topic: 'out', key: m.key, value: `${m.partition}:${m.offset}` },
];

/** initTransactions answers (timed out, retriable) only when its timeout passes. */
class SlowInitProducer extends FakeTransactionalProducer {
  override initTransactions(timeout: number, cb: (err: unknown) => void): void {
    this.calls.push('init');
    setTimeout(
      () =>
        cb(
          Object.assign(new Error('Local: Timed out'), {
            code: -185,
            isFatal: false,
            isRetriable: true,
            isTxnRequiresAbort: false,
          }),
        ),
      timeout,
    );
  }
}

describe('processTransactional(): close() while the transactional producer is starting', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('close({timeoutMs: 1000}) settles within its deadline while initTransactions is pending', async () => {
    let producer: SlowInitProducer | undefined;
    const h = harness(
      { connectTimeoutMs: 15_000 },
      {},
      {
        transactionalProducerFactory: ((g: Record<string, unknown>) =>
          (producer = new SlowInitProducer(g))) as never,
      },
    );
    subs.push(
      h.consumer
        .processTransactional(one, { transactionalId: 'tx-close-starting' })
        .subscribe({ error: () => undefined }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 1);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => producer?.calls.includes('init') === true, 'initTransactions called');
    const startedAt = Date.now();
    let done = false;
    void h.consumer.close({ timeoutMs: 1000 }).finally(() => (done = true));
    await until(() => done, 'close() to settle', 20_000);
    const tookMs = Date.now() - startedAt;
    assert.ok(tookMs < 2500, `close({timeoutMs: 1000}) took ${tookMs} ms`);
  });
});
