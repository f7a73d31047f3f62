/**
 * processTransactional(): the abort after a failed commit. librdkafka's abortTransaction is
 * resumable (one that timed out goes on in the background; calling it again resumes it), and a
 * failed commit has often used up its own deadline (sendOffsetsToTransaction retried, or held by a
 * frozen coordinator) by the time it aborts: the abort gets its own budget and is resumed while it
 * times out, up to the transaction's deadline, never a stop while it can still end.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { TransactionError } from '../lib';
import type { KafkaMessage, OutputRecord } from '../lib';
import type { TxnOp } from './fakes/fake-transactional-producer';
import { T, committed, tp, until } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';

const one = (m: KafkaMessage): OutputRecord[] => [
  { topic: 'out', key: m.key, value: `${m.partition}:${m.offset}` },
];

const ERR_TIMED_OUT = -185;
const ERR_ILLEGAL_GENERATION = 22;
const ERR_INVALID_TXN_STATE = 48;
const ERR_OUT_OF_ORDER_SEQUENCE = 45;

describe('processTransactional(): the abort after a failed commit', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('resumes an abort that keeps timing out after the commit used up its deadline (sendOffsets timed out, then refused): no stop, the work is redone and committed once', async () => {
    let failing = true;
    const s = transactionalHarness(
      {
        plan: (op: TxnOp, n: number) => {
          if (!failing) return undefined;
          // The commit's whole deadline (2 × commitTimeoutMs) goes to sendOffsets: a timeout,
          // then the group's refusal (abortable) once the rebalance went on without it.
          if (op === 'send' && n === 1) {
            return { code: ERR_TIMED_OUT, retriable: true, afterTimeout: true };
          }
          if (op === 'send' && n === 2) {
            return { code: ERR_ILLEGAL_GENERATION, abortable: true, afterTimeout: true };
          }
          // The abort then waits on the coordinator longer than one second: it times out three
          // times (each resumable) before it ends.
          if (op === 'abort' && n <= 3) {
            return { code: ERR_TIMED_OUT, retriable: true, afterTimeout: true };
          }
          return undefined;
        },
      },
      { commitTimeoutMs: 300 },
    );
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-abort',
          maxMs: 50,
          producerConfig: { 'transaction.timeout.ms': 6000 },
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(
      () => s.producer().calls.filter((c) => c === 'abort').length >= 4 || error !== undefined,
      'the abort resumed',
      10_000,
    );
    assert.equal(error, undefined, String(error));
    failing = false;
    await until(() => committed(s, 0) === 4 || error !== undefined, '0..3 committed', 10_000);
    assert.equal(error, undefined, String(error));
    assert.equal(s.producer().transactions[0]?.outcome, 'aborted');
    assert.deepEqual(
      s.producer().committed.map((r) => String(r.value)),
      ['0:0', '0:1', '0:2', '0:3'],
      'redone after the abort, each output committed once',
    );
    assert.deepEqual(s.producer().expiredCalls, []);
  });
  it('recreates the transactional producer when librdkafka refuses the abort fatally (INVALID_TXN_STATE) and no commit of the transaction was ever sent: the new one fences the old epoch, the work is redone and committed once', async () => {
    let failing = true;
    const s = transactionalHarness(
      {
        plan: (op: TxnOp) => {
          if (!failing) return undefined;
          // A coordinator that never saw the transaction's AddOffsetsToTxn (it timed out against
          // the old one) answers the abort's EndTxn with INVALID_TXN_STATE: fatal in librdkafka.
          if (op === 'send') return { code: ERR_ILLEGAL_GENERATION, abortable: true };
          if (op === 'abort') {
            failing = false;
            return { code: ERR_INVALID_TXN_STATE, fatal: true };
          }
          return undefined;
        },
      },
      { commitTimeoutMs: 300 },
    );
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-recover',
          maxMs: 50,
          producerConfig: { 'transaction.timeout.ms': 6000 },
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 4 || error !== undefined, '0..3 committed', 10_000);
    assert.equal(error, undefined, String(error));
    const [old, recreated] = s.producers();
    assert.ok(old !== undefined && recreated !== undefined, 'a second producer was created');
    assert.equal(s.producers().length, 2);
    assert.equal(recreated.config['transactional.id'], old.config['transactional.id']);
    assert.ok(old.fenced, 'the old producer is fenced by the new one');
    assert.ok(old.calls.includes('disconnect'), 'the old producer is disconnected');
    assert.deepEqual(
      old.transactions.map((t) => t.outcome),
      ['aborted'],
      'the lost transaction is aborted (by the fencing)',
    );
    assert.deepEqual(
      s.producers().flatMap((p) => p.committed.map((r) => String(r.value))),
      ['0:0', '0:1', '0:2', '0:3'],
      'redone by the new producer, each output committed once',
    );
    assert.equal(s.consumer.metrics().transactions?.aborted, 1);
  });

  it('recreates the transactional producer when the abort keeps timing out until the transaction’s deadline (records stuck towards a frozen leader) and no commit of it was ever sent: redone and committed once, no stop', async () => {
    let failing = true;
    const s = transactionalHarness(
      {
        plan: (op: TxnOp) => {
          if (!failing) return undefined;
          if (op === 'send') return { code: ERR_TIMED_OUT, abortable: true, afterTimeout: true };
          // The abort's flush never ends: every call times out (resumable) until the deadline.
          if (op === 'abort') return { code: ERR_TIMED_OUT, retriable: true, afterTimeout: true };
          return undefined;
        },
      },
      { commitTimeoutMs: 300 },
    );
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-abort-stuck',
          maxMs: 50,
          producerConfig: { 'transaction.timeout.ms': 3000 },
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.producers().length === 2 || error !== undefined, 'recreated', 10_000);
    failing = false;
    await until(() => committed(s, 0) === 4 || error !== undefined, '0..3 committed', 10_000);
    assert.equal(error, undefined, String(error));
    const [old] = s.producers();
    assert.ok(old?.calls.includes('disconnect'), 'the old producer is disconnected');
    assert.notEqual(
      old?.transactions[0]?.outcome,
      'committed',
      'the stuck transaction never commits',
    );
    assert.deepEqual(
      s.producers().flatMap((p) => p.committed.map((r) => String(r.value))),
      ['0:0', '0:1', '0:2', '0:3'],
      'redone by the new producer, each output committed once',
    );
    assert.equal(s.consumer.metrics().transactions?.recreatedProducers, 1);
  });

  it('recreates the transactional producer when sendOffsetsToTransaction fails fatally (not fenced: a sequence desynchronization after a leader change) before any commitTransaction of the transaction: redone and committed once', async () => {
    let failing = true;
    const s = transactionalHarness(
      {
        // librdkafka in its fatal state answers every transactional call with the fatal error.
        plan: (op: TxnOp) => {
          if (!failing) return undefined;
          if (op === 'send') return { code: ERR_OUT_OF_ORDER_SEQUENCE, fatal: true };
          if (op === 'abort') {
            failing = false;
            return { code: ERR_OUT_OF_ORDER_SEQUENCE, fatal: true };
          }
          return undefined;
        },
      },
      { commitTimeoutMs: 300 },
    );
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-recover-send',
          maxMs: 50,
          producerConfig: { 'transaction.timeout.ms': 6000 },
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 4 || error !== undefined, '0..3 committed', 10_000);
    assert.equal(error, undefined, String(error));
    assert.equal(s.producers().length, 2, 'recreated once');
    assert.ok(s.producers()[0]!.fenced);
    assert.deepEqual(
      s.producers().flatMap((p) => p.committed.map((r) => String(r.value))),
      ['0:0', '0:1', '0:2', '0:3'],
    );
    assert.equal(s.consumer.metrics().transactions?.recreatedProducers, 1);
  });

  it('stops (no recreation) when the abort is refused fatally after a commitTransaction was sent: its EndTxn may have reached the coordinator, so the transaction may commit', async () => {
    const s = transactionalHarness(
      {
        plan: (op: TxnOp) =>
          op === 'commit'
            ? { code: ERR_TIMED_OUT, abortable: true }
            : op === 'abort'
              ? { code: ERR_INVALID_TXN_STATE, fatal: true }
              : undefined,
      },
      { commitTimeoutMs: 300 },
    );
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(one, {
          transactionalId: 'tx-no-recover',
          maxMs: 50,
          producerConfig: { 'transaction.timeout.ms': 6000 },
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => error !== undefined, 'the consumer stops', 10_000);
    assert.ok(error instanceof TransactionError, String(error));
    assert.match((error as Error).message, /could not be aborted/);
    assert.equal(s.producers().length, 1, 'not recreated');
    assert.equal(committed(s, 0), undefined);
  });
});
