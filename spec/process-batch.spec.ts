import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { ConfigError, DeserializationError, HandlerError } from '../lib';
import type { ProcessedBatch } from '../lib';
import { fakeProducerFactory } from './fakes/fake-producer';
import { T, committed, harness, tp, until } from './helpers/harness';

describe('processBatch()', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('hands each partition its messages in ordered batches of at most maxSize and commits them', async () => {
    const h = harness({ consumeBatchSize: 7 });
    const batches: string[] = [];
    const out: ProcessedBatch<number>[] = [];
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            batches.push(`${b.partition}:${b.messages.map((m) => m.offset).join(',')}`);
            assert.equal(b.offset, b.messages[0]?.offset);
            assert.equal(b.lastOffset, b.messages[b.messages.length - 1]?.offset);
            return b.messages.length;
          },
          { maxSize: 4, maxWaitMs: 20 },
        )
        .subscribe((p) => out.push(p)),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().produce(T, 1, 3);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => committed(h, 0) === 10 && committed(h, 1) === 3, 'everything committed');
    const p0 = batches.filter((b) => b.startsWith('0:')).map((b) => b.slice(2));
    assert.deepEqual(p0.join(',').split(',').map(Number), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.ok(p0.every((b) => b.split(',').length <= 4));
    assert.ok(
      out.length > 0 && out.every((p) => p.status === 'processed' && p.result === p.offsets.length),
      JSON.stringify(out),
    );
    await h.consumer.close();
  });

  it('retries a failing batch as a whole, then stops at its first offset', async () => {
    const h = harness();
    let calls = 0;
    let error: unknown;
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            calls += 1;
            if (b.messages.some((m) => m.offset === 5)) throw new Error('bad batch');
          },
          { maxSize: 3, maxWaitMs: 5, retry: { count: 2, initialDelayMs: 1, maxDelayMs: 1 } },
        )
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 9);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => error !== undefined, 'the pipeline to error');
    assert.ok(error instanceof HandlerError, String(error));
    assert.equal(error.attempts, 3);
    assert.equal(error.coordinates.offset, 3);
    assert.equal(committed(h), 3, 'the batch before it is committed, none of the failed one');
    assert.equal(calls, 1 + 3);
  });

  it('dead-letters every message of a batch that failed for good', async () => {
    const p = fakeProducerFactory();
    const h = harness({}, {}, { producerFactory: p.factory as never });
    const out: ProcessedBatch[] = [];
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            if (b.offset === 0) throw new Error('first batch fails');
          },
          { maxSize: 2, maxWaitMs: 5, retry: 0, deadLetter: { topic: 'dlq' } },
        )
        .subscribe((x) => out.push(x)),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 4, 'all committed');
    assert.equal(p.producer().records.length, 2);
    assert.deepEqual(out.find((x) => x.status === 'dead-lettered')?.offsets, [0, 1]);
    await h.consumer.close();
  });

  it('on revoke drains the batch in flight and leaves the one being gathered to the next owner', async () => {
    const h = harness({ consumeBatchSize: 5 });
    let release!: () => void;
    const handled: number[][] = [];
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            handled.push(b.messages.map((m) => m.offset));
            if (handled.length === 1) return new Promise<void>((r) => (release = r));
            return undefined;
          },
          { maxSize: 5, maxWaitMs: 60_000 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 8); // one full batch (0..4) in flight, 5..7 gathered, waiting to fill
    h.fake().rebalanceAssign([tp(0)]);
    await until(
      () => handled.length === 1 && h.fake().remaining(T, 0) === 0,
      'first batch running',
    );
    h.fake().rebalanceRevoke([tp(0)]);
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(!h.events.some((e) => e.type === 'revoked'), 'the revoke waits for the batch');
    release();
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.equal(committed(h), 5);
    assert.deepEqual(handled, [[0, 1, 2, 3, 4]]);
    await h.consumer.close();
  });

  it('takes a message that cannot be decoded out of its batch (skip)', async () => {
    const h = harness();
    const seen: unknown[][] = [];
    subs.push(
      h.consumer
        .processBatch<number | undefined>((b) => void seen.push(b.messages.map((m) => m.value)), {
          maxSize: 10,
          maxWaitMs: 5,
          value: (data, m) => {
            if (m.offset === 1) throw new Error('garbled');
            return data?.length;
          },
          onFailure: 'skip',
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 3, 'committed past the garbled message');
    assert.deepEqual(seen.flat().length, 2);
    await h.consumer.close();
  });

  it('stop at a message that cannot be decoded: the messages before it in its batch run and are committed', async () => {
    for (const maxSize of [10, 2]) {
      const h = harness();
      const seen: number[] = [];
      let error: unknown;
      subs.push(
        h.consumer
          .processBatch((b) => void seen.push(...b.messages.map((m) => m.offset)), {
            maxSize,
            maxWaitMs: 5,
            value: (data, m) => {
              if (m.offset === 4) throw new Error('garbled');
              return data;
            },
          })
          .subscribe({ error: (e: unknown) => (error = e) }),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 10);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => error !== undefined, 'the stop');
      assert.ok(error instanceof DeserializationError, String(error));
      assert.equal(error.coordinates.offset, 4);
      assert.deepEqual(seen, [0, 1, 2, 3], `maxSize ${maxSize}`);
      assert.equal(committed(h), 4, `maxSize ${maxSize}: committed up to the failed message`);
    }
  });

  it('stop at an undecodable message whose batch-mates fail for good: the error names the batch, nothing committed', async () => {
    const h = harness();
    let error: unknown;
    const failed: number[] = [];
    subs.push(
      h.consumer.events$.subscribe((e) => {
        if (e.type === 'message-failed') failed.push(e.offset);
      }),
    );
    subs.push(
      h.consumer
        .processBatch(
          () => {
            throw new Error('bad');
          },
          {
            maxSize: 10,
            maxWaitMs: 5,
            retry: { count: 1, initialDelayMs: 1, maxDelayMs: 1 },
            value: (data, m) => {
              if (m.offset === 4) throw new Error('garbled');
              return data;
            },
          },
        )
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => error !== undefined, 'the stop');
    assert.ok(error instanceof HandlerError, String(error));
    assert.equal(committed(h) ?? 0, 0);
    assert.deepEqual(failed, [0], 'one failure, the batch: the undecodable one never came to it');
  });

  it("rejects ordering: 'key' (a batch holds many keys)", () => {
    const h = harness();
    assert.throws(
      () => h.consumer.processBatch(() => undefined, { ordering: 'key', partitionConcurrency: 2 }),
      (e: unknown) => e instanceof ConfigError && e.key === 'ordering',
    );
  });

  it('rejects bad batch bounds', () => {
    const h = harness();
    assert.throws(
      () => h.consumer.processBatch(() => undefined, { maxSize: 0 }),
      (e: unknown) => e instanceof ConfigError && e.key === 'maxSize',
    );
    assert.throws(
      () => h.consumer.processBatch(() => undefined, { maxWaitMs: -1 }),
      (e: unknown) => e instanceof ConfigError && e.key === 'maxWaitMs',
    );
    // Values String() cannot show (no prototype), and a BigInt: shown safely, still ConfigErrors.
    assert.throws(
      () => h.consumer.processBatch(() => undefined, { maxSize: Object.create(null) as number }),
      (e: unknown) => e instanceof ConfigError && e.key === 'maxSize',
    );
    assert.throws(
      () => h.consumer.processBatch(() => undefined, { maxWaitMs: 10n as unknown as number }),
      (e: unknown) => e instanceof ConfigError && e.key === 'maxWaitMs' && /10n/.test(e.message),
    );
  });
});
