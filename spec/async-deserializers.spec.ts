/**
 * Async deserializers (a schema-registry decoder fetching a schema on first use): the handler runs
 * once decoding resolves, order within a partition holds even when later decodes resolve first, a
 * rejection is a DeserializationError that is never retried, and batches wait for every message.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { DeserializationError } from '../lib';
import type { ConsumerEvent, KafkaMessage, Processed } from '../lib';
import { T, committed, gate, harness, tp, until } from './helpers/harness';

describe('async deserializers', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('runs the handler with the resolved value, in offset order even when later decodes resolve first', async () => {
    const h = harness();
    const slowFirst = gate();
    let decodingFirst = false;
    const seen: { offset: number; value: string }[] = [];
    subs.push(
      h.consumer
        .process(
          (m: { offset: number; value: string }) =>
            void seen.push({ offset: m.offset, value: m.value }),
          {
            value: async (data: Buffer | null, m: KafkaMessage) => {
              if (m.offset === 0) {
                decodingFirst = true;
                await slowFirst.promise;
              }
              return `v${m.offset}:${data?.length ?? 0}`;
            },
          },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => decodingFirst, 'offset 0 decoding');
    assert.deepEqual(seen, [], 'nothing runs before offset 0 is decoded (partitionConcurrency 1)');
    slowFirst.open();
    await until(() => seen.length === 3, 'three handled');
    assert.deepEqual(seen, [
      { offset: 0, value: 'v0:5' },
      { offset: 1, value: 'v1:5' },
      { offset: 2, value: 'v2:5' },
    ]);
    await until(() => committed(h) === 3, 'committed');
    await h.consumer.close();
  });

  it('a rejected decode is a DeserializationError, never retried, and follows the policy (skip)', async () => {
    const h = harness();
    const events: ConsumerEvent[] = [];
    h.consumer.events$.subscribe((e) => events.push(e));
    let decodes = 0;
    const handled: number[] = [];
    const out: Processed<void>[] = [];
    subs.push(
      h.consumer
        .process((m: { offset: number }) => void handled.push(m.offset), {
          key: async (data: Buffer | null, m: KafkaMessage) => {
            decodes += 1;
            if (m.offset === 1) throw new Error('unknown schema id 42');
            return data;
          },
          onFailure: 'skip',
          retry: { count: 3, initialDelayMs: 1, maxDelayMs: 1 },
        })
        .subscribe((p) => out.push(p)),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 3, 'committed past the undecodable message');
    assert.deepEqual(handled, [0, 2]);
    assert.equal(decodes, 3, 'the failed decode was not retried');
    assert.ok(!events.some((e) => e.type === 'handler-retry'));
    const skipped = events.find((e) => e.type === 'message-skipped');
    assert.ok(skipped?.type === 'message-skipped' && skipped.offset === 1);
    assert.deepEqual(
      out.map((p) => p.status),
      ['processed', 'skipped', 'processed'],
    );
    await h.consumer.close();
  });

  it('stop: ends with the DeserializationError naming the part, commits only what came before', async () => {
    const h = harness();
    let error: unknown;
    subs.push(
      h.consumer
        .process(() => undefined, {
          value: (data: Buffer | null, m: KafkaMessage) =>
            m.offset === 2 ? Promise.reject(new Error('bad magic byte')) : Promise.resolve(data),
        })
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => error !== undefined, 'process() to end');
    assert.ok(error instanceof DeserializationError, String(error));
    assert.equal(error.part, 'value');
    assert.deepEqual(error.coordinates, { topic: T, partition: 0, offset: 2 });
    assert.match(error.message, /bad magic byte/);
    assert.equal(committed(h), 2);
  });

  it('processBatch() waits for every message of a batch to decode', async () => {
    const h = harness();
    const batches: string[][] = [];
    subs.push(
      h.consumer
        .processBatch((batch) => void batches.push(batch.messages.map((m) => m.value)), {
          maxSize: 4,
          maxWaitMs: 20,
          value: async (_data: Buffer | null, m: KafkaMessage) => {
            await new Promise((r) => setTimeout(r, 4 - m.offset));
            return `#${m.offset}`;
          },
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 4, 'committed');
    assert.deepEqual(batches.flat(), ['#0', '#1', '#2', '#3']);
    await h.consumer.close();
  });
});
