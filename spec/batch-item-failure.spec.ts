/**
 * Partial batch results: a `processBatch()` handler that throws a `BatchItemFailure` naming one
 * message. The messages before it are processed and committed, it is retried alone then handed to
 * the failure policy alone, the messages after it run again as a new batch — and, under 'stop',
 * never after the stop.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { BatchItemFailure, HandlerError } from '../lib';
import type { ConsumerEvent, KafkaMessage, ProcessedBatch } from '../lib';
import { T, committed, harness, tp, until } from './helpers/harness';

const fast = { count: 2, initialDelayMs: 1, maxDelayMs: 1 };

describe('processBatch() partial results (BatchItemFailure)', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('commits the messages before the failed one, retries it alone, and runs the rest as a new batch', async () => {
    const h = harness({ consumeBatchSize: 10 });
    const batches: number[][] = [];
    const out: ProcessedBatch[] = [];
    let failedOnce = false;
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            const offsets = b.messages.map((m) => m.offset);
            batches.push(offsets);
            const m3 = b.messages.find((m) => m.offset === 3);
            if (m3 && !failedOnce) {
              failedOnce = true;
              throw new BatchItemFailure(m3, new Error('m3 is bad once'));
            }
          },
          { maxSize: 6, maxWaitMs: 200, retry: fast },
        )
        .subscribe((p) => out.push(p)),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 6);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 6, 'everything committed');
    const failing = batches.find((b) => b.includes(3))!;
    assert.ok(failing.length > 1 && failing[0]! < 3, `3 failed inside a batch: ${batches}`);
    // The handler was given 0–2 once (they count as done), 3 again alone, 4–5 again in a new
    // batch (the failed call did not finish them).
    const runs = batches.flat();
    for (let o = 0; o < 6; o++) {
      assert.equal(runs.filter((x) => x === o).length, o < 3 ? 1 : 2, `runs of ${o}: ${batches}`);
    }
    const retried = batches[batches.indexOf(failing) + 1];
    assert.deepEqual(retried, [3], `3 retried alone: ${JSON.stringify(batches)}`);
    assert.ok(
      out.every((p) => p.status === 'processed'),
      JSON.stringify(out.map((p) => [p.offsets, p.status])),
    );
    assert.deepEqual(
      out.flatMap((p) => p.offsets),
      [0, 1, 2, 3, 4, 5],
      'each offset reported once, in order',
    );
    await h.consumer.close();
  });

  it("skips only the failed message under onFailure 'skip': the rest of its batch is processed", async () => {
    const h = harness({ consumeBatchSize: 10 });
    const events: ConsumerEvent[] = [];
    subs.push(h.consumer.events$.subscribe((e) => events.push(e)));
    const out: ProcessedBatch[] = [];
    const seen: number[] = [];
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            for (const m of b.messages) {
              if (m.offset === 2) throw new BatchItemFailure(m.offset, new Error('always bad'));
              seen.push(m.offset);
            }
          },
          { maxSize: 10, maxWaitMs: 100, retry: fast, onFailure: 'skip' },
        )
        .subscribe((p) => out.push(p)),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 6);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 6, 'everything committed');
    assert.deepEqual(seen, [0, 1, 3, 4, 5]);
    const skipped = events.filter((e) => e.type === 'message-skipped');
    assert.deepEqual(
      skipped.map((e) => (e as { offset: number }).offset),
      [2],
    );
    const error = (skipped[0] as { error: unknown }).error;
    assert.ok(error instanceof Error && error.message === 'always bad', String(error));
    assert.deepEqual(
      out.map((p) => [p.offsets, p.status]),
      [
        [[0, 1], 'processed'],
        [[2], 'skipped'],
        [[3, 4, 5], 'processed'],
      ],
    );
    await h.consumer.close();
  });

  it("stops at the failed message under onFailure 'stop': what is before it is committed, nothing after it runs", async () => {
    const h = harness({ consumeBatchSize: 10 });
    const seen: number[][] = [];
    let error: unknown;
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            seen.push(b.messages.map((m) => m.offset));
            const bad = b.messages.find((m) => m.offset === 2);
            if (bad) throw new BatchItemFailure(bad, new Error('always bad'));
          },
          { maxSize: 10, maxWaitMs: 100, retry: fast },
        )
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 6);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => error !== undefined, 'the pipeline to error');
    assert.ok(error instanceof HandlerError, String(error));
    assert.equal(error.coordinates.offset, 2);
    assert.equal(error.attempts, 3, 'the failed attempt in its batch, then two alone');
    assert.equal(committed(h), 2, 'the messages before it are committed, it is not');
    assert.ok(
      seen.every((b) => !b.some((o) => o > 2) || b.includes(2)),
      `nothing after it ran on its own: ${JSON.stringify(seen)}`,
    );
  });

  it('leaves the rest of a split batch to the next owner when the revoke begins during the failed message', async () => {
    const h = harness({ consumeBatchSize: 10 });
    let revoking = false;
    subs.push(h.consumer.rebalances$.subscribe((e) => e.type === 'revoking' && (revoking = true)));
    const calls: { offsets: number[]; afterRevoke: boolean }[] = [];
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            const offsets = b.messages.map((m) => m.offset);
            calls.push({ offsets, afterRevoke: revoking });
            const m1 = b.messages.find((m) => m.offset === 1);
            if (m1 && offsets.length > 1) throw new BatchItemFailure(m1, new Error('bad 1'));
            if (m1) throw new Error('bad 1 again');
          },
          {
            maxSize: 4,
            maxWaitMs: 20,
            onFailure: 'skip',
            retry: { count: 1, initialDelayMs: 300, maxDelayMs: 300, jitter: 0 },
          },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 8);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => calls.some((c) => c.offsets.includes(1)), 'the split batch');
    // The failed message waits 300 ms for its retry: the revoke begins meanwhile.
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'the revoke done', 10_000);
    const started = calls.filter((c) => c.afterRevoke && c.offsets[0] !== 1);
    assert.deepEqual(
      started,
      [],
      `no batch started after the revoke began: ${JSON.stringify(calls)}`,
    );
    // 0 done, 1 skipped after its retry (the drain waits for it), 2 and 3 left: committed at 2.
    assert.equal(committed(h), 2);
    await h.consumer.close();
  });

  it("under 'stop', an undecodable message after the failed one is not reported failed too", async () => {
    const h = harness({ consumeBatchSize: 10 });
    const events: ConsumerEvent[] = [];
    subs.push(h.consumer.events$.subscribe((e) => events.push(e)));
    let error: unknown;
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            const bad = b.messages.find((m) => m.offset === 1);
            if (bad) throw new BatchItemFailure(bad, new Error('bad 1'));
          },
          {
            maxSize: 10,
            maxWaitMs: 50,
            retry: fast,
            value: (d: Buffer | null, m: KafkaMessage) => {
              if (m.offset === 3) throw new Error('undecodable 3');
              return d;
            },
          },
        )
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 6);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => error !== undefined, 'the pipeline to error');
    await until(() => h.consumer.metrics().partitions.length === 0, 'the consumer closed');
    const failed = events.filter((e) => e.type === 'message-failed');
    assert.deepEqual(
      failed.map((e) => (e as { offset: number }).offset),
      [1],
    );
    assert.equal(committed(h), 1);
  });

  it('retry.when and handler-retry events see the cause when the failed message fails alone again', async () => {
    const h = harness({ consumeBatchSize: 10 });
    const events: ConsumerEvent[] = [];
    subs.push(h.consumer.events$.subscribe((e) => events.push(e)));
    let calls = 0;
    const seen: string[] = [];
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            for (const m of b.messages) {
              if (m.offset !== 2) continue;
              calls += 1; // the documented pattern: every failure wrapped
              throw new BatchItemFailure(
                m,
                calls === 1 ? new Error('transient') : new TypeError('permanent'),
              );
            }
          },
          {
            maxSize: 10,
            maxWaitMs: 50,
            onFailure: 'skip',
            retry: {
              count: 4,
              initialDelayMs: 1,
              maxDelayMs: 1,
              when: (err) => {
                seen.push((err as Error).name);
                return !(err instanceof TypeError);
              },
            },
          },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 4, 'everything committed');
    assert.equal(calls, 2, `retry.when saw ${seen.join(', ')}`);
    assert.deepEqual(seen, ['Error', 'TypeError']);
    const retries = events.filter((e) => e.type === 'handler-retry');
    assert.deepEqual(
      retries.map((e) => ((e as { error: Error }).error as Error).message),
      ['transient'],
    );
    await h.consumer.close();
  });

  it("a failure naming another partition's message fails the batch as a whole", async () => {
    const h = harness({ consumeBatchSize: 10 });
    const events: ConsumerEvent[] = [];
    subs.push(h.consumer.events$.subscribe((e) => events.push(e)));
    let other: KafkaMessage | undefined;
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            if (b.partition === 0) {
              other ??= b.messages[2] as unknown as KafkaMessage;
              return;
            }
            if (other) throw new BatchItemFailure(other, new Error('wrong batch'));
          },
          { maxSize: 10, maxWaitMs: 50, retry: 0, onFailure: 'skip' },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h, 0) === 4, 'partition 0 committed');
    h.fake().produce(T, 1, 4);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => committed(h, 1) === 4, 'partition 1 committed');
    const skipped = events
      .filter((e) => e.type === 'message-skipped')
      .map((e) => `${(e as { partition: number }).partition}@${(e as { offset: number }).offset}`);
    assert.deepEqual(skipped, ['1@0', '1@1', '1@2', '1@3']);
    await h.consumer.close();
  });

  it('a batch whose every message fails at once is split message by message without growing the stack', async () => {
    const n = 1000;
    const h = harness({ consumeBatchSize: 1000, maxBufferedMessages: 5000 });
    let calls = 0;
    subs.push(
      h.consumer
        .processBatch(
          (b) => {
            calls += 1;
            throw new BatchItemFailure(b.messages[0]!, new Error('down'));
          },
          { maxSize: n, maxWaitMs: 300, retry: 0, onFailure: 'skip' },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, n, 1);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === n, 'every message skipped and committed', 20_000);
    assert.ok(calls >= n, `${calls} handler calls`);
    await h.consumer.close();
  });

  it('fails the whole batch when the failure names a message that is not in it', async () => {
    const h = harness({ consumeBatchSize: 10 });
    let calls = 0;
    let error: unknown;
    subs.push(
      h.consumer
        .processBatch(
          () => {
            calls += 1;
            throw new BatchItemFailure(99, new Error('not ours'));
          },
          { maxSize: 10, maxWaitMs: 100, retry: fast },
        )
        .subscribe({ error: (e: unknown) => (error = e) }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => error !== undefined, 'the pipeline to error');
    assert.ok(error instanceof HandlerError, String(error));
    assert.equal(error.coordinates.offset, 0, 'the batch failed as a whole');
    assert.equal(calls, 3);
    assert.equal(committed(h) ?? 0, 0);
  });
});
