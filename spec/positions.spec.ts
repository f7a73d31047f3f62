import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { KafkaClientError } from '../lib';
import { T, committed, harness, tp, until } from './helpers/harness';

/**
 * librdkafka's position moves past offsets never delivered (transaction markers, aborted records
 * under read_committed); the engine asks it between two consume calls so that the committed
 * offset can pass them. It asks after a consume call that returned fewer messages than asked, and
 * otherwise at most every 100 ms.
 */
describe('positions past offsets never delivered', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  const run = async (fill: (h: ReturnType<typeof harness>) => void) => {
    const h = harness();
    let processed = 0;
    subs.push(h.consumer.process(() => void (processed += 1)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    fill(h);
    h.fake().rebalanceAssign([tp(0)]);
    return { h, processed: () => processed };
  };

  it('commits past a trailing transaction marker read after full consume batches', async () => {
    const { h, processed } = await run((h) => {
      h.fake().produce(T, 0, 1000);
      h.fake().produceMarker(T, 0);
    });
    await until(() => processed() === 1000, 'every record');
    await until(() => committed(h) === 1001, 'committed past the marker');
    await h.consumer.close();
    assert.equal(committed(h), 1001);
  });

  it('stops when the binding dropped a batch it could not allocate, and commits nothing past it', async () => {
    const h = harness();
    let processed = 0;
    let failure: unknown;
    subs.push(
      h.consumer.process(() => void (processed += 1)).subscribe({ error: (e) => (failure = e) }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => processed === 5, 'the first records');
    // The next batch with messages is dropped, librdkafka's position past it (at 10).
    h.fake().droppedBatchErrors.push({ code: -196, message: 'consumeBatch: out of memory' });
    h.fake().produce(T, 0, 5);
    await until(() => failure !== undefined, 'the consumer stops');
    assert.ok(failure instanceof KafkaClientError, `a KafkaClientError: ${String(failure)}`);
    assert.match((failure as Error).message, /out of memory/);
    await h.consumer.close();
    assert.equal(processed, 5);
    // A position read after the failed call would have moved the ledger to 10, and the close's
    // commit past the five records the binding dropped.
    assert.equal(committed(h), 5, 'committed up to the dropped batch, not past it');
  });

  it('commits past markers inside and at the end of the log', async () => {
    const { h, processed } = await run((h) => {
      h.fake().produce(T, 0, 300);
      h.fake().produceMarker(T, 0);
      h.fake().produce(T, 0, 699);
      h.fake().produceMarker(T, 0);
    });
    await until(() => processed() === 999, 'every record');
    await until(() => committed(h) === 1001, 'committed past the last marker');
    await h.consumer.close();
  });

  it('asks the position after every short consume call, and after full ones at most every 100 ms', async () => {
    const { h, processed } = await run((h) => h.fake().produce(T, 0, 20_000));
    await until(() => processed() === 20_000, 'every record', 20_000);
    await until(() => committed(h) === 20_000, 'committed');
    const log = [...h.fake().consumeLog];
    await h.consumer.close();
    const first = log.findIndex((c) => c.returned > 0);
    assert.ok(first >= 0);
    const since = log.slice(first);
    assert.ok(
      since.some((c) => c.returned === c.asked && c.asked > 1),
      'full batches were consumed',
    );
    for (const [i, c] of since.entries()) {
      if (c.returned < c.asked) {
        assert.notEqual(c.positionAt, undefined, `position asked after short call ${first + i}`);
      }
    }
    // A position asked after a full batch comes 100 ms or more after the consume answer that the
    // previous position lookup followed (the engine compares the times of the answers).
    let noted: (typeof log)[number] | undefined;
    for (const c of since) {
      if (c.positionAt === undefined) continue;
      if (noted !== undefined && c.returned === c.asked) {
        assert.ok(
          c.positionAt - noted.answeredAt >= 100,
          `position after a full batch ${c.positionAt - noted.answeredAt} ms after the last`,
        );
      }
      noted = c;
    }
  });

  it('takes no position while the next consume call is in flight: commits never pass what was handed out', async () => {
    // The loop makes its next consume call before it dispatches a full batch; librdkafka's
    // position then counts that call's messages too. Taken for the ledger, it would commit
    // offsets of messages not yet handed out (lost if the process died then).
    let processed = 0;
    let passed: string | undefined;
    const h = harness(
      { consumeBatchSize: 50 },
      {
        hooks: {
          commitSent: (offsets) => {
            // Offsets 0–29,999 are records, 30,000 the marker: 30,001 is right once all are done.
            for (const o of offsets)
              if (o.offset > processed && processed < 30_000)
                passed ??= `committed ${o.offset} with ${processed} done`;
          },
        },
      },
    );
    subs.push(h.consumer.process(() => void (processed += 1)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 30_000);
    h.fake().produceMarker(T, 0);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => processed === 30_000, 'every record', 20_000);
    await until(() => committed(h) === 30_001, 'committed past the marker');
    await h.consumer.close();
    const log = h.fake().consumeLog;
    assert.ok(
      log.filter((c) => c.returned === c.asked && c.asked > 1).length > 100,
      'full batches were consumed',
    );
    assert.ok(
      log.filter((c) => c.positionAt !== undefined).length > 1,
      'positions were taken (so the marker was passed by a position)',
    );
    assert.equal(passed, undefined);
    assert.equal(h.fake().positionsWhileConsuming, 0);
  });

  it('closes while full batches stream: no disconnect under a consume call, every handled record committed, none beyond', async () => {
    let processed = 0;
    // Each call that finds messages takes 5 ms, as a worker converting a batch does: a close that
    // did not wait for the loop's last call would disconnect under it.
    const h = harness({ consumeBatchSize: 50 }, { consumeLatencyMs: 5 });
    subs.push(h.consumer.process(() => void (processed += 1)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 200_000);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => processed > 2_000, 'streaming');
    await h.consumer.close();
    assert.ok(processed < 200_000, `closed mid-stream (${processed} handled)`);
    assert.equal(h.fake().disconnectsWhileConsuming, 0);
    assert.equal(committed(h), processed);
  });
});
