/**
 * processTransactional() and close(): the close stays within its deadline with a transaction
 * commit in flight, never lets node-rdkafka run sendOffsetsToTransaction on a disconnected
 * consumer, and leaves no transaction open behind it (read_committed readers would wait for it).
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import type { KafkaMessage, OutputRecord, TransactionalOptions } from '../lib';
import type { FakeTxnOptions, TxnOp } from './fakes/fake-transactional-producer';
import { T, committed, settledWithin, tp, until } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';
import type { TransactionalHarness } from './helpers/transactional';

const three = (m: KafkaMessage): OutputRecord[] =>
  [0, 1, 2].map((i) => ({ topic: 'out', key: m.key, value: `${m.partition}:${m.offset}:${i}` }));

describe('processTransactional(): close()', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  function start(
    txn: FakeTxnOptions,
    options: TransactionalOptions = {},
    consumer: Parameters<typeof transactionalHarness>[1] = {},
  ): TransactionalHarness & { error: () => unknown } {
    const s = transactionalHarness(txn, { commitTimeoutMs: 500, ...consumer });
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(three, { transactionalId: 'tx-close', ...options })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    return Object.assign(s, { error: () => error });
  }

  it('stays within closeTimeoutMs while a commitTransaction that timed out is being resumed (up to a transaction deadline far beyond it)', async () => {
    let failing = false;
    const s = start(
      {
        plan: (op: TxnOp) =>
          failing && op === 'commit'
            ? { code: -185, retriable: true, afterTimeout: true }
            : undefined,
      },
      { maxMs: 50, producerConfig: { 'transaction.timeout.ms': 30_000 } },
      { closeTimeoutMs: 2000 },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 3, '0..2 committed');
    failing = true;
    s.fake().produce(T, 0, 2);
    await until(
      () => s.producer().calls.filter((c) => c === 'commit').length >= 3,
      'the commit of 3..4 resumed',
    );
    const tookMs = await settledWithin(s.consumer.close(), 6000);
    assert.ok(tookMs < 3500, `close() took ${tookMs} ms with closeTimeoutMs 2000`);
    assert.equal(committed(s, 0), 3, 'the unconfirmed commit never counted');
    assert.ok(s.producer().calls.includes('disconnect'), 'the producer was closed');
    assert.equal(s.producer().disconnectedConsumerCalls, 0);
  });

  it('never lets sendOffsetsToTransaction run on a disconnected consumer: the consumer is disconnected only once the call answered', async () => {
    const s = start({}, { maxMs: 50 }, { closeTimeoutMs: 1000 });
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 3, '0..2 committed');
    // node-rdkafka's worker for the next sendOffsetsToTransaction waits for a libuv pool thread.
    s.producer().holdOffsets = true;
    s.fake().produce(T, 0, 2);
    await until(() => s.producer().heldOffsets === 1, 'the offsets of 3..4 on their way');
    const closing = s.consumer.close();
    const closedAt = Date.now();
    // The worker runs only after the close's deadline.
    await until(() => Date.now() - closedAt > 1500, 'past the close deadline', 3000);
    assert.ok(s.fake().isConnected(), 'the consumer is still connected while the call holds it');
    s.producer().releaseOffsets();
    await settledWithin(closing, 5000);
    assert.equal(s.producer().disconnectedConsumerCalls, 0, 'no call on a disconnected consumer');
    assert.ok(!s.fake().isConnected(), 'disconnected after the call answered');
    const open = s.producer().transactions.filter((t) => t.outcome === 'open' && t.records.length);
    assert.deepEqual(open, [], 'no transaction with records left open');
  });

  it('aborts a transaction that holds only part of a message’s records, so read_committed readers are not held up, within closeTimeoutMs', async () => {
    // Every record after the first one of input 0:1 is refused: the queue stays full.
    let produced = 0;
    const s = start(
      {
        queueFull: (_n, record) => {
          if (String(record.value).startsWith('0:1:')) produced += 1;
          return String(record.value).startsWith('0:1:') && produced > 1;
        },
      },
      { maxMs: 50 },
      { closeTimeoutMs: 2000 },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 1);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 1, '0:0 committed');
    s.fake().produce(T, 0, 1);
    await until(() => produced > 1, 'input 0:1 partly written');
    const tookMs = await settledWithin(s.consumer.close(), 6000);
    assert.ok(tookMs < 3500, `close() took ${tookMs} ms with closeTimeoutMs 2000`);
    const withPart = s
      .producer()
      .transactions.filter((t) => t.records.some((r) => String(r.value).startsWith('0:1:')));
    assert.ok(withPart.length > 0, 'the part was written');
    assert.deepEqual(
      withPart.map((t) => t.outcome),
      withPart.map(() => 'aborted'),
      'the transaction with the part aborted, none left open',
    );
    assert.equal(committed(s, 0), 1, 'the partly-written input not committed');
  });
});
