import assert from 'node:assert/strict';
import pino from 'pino';
import { firstValueFrom, lastValueFrom, toArray } from 'rxjs';
import { DeadLetterError, HandlerError } from '../../lib';
import { resolveSettings } from '../../lib/internal/settings/resolve-settings';
import { resolveProcessOptions } from '../../lib/process-options';
import type { ConsumerEvent, KafkaMessage, ProcessOptions, ProcessedStatus } from '../../lib';
import type { DeadLetterWriter } from '../../lib/internal/process/dead-letter';
import { FailurePolicy } from '../../lib/internal/process/failure-policy';
import type { PartitionControl } from '../../lib/internal/partition/partition-control';

const settings = resolveSettings({
  config: { 'bootstrap.servers': 'b:9092', 'group.id': 'g' },
  topics: ['orders'],
} as never);

const message = (offset: number, signal = new AbortController().signal): KafkaMessage =>
  ({ topic: 'orders', partition: 0, offset, key: null, value: null, signal }) as never;

/** The partition's `halt()` calls (a stop halts what waits of it). */
let halts = 0;
const partition = { halt: () => (halts += 1) } as unknown as PartitionControl;

function policy(options: ProcessOptions<unknown, unknown>, deadLetter?: DeadLetterWriter) {
  const events: ConsumerEvent[] = [];
  const settled: (number | string)[] = [];
  const failures: Error[] = [];
  const counters = { retries: 0, skipped: 0, deadLettered: 0, failed: 0 };
  const p = new FailurePolicy<string, { status: ProcessedStatus; offsets: number[] }>(
    resolveProcessOptions(options, settings),
    { failWith: (e) => void failures.push(e), publish: (e) => void events.push(e), counters },
    pino({ level: 'silent' }),
    deadLetter,
    () => 0.5,
    {
      settle: (_p, ms, r) => void settled.push(...ms.map((m) => `${m.offset}:${String(r)}`)),
      output: (ms, status) => ({ status, offsets: ms.map((m) => m.offset) }),
    },
  );
  return { p, events, settled, failures, counters };
}

const handlerError = (m: KafkaMessage) =>
  new HandlerError(
    'boom',
    { topic: m.topic, partition: m.partition, offset: m.offset },
    {
      cause: new Error('boom'),
      attempts: 3,
    },
  );

describe('FailurePolicy (what a handler failure leads to)', () => {
  it("skip: each message counts done without a result, one 'skipped' output, an event per message", async () => {
    const t = policy({ onFailure: 'skip' });
    const ms = [message(4), message(5)];
    const out = await lastValueFrom(
      t.p.fail(partition, ms, handlerError(ms[0]!), 3).pipe(toArray()),
    );
    assert.deepEqual(out, [{ status: 'skipped', offsets: [4, 5] }]);
    assert.deepEqual(t.settled, ['4:undefined', '5:undefined']);
    assert.equal(t.counters.skipped, 2);
    assert.deepEqual(
      t.events.map((e) => e.type),
      ['message-skipped', 'message-skipped'],
    );
  });

  it('stop: nothing counts done, the consumer is failed with the error', async () => {
    const t = policy({ onFailure: 'stop' });
    const m = message(9);
    const err = handlerError(m);
    const haltsBefore = halts;
    const out = await lastValueFrom(t.p.fail(partition, [m], err, 3).pipe(toArray()));
    assert.deepEqual(out, []);
    assert.deepEqual(t.settled, []);
    assert.deepEqual(t.failures, [err]);
    assert.equal(t.counters.failed, 1);
    assert.equal(halts - haltsBefore, 1, 'nothing waiting of the partition starts');
  });

  it('a message whose partition was released meanwhile: no policy at all', async () => {
    const t = policy({ onFailure: 'stop' });
    const ac = new AbortController();
    ac.abort();
    const m = message(1, ac.signal);
    const out = await lastValueFrom(t.p.fail(partition, [m], handlerError(m), 1).pipe(toArray()));
    assert.deepEqual([out, t.failures, t.settled], [[], [], []]);
  });

  it('dead-letter: a write the broker refused stops with a DeadLetterError, nothing acked', async () => {
    const writer = {
      topic: 'orders.dlq',
      send: () => Promise.reject(new Error('broker down')),
    } as unknown as DeadLetterWriter;
    const t = policy({ onFailure: 'dead-letter', deadLetter: { topic: 'orders.dlq' } }, writer);
    const m = message(3);
    const out = await lastValueFrom(t.p.fail(partition, [m], handlerError(m), 2).pipe(toArray()));
    assert.deepEqual(out, []);
    assert.ok(t.failures[0] instanceof DeadLetterError);
    assert.equal(t.counters.deadLettered, 0);
  });

  it('retry delay: waits the backoff, counts the retry and announces it; an aborted signal abandons it', async () => {
    const t = policy({ retry: { count: 3, initialDelayMs: 5, maxDelayMs: 5, jitter: 0 } });
    let abandoned = 0;
    const waited = await firstValueFrom(
      t.p.retryDelay(message(2), new Error('x'), 1, () => (abandoned += 1)),
    );
    assert.equal(waited, 0);
    assert.equal(t.counters.retries, 1);
    assert.equal(t.events[0]?.type, 'handler-retry');
    const ac = new AbortController();
    const pending = firstValueFrom(
      t.p.retryDelay(message(2, ac.signal), new Error('x'), 2, () => (abandoned += 1)),
    );
    ac.abort();
    await assert.rejects(pending, /x/);
    assert.equal(abandoned, 1);
  });
});
