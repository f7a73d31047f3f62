/**
 * close() against native calls that hold the consumer (a transactional call, a read-back of the
 * group offsets): it never disconnects under one (node-rdkafka's workers for them use the native
 * client without its connection lock) and still keeps its deadline where librdkafka lets it: reads
 * and resumable calls (commit, abort) last at most NATIVE_CALL_MS each; a sendOffsetsToTransaction
 * is not resumable and lasts until its request's own timeout, so a close waits for it. Through the
 * public API, on the deterministic fakes; each spec failed before these changes.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import type { KafkaMessage, OutputRecord } from '../lib';
import { FakeConsumer } from './fakes/fake-consumer';
import type { FakeOptions } from './fakes/fake-consumer';
import type { TxnOp } from './fakes/fake-transactional-producer';
import { T, committed, harness, settledWithin, tp, until } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';

const one = (m: KafkaMessage): OutputRecord[] => [
  { topic: 'out', key: m.key, value: `${m.partition}:${m.offset}` },
];

/**
 * A fake whose committed() (node-rdkafka's KafkaConsumerCommitted worker on the libuv pool) answers
 * only when its timeout passes, as librdkafka's rd_kafka_committed does while the coordinator does
 * not answer. node-rdkafka's KafkaConsumer::Committed does not take m_connection_lock, so a
 * disconnect() (which deletes m_client) while that worker runs is a use-after-free.
 */
class SlowReadFake extends FakeConsumer {
  outstandingReads = 0;
  disconnectsDuringRead = 0;
  override committed(
    tps: { topic: string; partition: number }[],
    timeout: number,
    cb: (err: null, r: { topic: string; partition: number; offset: number }[]) => void,
  ): this {
    this.committedReads += 1;
    this.outstandingReads += 1;
    setTimeout(() => {
      this.outstandingReads -= 1;
      cb(
        null,
        tps.map((t) => ({ ...t, offset: this.commits.get(`${t.topic}[${t.partition}]`) ?? -1001 })),
      );
    }, timeout);
    return this;
  }
  override disconnect(cb?: () => void): this {
    if (this.outstandingReads > 0) this.disconnectsDuringRead += 1;
    return super.disconnect(cb);
  }
}

describe('close() and the native calls in flight', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('processTransactional(): close({timeoutMs: 2000}) keeps its deadline while a sendOffsetsToTransaction is stuck on an unreachable coordinator (librdkafka ends that call at its request timeout only): the transaction is left to the broker, and the consumer is disconnected once the call returned', async function () {
    this.timeout(30_000);
    let down = false;
    const STUCK_MS = 5000;
    const s = transactionalHarness(
      {
        plan: (op: TxnOp) =>
          down && op === 'send'
            ? { code: -185, retriable: true, answerAfterMs: STUCK_MS }
            : undefined,
      },
      { commitTimeoutMs: 8000 },
    );
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-close-send',
          maxMs: 50,
          producerConfig: { 'transaction.timeout.ms': 40_000 },
        })
        .subscribe({ error: () => undefined }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    await until(() => s.producer().calls.includes('begin'), 'the producer started');
    down = true; // the transaction coordinator stops answering
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.producer().calls.includes('send'), 'a periodic commit sends its offsets');
    const tookMs = await settledWithin(s.consumer.close({ timeoutMs: 2000 }), 25_000);
    assert.ok(tookMs < 3500, `close({timeoutMs: 2000}) took ${tookMs} ms`);
    assert.equal(s.fake().isConnected(), true, 'disconnected while the send still ran');
    // The call returns at its request's timeout; only then is the consumer disconnected.
    await until(() => !s.fake().isConnected(), 'the deferred disconnect', STUCK_MS + 5000);
    assert.equal(s.producer().disconnectedConsumerCalls, 0);
    // Nothing of the transaction was committed: its inputs are the next owner's.
    assert.equal(committed(s, 0), undefined);
  });

  it('processTransactional(): close({timeoutMs: 2000}) stays within its deadline while a commitTransaction (commitTimeoutMs 8000) cannot reach the coordinator (it is resumable: no need to wait the whole call)', async function () {
    this.timeout(30_000);
    let down = false;
    const s = transactionalHarness(
      {
        plan: (op: TxnOp) =>
          down && op === 'commit' ? { code: -185, retriable: true, afterTimeout: true } : undefined,
      },
      { commitTimeoutMs: 8000 },
    );
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-close-commit',
          maxMs: 50,
          producerConfig: { 'transaction.timeout.ms': 40_000 },
        })
        .subscribe({ error: () => undefined }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 3, '0..2 committed');
    down = true;
    s.fake().produce(T, 0, 2);
    await until(() => s.producer().calls.filter((c) => c === 'commit').length >= 2, 'commit 3..4');
    const tookMs = await settledWithin(s.consumer.close({ timeoutMs: 2000 }), 25_000);
    assert.ok(tookMs < 3500, `close({timeoutMs: 2000}) took ${tookMs} ms`);
  });

  it('processTransactional(): a long-running consumer keeps nothing per commit for a close that never came (each offset send listens for the close deadline only while it runs)', async function () {
    this.timeout(30_000);
    const s = transactionalHarness({}, {});
    subs.push(
      s.consumer
        .processTransactional(one, { transactionalId: 'tx-no-leak', maxMs: 5 })
        .subscribe({ error: () => undefined }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().rebalanceAssign([tp(0)]);
    for (let i = 0; i < 40; i++) {
      s.fake().produce(T, 0, 1);
      await until(() => committed(s, 0) === i + 1, `input ${i} committed`);
    }
    // An internal invariant, read through the consumer: no waiter outlives its call.
    const unit = (s.consumer as unknown as { transactions: { closeDeadline: { waiting: number } } })
      .transactions;
    assert.equal(unit.closeDeadline.waiting, 0);
    assert.ok(s.producer().calls.filter((c) => c === 'send').length >= 40);
  });

  it('process(): a second, shorter close() during the final commit’s read-back (a commit of unknown outcome) never disconnects while node-rdkafka’s committed() worker still runs', async function () {
    this.timeout(30_000);
    let created: SlowReadFake | undefined;
    const fakeOptions: FakeOptions = {
      // The periodic commit of 3 is answered "Local: Timed out": its outcome is unknown.
      commitResult: (offsets) => (offsets.some((o) => o.offset === 3) ? -185 : undefined),
    };
    const h = harness({ commitTimeoutMs: 8000 }, fakeOptions, {
      consumerFactory: ((g: Record<string, unknown>) => {
        created = new SlowReadFake(g, fakeOptions);
        return created;
      }) as never,
    });
    const fake = (): SlowReadFake => created!;
    subs.push(h.consumer.process(() => undefined).subscribe({ error: () => undefined }));
    await until(() => created !== undefined && fake().isConnected(), 'connect');
    fake().produce(T, 0, 3);
    fake().rebalanceAssign([tp(0)]);
    await until(
      () => fake().calls.some((c) => c.op === 'commit' && c.offsets.includes(`${T}[0]@3`)),
      'the periodic commit of 3 (answered timed out)',
    );
    fake().produce(T, 0, 2);
    await until(() => fake().commits.get(`${T}[0]`) === 5, 'the periodic commit of 5 confirmed');
    // Graceful close (e.g. the pipeline unsubscribed): its revoke reads the group offsets back.
    void h.consumer.close({ timeoutMs: 20_000 });
    await until(() => fake().outstandingReads > 0, 'the read-back of the group offsets');
    // SIGTERM: a shorter close wins.
    const tookMs = await settledWithin(h.consumer.close({ timeoutMs: 1000 }), 25_000);
    assert.ok(tookMs < 2500, `the second close took ${tookMs} ms`);
    assert.equal(
      fake().disconnectsDuringRead,
      0,
      'disconnect() ran while a committed() worker still used the consumer (use-after-free in the binding)',
    );
  });
});
