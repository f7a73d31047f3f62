/**
 * processTransactional(): records the handler got wrong and records the producer or the broker
 * refuses for good end the pipeline with a typed error or are skipped (`onFailure`) — never an
 * endless abort-and-redo loop; a record refused for a transient cause is redone, never skipped.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { Registry } from 'prom-client';
import { HandlerError, TransactionError, registerPrometheusMetrics } from '../lib';
import type { KafkaMessage, OutputRecord, TransactionalHandler } from '../lib';
import { fakeTransactionalProducerFactory } from './fakes/fake-transactional-producer';
import type {
  FakeTransactionalProducer,
  FakeTxnOptions,
  TxnRecord,
} from './fakes/fake-transactional-producer';
import { T, committed, gate, harness, tp, until } from './helpers/harness';

const one = (m: KafkaMessage): OutputRecord[] => [
  { topic: 'out', key: m.key, value: `${m.partition}:${m.offset}` },
];

/** A consumer whose fake transactional producer refuses values above 1000 bytes (MSG_SIZE_TOO_LARGE). */
function setup(options: FakeTxnOptions = {}) {
  const box: { fake?: () => { commits: Map<string, number> } } = {};
  const p = fakeTransactionalProducerFactory(() => box.fake!(), options);
  const factory = (g: Record<string, unknown>) => {
    const producer = p.factory(g) as unknown as FakeTransactionalProducer;
    const produce = producer.produce.bind(producer);
    producer.produce = (topic, partition, value, ...rest) => {
      if (value !== null && value.length > 1000) {
        throw Object.assign(new Error('Broker: Message size too large'), { code: 10 });
      }
      return produce(topic, partition, value, ...rest);
    };
    return producer as never;
  };
  const h = harness({}, {}, { transactionalProducerFactory: factory as never });
  box.fake = h.fake;
  return { ...h, producer: p.producer };
}

describe('processTransactional(): records that cannot be written', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  function run(
    s: ReturnType<typeof setup>,
    handler: TransactionalHandler,
    onFailure: 'stop' | 'skip' = 'stop',
  ) {
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(handler, {
          transactionalId: 'tx-refusals',
          retry: { count: 0 },
          maxMs: 5,
          onFailure,
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    return () => error;
  }

  it('headers that are not [name, value] pairs: a HandlerError, no transaction aborted', async () => {
    const s = setup();
    const error = run(s, (m) =>
      m.offset === 2
        ? [{ topic: 'out', value: '0:2', headers: { 'x-trace': 'abc' } as never }]
        : one(m),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => error() !== undefined, 'the pipeline ends');
    assert.ok(error() instanceof HandlerError, String(error()));
    assert.match((error() as Error).message, /headers/);
    assert.equal(s.consumer.metrics().transactions?.aborted ?? 0, 0);
    await until(() => s.consumer.metrics().transactions?.state !== 'committing', 'settled');
    assert.ok((committed(s) ?? 0) <= 2, 'nothing committed past the bad record');
  });

  it('a record the producer refuses again after the abort and the redo: a TransactionError naming the input', async () => {
    const s = setup();
    const error = run(s, (m) =>
      m.partition === 0 && m.offset === 2 ? [{ topic: 'out', value: 'x'.repeat(2000) }] : one(m),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().produce(T, 1, 5);
    s.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => error() !== undefined, 'the pipeline ends', 5000);
    assert.ok(error() instanceof TransactionError, String(error()));
    assert.match((error() as Error).message, /orders\[0\]@2/);
    assert.match((error() as Error).message, /Message size too large/);
    const aborted = s.consumer.metrics().transactions?.aborted ?? 0;
    assert.ok(aborted >= 1 && aborted <= 3, `one abort before the stop, not a loop (${aborted})`);
    assert.ok(
      (committed(s, 0) ?? 0) <= 2,
      'nothing of partition 0 committed past the refused input',
    );
  });

  /**
   * The broker refuses the poison record (MSG_SIZE_TOO_LARGE, after produce() took it) and, as a
   * refused batch does, every record of partition 0 in the same transaction.
   */
  const POISON = '0:2';
  const refusesPoisonBatch = (r: TxnRecord, txn: readonly TxnRecord[]): number | undefined =>
    txn.some((x) => String(x.value) === POISON) && String(r.value).startsWith('0:')
      ? 10
      : undefined;
  const values = (records: readonly TxnRecord[]): string[] => records.map((r) => String(r.value));

  it('a record the broker refuses after produce() (its delivery report): stop names the input and the output topic, after a bounded number of aborts', async () => {
    const s = setup({ brokerRefuses: refusesPoisonBatch });
    const error = run(s, one);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    s.fake().produce(T, 1, 6);
    s.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => error() !== undefined, 'the pipeline ends', 5000);
    const err = error() as TransactionError;
    assert.ok(err instanceof TransactionError, String(err));
    assert.deepEqual(err.input, { topic: T, partition: 0, offset: 2 });
    assert.equal(err.outputTopic, 'out');
    assert.equal(err.kafkaCode, 10);
    assert.match(err.message, /orders\[0\]@2 for topic out/);
    const t = s.consumer.metrics().transactions;
    assert.ok(
      t !== undefined && t.aborted >= 2 && t.aborted <= 4,
      `bounded aborts (${t?.aborted})`,
    );
    assert.ok((t?.refusedRecords ?? 0) >= 2);
    const seen = values(s.producer().committed);
    assert.ok(!seen.includes(POISON), 'the poison record never visible');
    assert.ok((committed(s, 0) ?? 0) <= 2, 'nothing of partition 0 committed at or past it');
    assert.equal(new Set(seen).size, seen.length, 'no output twice');
  });

  it("onFailure 'skip': the refused input counts with no output and an event says so; every other input exactly once, innocent batch-mates included", async () => {
    const s = setup({ brokerRefuses: refusesPoisonBatch });
    const registry = new Registry();
    registerPrometheusMetrics(s.consumer, { registry });
    const events: unknown[] = [];
    subs.push(s.consumer.events$.subscribe((e) => events.push(e)));
    const error = run(s, one, 'skip');
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    s.fake().produce(T, 1, 6);
    s.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(
      () => committed(s, 0) === 6 && committed(s, 1) === 6,
      'both partitions committed to their end',
      5000,
    );
    assert.equal(error(), undefined);
    const seen = values(s.producer().committed).sort();
    const expected = [0, 1]
      .flatMap((p) => [0, 1, 2, 3, 4, 5].map((o) => `${p}:${o}`))
      .filter((v) => v !== POISON)
      .sort();
    assert.deepEqual(seen, expected, 'every other input exactly once');
    const skipped = events.filter((e) => (e as { type: string }).type === 'message-skipped') as {
      partition: number;
      offset: number;
      error: { kafkaCode: number };
    }[];
    assert.equal(skipped.length, 1);
    assert.equal(skipped[0]?.partition, 0);
    assert.equal(skipped[0]?.offset, 2);
    assert.equal(skipped[0]?.error.kafkaCode, 10);
    assert.equal(s.consumer.metrics().transactions?.skippedInputs, 1);
    const t = s.consumer.metrics().transactions!;
    const text = await registry.metrics();
    const value = (line: string): number =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(`${line} `))
          ?.split(' ')[1],
      );
    assert.equal(value('kafka_consumer_transaction_skipped_inputs_total{group="g"}'), 1);
    assert.equal(
      value('kafka_consumer_transaction_refused_records_total{group="g"}'),
      t.refusedRecords,
    );
    assert.equal(value('kafka_consumer_transactions_total{group="g",result="aborted"}'), t.aborted);
    assert.equal(
      value('kafka_consumer_transactions_total{group="g",result="committed"}'),
      t.committed,
    );
    assert.equal(
      value('kafka_consumer_transaction_records_total{group="g",result="committed"}'),
      11,
    );
  });

  it("onFailure 'skip': the transaction carrying the skip aborts; the redo skips the input at once, one event, never produced again", async () => {
    // The broker refuses the poison record; once the input is judged poison and skipped, the first
    // sendOffsetsToTransaction after that fails as abortable (as a real broker's "skipped
    // sequence numbers" does), so the transaction carrying the skip is aborted and the partition
    // rewound to before the poison input.
    let failNextSend = false;
    let failedSends = 0;
    const s = setup({
      brokerRefuses: refusesPoisonBatch,
      plan: (op) => {
        if (op !== 'send' || !failNextSend) return undefined;
        failNextSend = false;
        failedSends += 1;
        return { code: 45, abortable: true }; // OUT_OF_ORDER_SEQUENCE_NUMBER
      },
    });
    const events: { type: string; offset?: number }[] = [];
    let refusedAtSkip: number | undefined;
    subs.push(
      s.consumer.events$.subscribe((e) => {
        events.push(e);
        if (e.type !== 'message-skipped') return;
        failNextSend = failedSends === 0;
        refusedAtSkip ??= s.consumer.metrics().transactions?.refusedRecords;
      }),
    );
    const error = run(s, one, 'skip');
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 6, 'committed to the end', 5000);
    assert.equal(error(), undefined);
    assert.equal(failedSends, 1, 'the commit carrying the skip failed once');
    const skipped = events.filter((e) => e.type === 'message-skipped');
    assert.deepEqual(
      skipped.map((e) => e.offset),
      [2],
      'one message-skipped event',
    );
    const poisonProduced = s
      .producer()
      .transactions.flatMap((t) => t.records)
      .filter((r) => String(r.value) === POISON).length;
    assert.equal(poisonProduced, 2, 'produced in its batch and alone, never after the skip');
    assert.deepEqual(
      values(s.producer().committed),
      ['0:0', '0:1', '0:3', '0:4', '0:5'],
      'every other input exactly once, in order',
    );
    const t = s.consumer.metrics().transactions!;
    assert.equal(t.skippedInputs, 1);
    assert.equal(t.refusedRecords, refusedAtSkip, 'no record refused after the skip');
    assert.equal(t.aborted, 3, 'its batch, its redo alone, the transaction carrying the skip');
  });

  it("onFailure 'skip': a skip judged in one assignment is not remembered in the next one (judged afresh, one event)", async () => {
    const s = setup({ brokerRefuses: refusesPoisonBatch });
    const events: { type: string; offset?: number }[] = [];
    subs.push(s.consumer.events$.subscribe((e) => events.push(e)));
    // The third run of the poison input (its redo after it was judged poison) waits, in the first
    // assignment, until the partition was assigned again (a new generation).
    const held = gate();
    let runs = 0;
    const error = run(
      s,
      async (m) => {
        if (m.offset === 2 && ++runs === 3) await held.promise;
        return one(m);
      },
      'skip',
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => runs === 3, 'the poison input judged and redone');
    const poisonProduced = (): number =>
      s
        .producer()
        .transactions.flatMap((t) => t.records)
        .filter((r) => String(r.value) === POISON).length;
    assert.equal(poisonProduced(), 2, 'in its batch and alone');
    s.fake().rebalanceRevoke([tp(0)], { lost: true });
    await until(() => s.events.some((e) => e.type === 'lost'), 'lost');
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.events.filter((e) => e.type === 'assigned').length === 2, 'reassigned');
    held.open();
    await until(() => committed(s, 0) === 6, 'committed to the end', 5000);
    assert.equal(error(), undefined);
    assert.equal(poisonProduced(), 4, 'produced again in the new assignment (judged afresh)');
    assert.ok(!values(s.producer().committed).includes(POISON), 'the poison record never visible');
    assert.deepEqual(
      events.filter((e) => e.type === 'message-skipped').map((e) => e.offset),
      [2],
      'one message-skipped event: the first assignment never skipped it',
    );
    assert.equal(s.consumer.metrics().transactions?.skippedInputs, 1);
  });

  it("onFailure 'skip' with a record produce() refuses: the input counts with no output, the others exactly once", async () => {
    const s = setup();
    const error = run(
      s,
      (m) =>
        m.partition === 0 && m.offset === 2 ? [{ topic: 'out', value: 'x'.repeat(2000) }] : one(m),
      'skip',
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 5, 'committed to the end', 5000);
    assert.equal(error(), undefined);
    assert.deepEqual(values(s.producer().committed), ['0:0', '0:1', '0:3', '0:4']);
    assert.equal(s.consumer.metrics().transactions?.skippedInputs, 1);
  });

  it("onFailure 'skip': a record whose delivery timed out (a transient cause) is redone until written, never skipped", async () => {
    let timeouts = 0;
    const s = setup({
      brokerRefuses: (r) => {
        if (String(r.value) !== POISON || timeouts >= 4) return undefined;
        timeouts += 1;
        return -192; // Local: Message timed out
      },
    });
    const error = run(s, one, 'skip');
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 6, 'committed to the end', 5000);
    assert.equal(error(), undefined);
    assert.equal(timeouts, 4, 'the record timed out four times');
    assert.deepEqual(
      values(s.producer().committed).sort(),
      [0, 1, 2, 3, 4, 5].map((o) => `0:${o}`),
    );
    assert.equal(s.consumer.metrics().transactions?.skippedInputs, 0);
  });
});
