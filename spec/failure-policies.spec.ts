import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import { lastValueFrom, toArray } from 'rxjs';
import type { Subscription } from 'rxjs';
import {
  AuthenticationError,
  ConnectError,
  ConfigError,
  DEAD_LETTER_HEADERS,
  DeadLetterError,
  DeserializationError,
  ErrorCode,
  HandlerError,
  deserializers,
} from '../lib';
import type { ConsumerEvent, Processed, ProcessOptions, ReactiveConsumerOptions } from '../lib';
import type { ReactiveConsumerInternals } from '../lib/reactive-consumer';
import type { FakeOptions } from './fakes/fake-consumer';
import { fakeProducerFactory } from './fakes/fake-producer';
import type { FakeProducerOptions } from './fakes/fake-producer';
import { T, gate, harness, tp, until } from './helpers/harness';

const E = Kafka.CODES.ERRORS;
const fastRetry = { count: 3, initialDelayMs: 1, maxDelayMs: 2 };

/** A consumer on the fakes with its events and emitted results recorded. */
function setup(
  fakeOptions: FakeOptions = {},
  producerOptions: FakeProducerOptions = {},
  internals: ReactiveConsumerInternals = {},
  options: Partial<ReactiveConsumerOptions> = {},
) {
  const p = fakeProducerFactory(producerOptions);
  const h = harness(options, fakeOptions, { producerFactory: p.factory as never, ...internals });
  const events: ConsumerEvent[] = [];
  h.consumer.events$.subscribe((e) => events.push(e));
  return { ...h, producer: p.producer, consumerEvents: events };
}

type Setup = ReturnType<typeof setup>;

/** Runs process() and collects what it emits and how it ends. */
function run<V, R>(
  s: Setup,
  handler: (m: { offset: number; value: V }) => R | Promise<R>,
  options: ProcessOptions<Buffer | null, V>,
) {
  const out: Processed<R>[] = [];
  let error: unknown;
  let completed = false;
  const sub = s.consumer.process<V, R>(handler as never, options).subscribe({
    next: (p) => out.push(p),
    error: (e: unknown) => (error = e),
    complete: () => (completed = true),
  });
  return {
    out,
    sub,
    error: () => error,
    ended: () => completed || error !== undefined,
  };
}

const committed = (s: Setup, partition = 0) => s.fake().commits.get(`${T}[${partition}]`);

describe('failure policies', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('retries a failing handler with fresh calls and then counts it processed', async () => {
    const s = setup();
    const calls = new Map<number, number>();
    const r = run(
      s,
      (m) => {
        const n = (calls.get(m.offset) ?? 0) + 1;
        calls.set(m.offset, n);
        if (m.offset === 2 && n < 3) throw new Error(`flaky ${n}`);
        return m.offset;
      },
      { retry: fastRetry },
    );
    subs.push(r.sub);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s) === 5, 'all five committed');
    assert.equal(calls.get(2), 3);
    const retried = r.out.find((p) => p.offset === 2);
    assert.equal(retried?.status, 'processed');
    assert.equal(retried?.attempts, 3);
    const retries = s.consumerEvents.filter((e) => e.type === 'handler-retry');
    assert.deepEqual(
      retries.map((e) => (e.type === 'handler-retry' ? e.attempt : -1)),
      [1, 2],
    );
    await s.consumer.close();
  });

  it('blocks the partition while a message is retried with partitionConcurrency 1 (order kept)', async () => {
    const s = setup();
    const order: number[] = [];
    let failures = 0;
    const r = run(
      s,
      (m) => {
        if (m.offset === 1 && failures < 2) {
          failures += 1;
          throw new Error('not yet');
        }
        order.push(m.offset);
      },
      { retry: { count: 5, initialDelayMs: 5, maxDelayMs: 5 } },
    );
    subs.push(r.sub);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => order.length === 4, 'four handled');
    assert.deepEqual(order, [0, 1, 2, 3]);
    await s.consumer.close();
  });

  it('stop: after the last retry commits everything before the message, closes, and errors with its coordinates', async () => {
    const s = setup();
    const calls: number[] = [];
    const r = run(
      s,
      (m) => {
        calls.push(m.offset);
        if (m.offset === 3) throw new Error('poison');
      },
      { retry: { count: 2, initialDelayMs: 1, maxDelayMs: 1 }, partitionConcurrency: 4 },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 8);
    s.fake().rebalanceAssign([tp(0)]);
    await until(r.ended, 'process() to end');
    const err = r.error();
    assert.ok(err instanceof HandlerError, String(err));
    assert.equal(err.code, ErrorCode.Handler);
    assert.deepEqual(err.coordinates, { topic: T, partition: 0, offset: 3 });
    assert.equal(err.attempts, 3);
    assert.equal((err.cause as Error).message, 'poison');
    assert.equal(calls.filter((o) => o === 3).length, 3);
    // Later messages may have run (partitionConcurrency 4), but nothing past 3 is committed.
    assert.equal(committed(s), 3);
    assert.ok(s.fake().ops().includes('disconnect'));
    assert.ok(s.consumerEvents.some((e) => e.type === 'message-failed' && e.offset === 3));
  });

  it("stop under ordering 'key': no later message of the failed key runs, nor anything waiting", async () => {
    const s = setup();
    const calls: string[] = [];
    let releaseB!: () => void;
    const bWaits = new Promise<void>((r) => (releaseB = r));
    const r = run(
      s,
      async (m: { offset: number; key?: Buffer | null }) => {
        const key = String(m.key);
        calls.push(`${m.offset}:${key}`);
        if (m.offset === 0) throw new Error('poison');
        if (m.offset === 2) await bWaits; // B runs while A retries, until C started
        if (m.offset === 3) releaseB();
      },
      { ordering: 'key', partitionConcurrency: 4, retry: { count: 1, initialDelayMs: 50 } },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    // Keys A, A, B, C, A, D: offset 0 (A) fails for good; 1 and 4 (A) must never run after it.
    const keys = ['A', 'A', 'B', 'C', 'A', 'D'];
    const logs = (s.fake() as unknown as { logs: Map<string, { key: unknown }[]> }).logs;
    (logs.get(`${T}[0]`) ?? []).forEach((m, i) => (m.key = Buffer.from(keys[i] ?? 'Z')));
    s.fake().rebalanceAssign([tp(0)]);
    await until(r.ended, 'process() to end');
    assert.ok(r.error() instanceof HandlerError, String(r.error()));
    assert.ok(
      !calls.some((c) => c.endsWith(':A') && !c.startsWith('0:')),
      `no later message of key A ran: ${calls.join(' ')}`,
    );
    assert.equal(calls.filter((c) => c === '0:A').length, 2, 'offset 0 tried twice');
    assert.equal(committed(s), 0, 'nothing past the failed offset is committed');
  });

  it("stop under ordering 'key': earlier messages of other keys still run, so everything before the failed one is committed", async () => {
    const s = setup();
    const calls: number[] = [];
    const gateA = gate();
    const r = run(
      s,
      async (m: { offset: number }) => {
        calls.push(m.offset);
        if (m.offset === 0) await gateA.promise; // A: 1 (A) waits behind it
        if (m.offset === 3) throw new Error('poison'); // C fails for good
      },
      { ordering: 'key', partitionConcurrency: 4, retry: { count: 0 } },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    const keys = ['A', 'A', 'B', 'C', 'D'];
    const logs = (s.fake() as unknown as { logs: Map<string, { key: unknown }[]> }).logs;
    (logs.get(`${T}[0]`) ?? []).forEach((m, i) => (m.key = Buffer.from(keys[i] ?? 'Z')));
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => calls.includes(3), 'offset 3 failed');
    gateA.open();
    await until(r.ended, 'process() to end');
    assert.ok(r.error() instanceof HandlerError, String(r.error()));
    assert.ok(calls.includes(1), `offset 1 (key A, before the failed 3) ran: ${calls.join(' ')}`);
    assert.equal(committed(s), 3, 'everything before the failed offset is committed');
  });

  it("stop under ordering 'key': a second failure at a lower offset halts from there too", async () => {
    const s = setup();
    const calls: number[] = [];
    const failedAt5 = (): boolean =>
      s.consumerEvents.some((e) => e.type === 'message-failed' && e.offset === 5);
    const r = run(
      s,
      async (m: { offset: number }) => {
        calls.push(m.offset);
        if (m.offset === 5) throw new Error('poison B'); // fails first: halts at 5
        if (m.offset === 3) {
          await until(failedAt5, 'the stop at 5'); // then A fails too: 4 (A) must not run
          throw new Error('poison A');
        }
      },
      { ordering: 'key', partitionConcurrency: 8, retry: { count: 0 } },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 7);
    const keys = ['X', 'Y', 'Z', 'A', 'A', 'B', 'C'];
    const logs = (s.fake() as unknown as { logs: Map<string, { key: unknown }[]> }).logs;
    (logs.get(`${T}[0]`) ?? []).forEach((m, i) => (m.key = Buffer.from(keys[i] ?? 'Z')));
    s.fake().rebalanceAssign([tp(0)]);
    await until(r.ended, 'process() to end');
    await until(() => s.fake().ops().includes('disconnect'), 'closed');
    assert.ok(
      !calls.includes(4),
      `offset 4 (key A, after the failed 3) never ran: ${calls.join(' ')}`,
    );
    assert.equal(committed(s), 3);
  });

  for (const onFailure of ['skip', 'stop'] as const) {
    it(`a thrown value String() cannot convert (an object without a prototype) still gets the ${onFailure} policy`, async () => {
      const s = setup();
      const r = run(
        s,
        (m) => {
          if (m.offset === 1) throw Object.create(null) as object;
        },
        { onFailure },
      );
      subs.push(r.sub);
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 3);
      s.fake().rebalanceAssign([tp(0)]);
      if (onFailure === 'skip') {
        await until(() => committed(s) === 3, 'committed past the skipped message');
        assert.equal(r.error(), undefined);
        assert.deepEqual(
          r.out.map((o) => o.status),
          ['processed', 'skipped', 'processed'],
        );
      } else {
        await until(r.ended, 'process() to end');
        const err = r.error();
        assert.ok(err instanceof HandlerError, String(err));
        assert.match(err.message, /\[object Object\]/);
        assert.deepEqual(err.coordinates, { topic: T, partition: 0, offset: 1 });
        assert.equal(committed(s), 1);
      }
    });
  }

  it('abandons a retry still in backoff at the drain deadline: released then, message left for the next owner', async () => {
    const s = setup({}, {}, {}, { drainTimeoutMs: 1500 });
    const r = run(
      s,
      (m) => {
        if (m.offset === 2) throw new Error('down');
      },
      { retry: { count: 5, initialDelayMs: 60_000, maxDelayMs: 60_000 } },
    );
    subs.push(r.sub);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.consumerEvents.some((e) => e.type === 'handler-retry'), 'first retry');
    s.fake().rebalanceRevoke([tp(0)]);
    await until(
      () => s.events.some((e) => e.type === 'revoked'),
      'revoked at the drain deadline, without waiting a minute',
    );
    const drained = s.events.find((e) => e.type === 'drained');
    assert.ok(drained?.type === 'drained' && drained.timedOut, 'held until the drain deadline');
    assert.equal(committed(s), 2);
    assert.equal(r.error(), undefined, 'no policy applied to an abandoned retry');
    assert.ok(!s.consumerEvents.some((e) => e.type === 'message-failed'));
    await s.consumer.close();
  });

  it('skip: logs and counts the failed message, commits past it and goes on', async () => {
    const s = setup();
    const r = run(
      s,
      (m) => {
        if (m.offset === 1) throw new Error('bad record');
        return 'ok';
      },
      { onFailure: 'skip', retry: 1 },
    );
    subs.push(r.sub);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s) === 4, 'committed past the skipped message');
    const skipped = r.out.find((p) => p.offset === 1);
    assert.equal(skipped?.status, 'skipped');
    assert.equal(skipped?.attempts, 2);
    assert.equal((skipped?.error as Error).message, 'bad record');
    assert.deepEqual(
      r.out.filter((p) => p.status === 'processed').map((p) => p.offset),
      [0, 2, 3],
    );
    assert.ok(s.consumerEvents.some((e) => e.type === 'message-skipped' && e.offset === 1));
    await s.consumer.close();
  });

  describe('retry.when', () => {
    class Invalid extends Error {}

    it('skips the retries of a failure it calls not retryable, and retries the others', async () => {
      const s = setup();
      const calls = new Map<number, number>();
      const asked: [string, number][] = [];
      const r = run(
        s,
        (m) => {
          calls.set(m.offset, (calls.get(m.offset) ?? 0) + 1);
          if (m.offset === 1) throw new Invalid('no retry can fix this');
          if (m.offset === 2 && calls.get(2) === 1) throw new Error('flaky');
          return 'ok';
        },
        {
          onFailure: 'skip',
          retry: {
            ...fastRetry,
            when: (error, message) => {
              asked.push([(error as Error).message, message.offset]);
              return !(error instanceof Invalid);
            },
          },
        },
      );
      subs.push(r.sub);
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 4);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(s) === 4, 'committed past the skipped message');
      assert.equal(calls.get(1), 1, 'called once: no retry');
      assert.equal(calls.get(2), 2, 'the flaky failure was retried');
      const skipped = r.out.find((p) => p.offset === 1);
      assert.equal(skipped?.status, 'skipped');
      assert.equal(skipped?.attempts, 1);
      assert.deepEqual(asked, [
        ['no retry can fix this', 1],
        ['flaky', 2],
      ]);
      assert.ok(!s.consumerEvents.some((e) => e.type === 'handler-retry' && e.offset === 1));
      await s.consumer.close();
    });

    it('counts a predicate that throws as not retryable, and applies onFailure', async () => {
      const s = setup();
      let calls = 0;
      const r = run(
        s,
        () => {
          calls += 1;
          throw new Error('boom');
        },
        {
          retry: {
            ...fastRetry,
            when: () => {
              throw new Error('predicate bug');
            },
          },
        },
      );
      subs.push(r.sub);
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 1);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => r.ended(), 'the pipeline to stop (onFailure: stop)');
      assert.ok(r.error() instanceof HandlerError, String(r.error()));
      assert.equal((r.error() as HandlerError).attempts, 1);
      assert.equal(calls, 1);
    });

    it("asks with a batch's first message in processBatch()", async () => {
      const s = setup();
      const asked: number[] = [];
      let calls = 0;
      const out: { status: string; attempts: number }[] = [];
      subs.push(
        s.consumer
          .processBatch(
            () => {
              calls += 1;
              throw new Invalid('bad batch');
            },
            {
              // One batch of the 3, closed by its size: a short wait could close it early under
              // load (the first consume after an assignment may bring fewer than 3).
              maxSize: 3,
              maxWaitMs: 10_000,
              onFailure: 'skip',
              retry: {
                ...fastRetry,
                when: (_error, message) => {
                  asked.push(message.offset);
                  return false;
                },
              },
            },
          )
          .subscribe((b) => out.push(b)),
      );
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 3);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(s) === 3, 'committed past the skipped batch');
      assert.deepEqual(asked, [0]);
      assert.equal(calls, 1);
      assert.equal(out[0]?.attempts, 1);
      await s.consumer.close();
    });

    it('must be a function', () => {
      const s = setup();
      assert.throws(
        () => s.consumer.process(() => undefined, { retry: { when: true as never } }),
        (e: unknown) => e instanceof ConfigError && e.key === 'retry.when',
      );
    });
  });

  it('dead-letter: writes the record with its origin and error, and commits past it only once confirmed', async () => {
    const s = setup();
    const r = run(
      s,
      (m) => {
        if (m.offset === 2) throw new TypeError('cannot charge');
      },
      { deadLetter: { topic: 'orders.dlq' }, retry: 0 },
    );
    subs.push(r.sub);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s) === 4, 'committed past the dead-lettered message');
    const [record, ...more] = s.producer().records;
    assert.equal(more.length, 0);
    assert.ok(record);
    assert.equal(record.topic, 'orders.dlq');
    assert.equal(record.key?.toString(), 'k2');
    assert.deepEqual(record.value, Buffer.alloc(10, 1));
    const headers = record.headers.map((h) => Object.entries(h)[0]!);
    const get = (k: string) => headers.find(([name]) => name === k)?.[1]?.toString();
    // Original headers first, in order, then where it came from and why.
    assert.deepEqual(
      headers.slice(0, 2).map(([k, v]) => `${k}=${v.toString()}`),
      ['h=1', 'h=2'],
    );
    assert.equal(get(DEAD_LETTER_HEADERS.topic), T);
    assert.equal(get(DEAD_LETTER_HEADERS.partition), '0');
    assert.equal(get(DEAD_LETTER_HEADERS.offset), '2');
    assert.equal(get(DEAD_LETTER_HEADERS.group), 'g');
    assert.equal(get(DEAD_LETTER_HEADERS.errorName), 'TypeError');
    assert.equal(get(DEAD_LETTER_HEADERS.errorMessage), 'cannot charge');
    assert.equal(get(DEAD_LETTER_HEADERS.attempts), '1');
    assert.equal(get(DEAD_LETTER_HEADERS.stage), 'handler');
    assert.equal(r.out.find((p) => p.offset === 2)?.status, 'dead-lettered');
    assert.ok(s.consumerEvents.some((e) => e.type === 'dead-lettered' && e.offset === 2));
    await s.consumer.close();
    assert.ok(s.producer().calls.includes('disconnect'));
  });

  it('dead-letter: a write that fails for good stops the consumer (never skips)', async () => {
    const s = setup({}, { deliveryResult: () => E.ERR__MSG_TIMED_OUT });
    const r = run(
      s,
      (m) => {
        if (m.offset === 1) throw new Error('boom');
      },
      { deadLetter: { topic: 'orders.dlq' }, retry: 0 },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(r.ended, 'process() to end');
    const err = r.error();
    assert.ok(err instanceof DeadLetterError, String(err));
    assert.equal(err.deadLetterTopic, 'orders.dlq');
    assert.deepEqual(err.coordinates, { topic: T, partition: 0, offset: 1 });
    assert.ok(err.failure instanceof HandlerError);
    assert.equal(committed(s), 1);
  });

  it('decodes keys and values, and hands the handler typed messages', async () => {
    const s = setup();
    const seen: unknown[] = [];
    const r = run(s, (m: { offset: number; value: unknown }) => void seen.push(m.value), {
      value: (data) => data?.length ?? 0,
    });
    subs.push(r.sub);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 2, 7);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 2, 'two handled');
    assert.deepEqual(seen, [7, 7]);
    await s.consumer.close();
  });

  it('never retries a payload that cannot be decoded; stop errors with a DeserializationError', async () => {
    const s = setup();
    let calls = 0;
    const r = run(
      s,
      () => {
        calls += 1;
      },
      { value: 'json', retry: fastRetry },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3); // bytes 0x01: not JSON
    s.fake().rebalanceAssign([tp(0)]);
    await until(r.ended, 'process() to end');
    const err = r.error();
    assert.ok(err instanceof DeserializationError, String(err));
    assert.equal(err.code, ErrorCode.Deserialization);
    assert.equal(err.part, 'value');
    assert.deepEqual(err.coordinates, { topic: T, partition: 0, offset: 0 });
    assert.equal(calls, 0);
    assert.ok(!s.consumerEvents.some((e) => e.type === 'handler-retry'));
    assert.equal(committed(s) ?? 0, 0);
  });

  it('dead-letters a value that fails validation, naming the stage', async () => {
    const s = setup();
    const r = run(s, () => undefined, {
      value: deserializers.json((v) => typeof v === 'object'),
      deadLetter: { topic: 'orders.dlq' },
    });
    subs.push(r.sub);
    await until(() => s.fake().isConnected(), 'connect');
    // A JSON number (the fake's payload is 0x01 bytes; use one-byte "1" instead)
    s.fake().produce(T, 0, 1, 0);
    (s.fake() as unknown as { logs: Map<string, { value: Buffer }[]> }).logs
      .get(`${T}[0]`)!
      .forEach((m) => (m.value = Buffer.from('1')));
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s) === 1, 'committed past the invalid value');
    const record = s.producer().records[0];
    const stage = record?.headers
      .map((h) => Object.entries(h)[0]!)
      .find(([k]) => k === DEAD_LETTER_HEADERS.stage)?.[1];
    assert.equal(stage?.toString(), 'value');
    assert.equal(r.out[0]?.status, 'dead-lettered');
    assert.equal(r.out[0]?.attempts, 0);
    await s.consumer.close();
  });

  it('provides string and json deserializers that keep null as null', () => {
    const m = {} as never;
    assert.equal(deserializers.string()(Buffer.from('hé'), m), 'hé');
    assert.equal(deserializers.string()(null, m), null);
    assert.deepEqual(deserializers.json()(Buffer.from('{"a":1}'), m), { a: 1 });
    assert.equal(deserializers.json()(null, m), null);
    assert.throws(() => deserializers.json()(Buffer.from('{'), m));
    assert.throws(() => deserializers.json(() => false)(Buffer.from('1'), m), /validation/);
    assert.throws(
      () =>
        deserializers.json(() => {
          throw new Error('schema: a is required');
        })(Buffer.from('{}'), m),
      /a is required/,
    );
  });
});

describe('client errors, offset resets and authentication', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('ends with an AuthenticationError when the login is refused while connecting', async () => {
    // node-rdkafka's event.error carries only librdkafka's description (code -1).
    const authEvent = Object.assign(new Error('authentication failure'), {
      code: -1,
      stack: 'Error: Local: Authentication failure\n    at native',
    });
    const s = setup({
      connectError: 'Local: Broker transport failure',
      connectErrorEvents: [authEvent],
    });
    const err = await lastValueFrom(s.consumer.process(() => undefined).pipe(toArray())).catch(
      (e: unknown) => e,
    );
    assert.ok(err instanceof AuthenticationError, String(err));
    assert.equal(err.code, ErrorCode.Authentication);
    assert.equal(err.kafkaCode, E.ERR__AUTHENTICATION);
    assert.match(err.message, /fake:9092/);
  });

  /** How process() ends when the connect fails with a transport failure after this SASL log line. */
  const endAfterSaslLog = (severity: number, error: string): Promise<unknown> => {
    const broker = 'sasl_plaintext://127.0.0.1:9094/bootstrap';
    const s = setup({
      connectError: 'Local: Broker transport failure',
      connectLogs: [{ fac: 'FAIL', severity, message: `[thrd:${broker}]: ${broker}: ${error}` }],
    });
    return lastValueFrom(s.consumer.process(() => undefined).pipe(toArray())).catch(
      (e: unknown) => e,
    );
  };

  it('ends with an AuthenticationError when only librdkafka’s log said the login was refused (the connect failed with a transport failure, no error event)', async () => {
    const startedAt = Date.now();
    const err = await endAfterSaslLog(
      4,
      'SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 312ms in state AUTH_REQ)',
    );
    assert.ok(err instanceof AuthenticationError, String(err));
    assert.equal(err.kafkaCode, E.ERR__AUTHENTICATION);
    assert.match(err.message, /invalid credentials/);
    assert.ok(Date.now() - startedAt < 900, 'no wait for an error event once the log said why');
  });

  it('a connection lost during the login is no refusal: the failed connect ends with a retriable ConnectError, not an AuthenticationError', async () => {
    const err = await endAfterSaslLog(
      3,
      'SASL authentication error: SaslAuthenticateRequest failed: Local: Broker transport failure (after 2ms in state AUTH_REQ)',
    );
    assert.ok(err instanceof ConnectError, String(err));
    assert.equal(err.retriable, true);
  });

  it('a connect that fails without any refusal still ends with a ConnectError', async () => {
    const s = setup({ connectError: 'Local: Broker transport failure' });
    const err = await lastValueFrom(s.consumer.process(() => undefined).pipe(toArray())).catch(
      (e: unknown) => e,
    );
    assert.ok(err instanceof ConnectError, String(err));
  });

  it('rides out one refusal while running, and ends with an AuthenticationError when refusals last', async () => {
    const p = fakeProducerFactory();
    const h = harness({ connectTimeoutMs: 200 }, {}, { producerFactory: p.factory as never });
    const events: ConsumerEvent[] = [];
    h.consumer.events$.subscribe((e) => events.push(e));
    let error: unknown;
    subs.push(h.consumer.process(() => undefined).subscribe({ error: (e) => (error = e) }));
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().commits.get(`${T}[0]`) === 2, 'commit');
    const refuse = () =>
      h.fake().emit(
        'event.error',
        Object.assign(new Error('sasl authentication failed'), {
          code: -1,
          stack: 'Error: Broker: SASL Authentication failed',
        }),
      );
    refuse();
    await until(() => events.some((e) => e.type === 'client-error'), 'a transient refusal');
    const current = (): unknown => error;
    assert.equal(current(), undefined, 'one refusal (a token refresh, one broker) is not fatal');
    await new Promise((r) => setTimeout(r, 250)); // no progress for longer than connectTimeoutMs
    refuse();
    await until(() => current() !== undefined, 'the pipeline to error');
    const err = current();
    assert.ok(err instanceof AuthenticationError, String(err));
    assert.equal(err.kafkaCode, E.ERR_SASL_AUTHENTICATION_FAILED);
  });

  it('counts transient client errors as events and keeps running', async () => {
    const s = setup();
    const seen: number[] = [];
    subs.push(s.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => s.fake().isConnected(), 'connect');
    for (const text of [
      'Local: Broker transport failure',
      'Local: All broker connections are down',
    ]) {
      s.fake().emit(
        'event.error',
        Object.assign(new Error(text.split(': ')[1]!.toLowerCase()), {
          code: -1,
          stack: `Error: ${text}`,
        }),
      );
    }
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 3, 'still consuming');
    const errors = s.consumerEvents.filter((e) => e.type === 'client-error');
    assert.deepEqual(
      errors.map((e) => (e.type === 'client-error' ? [e.kafkaCode, e.count] : [])),
      [
        [E.ERR__TRANSPORT, 1],
        [E.ERR__ALL_BROKERS_DOWN, 2],
      ],
    );
    await s.consumer.close();
  });

  it('reports a missing subscribed topic once as topic-unavailable and keeps running', async () => {
    const s = setup();
    subs.push(s.consumer.process(() => undefined).subscribe());
    await until(() => s.fake().isConnected(), 'connect');
    for (let i = 0; i < 3; i++) {
      s.fake().consumeErrors.push({
        code: E.ERR_UNKNOWN_TOPIC_OR_PART,
        message: 'Broker: Unknown topic or partition',
      });
    }
    await until(() => s.fake().consumeErrors.length === 0, 'errors consumed');
    await until(
      () => s.consumerEvents.some((e) => e.type === 'topic-unavailable'),
      'topic-unavailable',
    );
    const unavailable = s.consumerEvents.filter((e) => e.type === 'topic-unavailable');
    assert.equal(unavailable.length, 1);
    assert.ok(unavailable[0]?.type === 'topic-unavailable');
    assert.equal(unavailable[0].topic, T); // nothing produced to it: the fake's metadata lacks it
    assert.equal(unavailable[0].reason, 'unknown');
    assert.equal(s.consumer.settings.topics.length, 1);
    await s.consumer.close();
  });

  it('reports an offset reset with the offsets jumped (cached and queried positions)', async () => {
    const s = setup();
    subs.push(s.consumer.process(() => undefined).subscribe());
    await until(() => s.fake().isConnected(), 'connect');
    await until(() => s.consumer.positions() !== undefined, 'running');
    s.fake().emit('event.log', {
      severity: 4,
      fac: 'OFFSET',
      message:
        '[thrd:main]: orders [0]: offset reset (at offset 5 (leader epoch -1), broker 1) to cached BEGINNING offset offset 120 (leader epoch -1): fetch failed due to requested offset not available on the broker: Broker: Offset out of range',
    });
    s.fake().produce(T, 1, 40);
    s.fake().emit('event.log', {
      severity: 4,
      fac: 'OFFSET',
      message:
        'orders [1]: offset reset (at offset 90 (leader epoch 0), broker 1) to offset END (leader epoch -1): fetch failed due to requested offset not available on the broker: Broker: Offset out of range',
    });
    await until(
      () => s.consumerEvents.filter((e) => e.type === 'offset-reset').length === 2,
      'two reset events',
    );
    const resets = s.consumerEvents.filter((e) => e.type === 'offset-reset');
    assert.deepEqual(
      resets.map((e) => (e.type === 'offset-reset' ? [e.partition, e.from, e.to, e.resetTo] : [])),
      [
        [0, 5, 120, 'earliest'],
        [1, 90, 40, 'latest'],
      ],
    );
    await s.consumer.close();
  });
});
