import assert from 'node:assert/strict';
import {
  EMPTY,
  NEVER,
  Subject,
  concatMap,
  firstValueFrom,
  lastValueFrom,
  map,
  mergeMap,
  of,
  take,
  timer,
  toArray,
} from 'rxjs';
import type { Subscription } from 'rxjs';
import { AlreadySubscribedError, ClosedError, ErrorCode, HandlerError } from '../lib';
import type { KafkaMessage, PartitionStream, Processed } from '../lib';
import { T, harness, tp, until } from './helpers/harness';

const deferred = () => {
  let resolve!: (v?: unknown) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<unknown>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
};

describe('ReactiveConsumer', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('processes every message of every partition and completes after close()', async () => {
    const h = harness();
    const seen: string[] = [];
    const done = lastValueFrom(
      h.consumer
        .process((m) => {
          seen.push(`${m.partition}@${m.offset}`);
        })
        .pipe(toArray()),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 50);
    h.fake().produce(T, 1, 30);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => seen.length === 80, '80 messages');
    await until(
      () => h.fake().commits.get(`${T}[0]`) === 50 && h.fake().commits.get(`${T}[1]`) === 30,
      'periodic commits',
    );
    await h.consumer.close();
    const processed = await done;
    assert.equal(processed.length, 80);
    assert.equal(new Set(seen).size, 80);
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned', 'revoking', 'drained', 'committed', 'revoked'],
    );
    const ops = h.fake().ops();
    assert.ok(ops.indexOf('unsubscribe') < ops.lastIndexOf('unassign'));
    assert.ok(ops.lastIndexOf('unassign') < ops.indexOf('disconnect'));
  });

  it('hands the handler the message fields, ordered headers and one signal per assignment', async () => {
    const h = harness();
    const got: KafkaMessage[] = [];
    subs.push(h.consumer.process((m) => void got.push(m)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => got.length === 2, 'two messages');
    const [a, b] = got as [KafkaMessage, KafkaMessage];
    assert.equal(a.topic, T);
    assert.equal(a.offset, 0);
    assert.equal(a.key?.toString(), 'k0');
    assert.equal(a.value?.length, 5);
    assert.deepEqual(
      a.headers.map(([k, v]) => [k, v.toString()]),
      [
        ['h', '1'],
        ['h', '2'],
      ],
    );
    assert.equal(a.signal, b.signal);
    assert.equal(a.signal.aborted, false);
    await h.consumer.close();
  });

  it('holds up the unassign until in-flight handlers finished and their offsets are committed', async () => {
    const h = harness({}, { commitLatencyPolls: 3 });
    const gates = new Map<number, ReturnType<typeof deferred>>();
    const started: number[] = [];
    subs.push(
      h.consumer
        .process(
          (m) => {
            started.push(m.offset);
            const d = deferred();
            gates.set(m.offset, d);
            return d.promise;
          },
          { partitionConcurrency: 4 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => started.length === 4, 'four handlers in flight');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    // Buffered messages 4..9 are dropped, never started.
    gates.get(1)!.resolve();
    gates.get(0)!.resolve();
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(!h.events.some((e) => e.type === 'drained'), 'not drained while handlers run');
    assert.ok(!h.fake().ops().includes('unassign'));
    gates.get(3)!.resolve();
    gates.get(2)!.resolve();
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.deepEqual(started, [0, 1, 2, 3]);
    const types = h.events.map((e) => e.type);
    assert.deepEqual(types, ['assigned', 'revoking', 'drained', 'committed', 'revoked']);
    const drained = h.events.find((e) => e.type === 'drained');
    assert.ok(drained?.type === 'drained' && drained.inFlight === 4 && !drained.timedOut);
    const committed = h.events.find((e) => e.type === 'committed');
    assert.ok(committed?.type === 'committed');
    assert.deepEqual(committed.results, [
      { topic: T, partition: 0, status: 'committed', offset: 4 },
    ]);
    const ops = h.fake().ops();
    const commitAt = ops.lastIndexOf(`commit(${T}[0]@4)`);
    assert.ok(commitAt >= 0, ops.join(' '));
    assert.ok(commitAt < ops.indexOf('unassign'), 'commit before unassign');
    assert.equal(h.fake().commits.get(`${T}[0]`), 4, 'confirmed before unassign');
    await h.consumer.close();
  });

  it('keeps the committed offset below unfinished work when handlers finish out of order', async () => {
    const h = harness();
    const gates = new Map<number, ReturnType<typeof deferred>>();
    subs.push(
      h.consumer
        .process(
          (m) => {
            const d = deferred();
            gates.set(m.offset, d);
            return d.promise;
          },
          { partitionConcurrency: 3 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => gates.size === 3, 'three in flight');
    gates.get(2)!.resolve();
    gates.get(1)!.resolve();
    await new Promise((r) => setTimeout(r, 60));
    assert.ok((h.fake().commits.get(`${T}[0]`) ?? 0) === 0, 'never past offset 0 while it runs');
    assert.ok(
      !h
        .fake()
        .ops()
        .some((o) => /@[1-9]/.test(o)),
      h.fake().ops().join(' '),
    );
    gates.get(0)!.resolve();
    await until(() => h.fake().commits.get(`${T}[0]`) === 3, 'commit of 3');
    await h.consumer.close();
  });

  it('processes a partition strictly in offset order with partitionConcurrency 1', async () => {
    const h = harness();
    const order: number[] = [];
    let running = 0;
    let maxRunning = 0;
    subs.push(
      h.consumer
        .process(async (m) => {
          running += 1;
          maxRunning = Math.max(maxRunning, running);
          await new Promise((r) => setTimeout(r, m.offset % 3));
          order.push(m.offset);
          running -= 1;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 40);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => order.length === 40, 'all');
    assert.deepEqual(order, [...Array(40).keys()]);
    assert.equal(maxRunning, 1);
    await h.consumer.close();
  });

  it('shares a fair pool: with fewer slots than partitions every partition progresses', async () => {
    const h = harness();
    const perPartition = new Map<number, number>();
    let running = 0;
    let maxRunning = 0;
    subs.push(
      h.consumer
        .process(
          async (m) => {
            running += 1;
            maxRunning = Math.max(maxRunning, running);
            await new Promise((r) => setTimeout(r, 1));
            perPartition.set(m.partition, (perPartition.get(m.partition) ?? 0) + 1);
            running -= 1;
          },
          { concurrency: 2, partitionConcurrency: 2 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    for (let p = 0; p < 6; p++) h.fake().produce(T, p, 200);
    h.fake().rebalanceAssign([0, 1, 2, 3, 4, 5].map(tp));
    await until(() => [...perPartition.values()].reduce((a, b) => a + b, 0) >= 60, '60 processed');
    assert.equal(
      perPartition.size,
      6,
      `every partition progressed: ${[...perPartition.entries()].join(' ')}`,
    );
    for (const n of perPartition.values())
      assert.ok(n >= 5, `balanced: ${[...perPartition.values()]}`);
    assert.ok(maxRunning <= 2);
    await h.consumer.close();
  });

  it('waits for a bare thenable (its then() returning nothing) before counting the message processed', async () => {
    const h = harness({ commitIntervalMs: 1 });
    let resolveFirst: ((v: unknown) => void) | undefined;
    subs.push(
      h.consumer
        .process(
          (m: KafkaMessage) =>
            m.offset === 0
              ? ({
                  then(onOk: (v: unknown) => void) {
                    resolveFirst = onOk;
                  },
                } as unknown as Promise<unknown>)
              : 'x',
          { partitionConcurrency: 2 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => resolveFirst !== undefined, 'the thenable handed over');
    await until(() => h.consumer.metrics().messages.processed >= 1, 'offset 1 processed');
    // Let the periodic committer run (every 1 ms here) while the loop keeps polling.
    const at = Date.now();
    await until(() => h.consumer.metrics().lastPollAt > at + 50, 'the loop to poll 50 ms more');
    assert.equal(h.consumer.metrics().messages.processed, 1, 'offset 0 still running');
    assert.equal(h.fake().commits.get(`${T}[0]`) ?? 0, 0, 'nothing committed past unfinished 0');
    resolveFirst!('done');
    await until(() => h.fake().commits.get(`${T}[0]`) === 2, 'committed once 0 settled');
    await h.consumer.close();
  });

  it('completes the pipeline after close() even when a handler ignores its signal and never settles', async () => {
    const h = harness({ drainTimeoutMs: 300, config: { 'max.poll.interval.ms': 1000 } as never });
    let ended: 'complete' | 'error' | undefined;
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => (m.offset === 1 ? NEVER : undefined))
        .subscribe({ complete: () => (ended = 'complete'), error: () => (ended = 'error') }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().commits.get(`${T}[0]`) === 1, 'offset 0 committed');
    await h.consumer.close();
    await until(() => ended !== undefined, 'the pipeline to end');
    assert.equal(ended, 'complete');
    assert.equal(h.fake().commits.get(`${T}[0]`), 1, 'nothing past the hung handler');
  });

  it('accepts Promise, Observable and plain-value handlers', async () => {
    for (const kind of ['promise', 'observable', 'value'] as const) {
      const h = harness();
      const out = lastValueFrom(
        h.consumer
          .process((m) =>
            kind === 'promise'
              ? Promise.resolve(m.offset * 2)
              : kind === 'observable'
                ? timer(1).pipe(map(() => m.offset * 2))
                : m.offset * 2,
          )
          .pipe(take(5), toArray()),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 5);
      h.fake().rebalanceAssign([tp(0)]);
      const results = (await out).map((p: Processed<number>) => p.result);
      assert.deepEqual(results, [0, 2, 4, 6, 8], kind);
      await h.consumer.close();
    }
  });

  it('treats an Observable handler that errors, a rejection and a throw as failures', async () => {
    for (const kind of ['throw', 'reject', 'observable'] as const) {
      const h = harness();
      const handled: number[] = [];
      const result = lastValueFrom(
        h.consumer.process((m) => {
          if (m.offset === 3) {
            if (kind === 'throw') throw new Error('bad');
            if (kind === 'reject') return Promise.reject(new Error('bad'));
            return timer(1).pipe(
              map(() => {
                throw new Error('bad');
              }),
            );
          }
          handled.push(m.offset);
          return of(m.offset);
        }),
      ).then(
        () => undefined,
        (e: unknown) => e,
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 10);
      h.fake().rebalanceAssign([tp(0)]);
      const err = await result;
      assert.ok(err instanceof HandlerError, `${kind}: ${String(err)}`);
      assert.equal(err.code, ErrorCode.Handler);
      assert.deepEqual(err.coordinates, { topic: T, partition: 0, offset: 3 });
      assert.equal((err.cause as Error).message, 'bad');
      assert.deepEqual(handled, [0, 1, 2]);
      // Everything before the failing message is committed; nothing after it.
      assert.equal(h.fake().commits.get(`${T}[0]`), 3, kind);
      assert.ok(h.fake().ops().includes('disconnect'));
    }
  });

  it('rejects a second pipeline with a typed error', async () => {
    const h = harness();
    subs.push(h.consumer.process(() => undefined).subscribe());
    const err = await firstValueFrom(h.consumer.partitions$).catch((e: unknown) => e);
    assert.ok(err instanceof AlreadySubscribedError);
    await h.consumer.close();
  });

  it('closes safely before connecting, before any assignment, and idempotently', async () => {
    const idle = harness();
    await idle.consumer.close();
    await idle.consumer.close();
    const err = await firstValueFrom(idle.consumer.process(() => undefined)).catch(
      (e: unknown) => e,
    );
    assert.ok(err instanceof ClosedError);

    const early = harness();
    const done = lastValueFrom(early.consumer.process(() => undefined).pipe(toArray()));
    const closing = early.consumer.close(); // while connecting
    await Promise.all([closing, early.consumer.close()]);
    assert.deepEqual(await done, []);

    const unassigned = harness();
    const done2 = lastValueFrom(unassigned.consumer.process(() => undefined).pipe(toArray()));
    await until(() => unassigned.fake().isConnected(), 'connect');
    await unassigned.consumer.close();
    assert.deepEqual(await done2, []);
    assert.ok(unassigned.fake().ops().includes('disconnect'));
  });

  it('unsubscribing from process() closes the consumer', async () => {
    const h = harness();
    const sub = h.consumer.process(() => undefined).subscribe();
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().commits.get(`${T}[0]`) === 5, 'commit');
    sub.unsubscribe();
    await until(() => h.fake().ops().includes('disconnect'), 'disconnect');
  });

  it('drops late messages of partitions not currently assigned', async () => {
    const h = harness();
    const seen: string[] = [];
    subs.push(h.consumer.process((m) => void seen.push(`${m.partition}@${m.offset}`)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 2, 'two');
    h.fake().injectLate.push({ topic: T, partition: 7, offset: 100, value: null, size: 0 });
    await until(() => h.fake().consumeCalls > 5, 'a few polls');
    await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(seen, ['0@0', '0@1']);
    await h.consumer.close();
  });

  it('pauses a partition whose buffer is full and resumes it below the low-water mark', async () => {
    const h = harness({ maxBufferedMessages: 10, resumeThreshold: 0.5, consumeBatchSize: 5 });
    const gate = new Subject<void>();
    let started = 0;
    let open = false;
    subs.push(
      h.consumer
        .process(
          () => {
            started += 1;
            return open ? undefined : firstValueFrom(gate);
          },
          { partitionConcurrency: 1 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2000);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().isPaused(T, 0), 'paused');
    await new Promise((r) => setTimeout(r, 20));
    // Bounded by the buffer limit plus at most two consume batches: the one that filled it, and
    // the next one, fetched while it was dispatched (the loop's next call is made first).
    assert.ok(h.fake().remaining(T, 0) >= 2000 - 10 - 2 * 5, 'stopped fetching');
    const delivered = 2000 - h.fake().remaining(T, 0);
    const pollsWhilePaused = h.fake().consumeCalls;
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(h.fake().consumeCalls > pollsWhilePaused, 'keeps polling while paused');
    // Finish handlers one at a time: the partition resumes once at most 5 are unfinished.
    while (h.fake().isPaused(T, 0)) {
      assert.ok(delivered - started >= 5, 'not resumed above the low-water mark');
      gate.next();
      await new Promise((r) => setTimeout(r, 2));
    }
    assert.ok(
      delivered - started <= 6,
      `resumed near the low-water mark (${delivered - started} left)`,
    );
    open = true;
    gate.next();
    await h.consumer.close();
  });
});

describe('partitions$ (custom per-partition pipelines)', () => {
  it('drains, commits and unassigns a user pipeline that acknowledges messages', async () => {
    const h = harness();
    const done: number[] = [];
    const gates: (() => void)[] = [];
    const sub = h.consumer.partitions$
      .pipe(
        mergeMap((partition) =>
          partition.messages$.pipe(
            // Messages concatMap buffered are not started once the partition is revoked.
            concatMap((m) =>
              !partition.active
                ? EMPTY
                : new Promise<KafkaMessage>((resolve) =>
                    gates.push(() => {
                      done.push(m.offset);
                      resolve(m);
                    }),
                  ),
            ),
            partition.acknowledge(),
          ),
        ),
      )
      .subscribe();
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => gates.length === 1, 'first message in the pipeline');
    gates[0]!();
    await until(() => gates.length === 2, 'second message');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(!h.fake().ops().includes('unassign'), 'waits for the pipeline');
    gates[1]!();
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    // concatMap had messages 2..4 buffered: they are not processed (the stream completed) and
    // the commit stops after the last acknowledged one.
    const committed = h.events.find((e) => e.type === 'committed');
    assert.ok(committed?.type === 'committed');
    assert.equal(committed.results[0]?.status, 'committed');
    assert.equal(h.fake().commits.get(`${T}[0]`), 2);
    sub.unsubscribe();
    await until(() => h.fake().ops().includes('disconnect'), 'unsubscribing closes');
  });

  it('emits one stream per partition per assignment, each with its own signal', async () => {
    const h = harness();
    const streams: PartitionStream[] = [];
    const sub = h.consumer.partitions$
      .pipe(
        mergeMap((p) => {
          streams.push(p);
          return p.messages$.pipe(p.acknowledge());
        }),
      )
      .subscribe();
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => streams.length === 2, 'two streams');
    h.fake().rebalanceRevoke([tp(0), tp(1)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => streams.length === 3, 'a new stream for the new assignment');
    assert.notEqual(streams[2]!.signal, streams[0]!.signal);
    assert.ok(streams[2]!.generation > streams[0]!.generation);
    assert.equal(streams[0]!.active, false);
    assert.equal(streams[2]!.active, true);
    sub.unsubscribe();
    await h.consumer.close();
  });
});
