/**
 * `consumer.commit()` through the public API: commits what was processed now, whatever the
 * interval, and answers once the broker confirmed it — with the group, and with
 * processTransactional() (the open transaction commits).
 */
import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import type { Subscription } from 'rxjs';
import { ClosedError, CommitError } from '../lib';
import type { KafkaMessage } from '../lib';
import { T, committed, gate, harness, tp, until } from './helpers/harness';
import { echoTransactional, transactionalHarness } from './helpers/transactional';

const E = Kafka.CODES.ERRORS;

describe('consumer.commit()', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  /** A consumer with no periodic commit in sight, 0..4 of partition 0 processed. */
  async function processedFive(fakeOptions = {}) {
    const h = harness({ commitIntervalMs: 600_000, commitTimeoutMs: 500 }, fakeOptions);
    const done: number[] = [];
    subs.push(h.consumer.process((m: KafkaMessage) => void done.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => done.length === 5, 'five processed');
    return h;
  }

  it('commits what was processed now and resolves once the broker holds it', async () => {
    const h = await processedFive();
    assert.equal(committed(h), undefined, 'the interval has not come');
    const results = await h.consumer.commit();
    assert.deepEqual(results, [{ topic: T, partition: 0, status: 'committed', offset: 5 }]);
    assert.equal(committed(h), 5, 'the broker holds it when commit() resolves');
    assert.deepEqual(await h.consumer.commit(), [
      { topic: T, partition: 0, status: 'unchanged', offset: 5 },
    ]);
    await h.consumer.close();
  });

  it("called while a revoke drains, answers with that revoke's final commit", async () => {
    const h = harness({ commitIntervalMs: 600_000, commitTimeoutMs: 2000 });
    const release = gate();
    const done: number[] = [];
    subs.push(
      h.consumer
        .process(async (m: KafkaMessage) => {
          if (m.offset === 4) await release.promise;
          done.push(m.offset);
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => done.length === 4, 'four processed, the fifth running');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    const answer = h.consumer.commit();
    release.open(); // the drain ends; the final commit covers 0..4
    assert.deepEqual(await answer, [{ topic: T, partition: 0, status: 'committed', offset: 4 }]);
    assert.ok((committed(h) ?? 0) >= 4, 'the broker holds it');
    await h.consumer.close();
  });

  it('rejects with a CommitError naming the partition when the broker does not confirm', async () => {
    let refuse = true;
    const h = await processedFive({
      commitResult: () => (refuse ? E.ERR_COORDINATOR_NOT_AVAILABLE : undefined),
    });
    await assert.rejects(
      h.consumer.commit(),
      (e: unknown) =>
        e instanceof CommitError &&
        e.partitions.some((p) => p.topic === T && p.partition === 0 && p.offset === 5),
    );
    assert.equal(committed(h), undefined);
    refuse = false;
    await h.consumer.close();
  });

  it('resolves with nothing before the consumer runs, and rejects once it closes', async () => {
    const h = harness();
    assert.deepEqual(await h.consumer.commit(), []);
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await h.consumer.close();
    await assert.rejects(h.consumer.commit(), (e: unknown) => e instanceof ClosedError);
  });

  it('with processTransactional(): commits the open transaction now, records and offsets together', async () => {
    const s = transactionalHarness({}, { commitTimeoutMs: 500 });
    const { handled, subscription } = echoTransactional(s, {
      transactionalId: 'tx-commit-now',
      maxMs: 600_000,
      maxMessages: 1000,
    });
    subs.push(subscription);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => handled.length === 3, 'three handled');
    await until(
      () => s.producer().transactions.at(-1)?.records.length === 3,
      'their records in the open transaction',
    );
    const committedTransactions = (): number =>
      s.producer().transactions.filter((t) => t.outcome === 'committed').length;
    assert.equal(committedTransactions(), 0, 'nothing committed yet (maxMs far away)');
    const results = await s.consumer.commit();
    assert.deepEqual(results, [{ topic: T, partition: 0, status: 'committed', offset: 3 }]);
    assert.equal(committed(s), 3, 'the offset, committed with the transaction');
    assert.equal(committedTransactions(), 1);
    assert.equal(s.producer().committed.length, 3, 'the three records visible');
    await s.consumer.close();
  });
});
