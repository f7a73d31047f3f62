/**
 * processTransactional(): records the handler got wrong and records the producer refuses for good
 * end the pipeline with a typed error — never an endless abort-and-redo loop (found by an
 * adversarial review: both used to abort, rewind and redo the same input forever).
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { HandlerError, TransactionError } from '../lib';
import type { KafkaMessage, OutputRecord, TransactionalHandler } from '../lib';
import { fakeTransactionalProducerFactory } from './fakes/fake-transactional-producer';
import type { FakeTransactionalProducer } from './fakes/fake-transactional-producer';
import { T, committed, harness, tp, until } from './helpers/harness';

const one = (m: KafkaMessage): OutputRecord[] => [
  { topic: 'out', key: m.key, value: `${m.partition}:${m.offset}` },
];

/** A consumer whose fake transactional producer refuses values above 1000 bytes (MSG_SIZE_TOO_LARGE). */
function setup() {
  const box: { fake?: () => { commits: Map<string, number> } } = {};
  const p = fakeTransactionalProducerFactory(() => box.fake!());
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

  function run(s: ReturnType<typeof setup>, handler: TransactionalHandler) {
    let error: unknown;
    subs.push(
      s.consumer
        .processTransactional(handler, {
          transactionalId: 'tx-refusals',
          retry: { count: 0 },
          maxMs: 5,
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
});
