/**
 * Adversarial review: paths the suite does not schedule, driven through the public API only, with
 * the deterministic fake as the world. Each test was written to break a guarantee; the ones that did
 * were fixed (close from a `revoking` subscriber, a later shorter close(), a revoke of other
 * partitions while an onAssign hook chose a start).
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import type { Subscription } from 'rxjs';
import { NotAssignedError } from '../lib';
import type { KafkaMessage, ReactiveConsumerOptions } from '../lib';
import { fakeProducerFactory } from './fakes/fake-producer';
import { T, committed, gate, harness, tp, until } from './helpers/harness';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const commitOps = (h: ReturnType<typeof harness>) =>
  h
    .fake()
    .ops()
    .filter((o) => o.startsWith('commit('));

describe('adversarial: graceful paths nobody scheduled', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  for (const protocol of ['EAGER', 'COOPERATIVE'] as const) {
    it(`close() called from a rebalances$ subscriber on 'revoking' leaves the group only after that revoke's final commit (${protocol})`, async () => {
      const h = harness({ drainTimeoutMs: 3000 }, { protocol });
      const slow = gate();
      const done = new Map<number, number>();
      subs.push(
        h.consumer
          .process(async (m: KafkaMessage) => {
            if (m.partition === 0 && m.offset === 2) await slow.promise;
            const k = m.partition * 1000 + m.offset;
            done.set(k, (done.get(k) ?? 0) + 1);
          })
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 5);
      h.fake().produce(T, 1, 5);
      h.fake().rebalanceAssign([tp(0), tp(1)]);
      await until(() => committed(h, 0) === 2 && committed(h, 1) === 5, 'first commits');
      let closed: Promise<void> | undefined;
      h.consumer.rebalances$.subscribe((e) => {
        if (e.type === 'revoking' && closed === undefined) closed = h.consumer.close();
      });
      h.fake().rebalanceRevoke(protocol === 'EAGER' ? [tp(0), tp(1)] : [tp(0)]);
      await sleep(50);
      slow.open();
      await closed;
      const ops = h.fake().ops();
      const finalCommit = ops.findIndex((o) => o === `commit(${T}[0]@3)`);
      const unsub = ops.indexOf('unsubscribe');
      assert.ok(finalCommit >= 0, `final commit of partition 0: ${ops.join(' ')}`);
      assert.ok(
        unsub === -1 || unsub > finalCommit,
        `unsubscribe (leave) only after the in-flight revoke's final commit: ${ops.join(' ')}`,
      );
      assert.equal(committed(h, 0), 3);
      assert.ok(
        [...done.values()].every((n) => n === 1),
        'nothing ran twice',
      );
    });
  }

  it('close({ timeoutMs }) after an unsubscribe-triggered close still finishes within the shorter deadline (the final commit lands before it)', async () => {
    const h = harness({ drainTimeoutMs: 8000, commitIntervalMs: 60_000 });
    const hung = gate();
    let hanging = false;
    const done: number[] = [];
    const sub = h.consumer
      .process(
        (m: KafkaMessage) => {
          if (m.offset !== 2) return void done.push(m.offset);
          hanging = true;
          return hung.promise;
        },
        { partitionConcurrency: 2 },
      )
      .subscribe();
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => hanging && done.length === 2, 'offsets 0 and 1 done, 2 hanging');
    sub.unsubscribe(); // closes with the default closeTimeoutMs (25 s)
    const started = Date.now();
    // SIGTERM arrives: the platform gives 1.5 s.
    await h.consumer.close({ timeoutMs: 1500 });
    const took = Date.now() - started;
    hung.open();
    assert.ok(took < 2500, `close({ timeoutMs: 1500 }) took ${took} ms`);
    assert.equal(committed(h), 2);
  });

  it('a cooperative revoke of another partition while an onAssign hook is still choosing the start does not start the new partition elsewhere than the hook chose', async () => {
    const hook = gate();
    const h = harness(
      {
        onAssign: async ({ partition }) => {
          if (partition === 1) await hook.promise;
          return partition === 1 ? { offset: 3 } : 'committed';
        },
      },
      { protocol: 'COOPERATIVE' },
    );
    const seen: string[] = [];
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => void seen.push(`${m.partition}@${m.offset}`))
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2);
    h.fake().produce(T, 1, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h, 0) === 2, 'partition 0 consumed');
    // Partition 1 is added; its hook is slow. Meanwhile the broker revokes partition 0.
    h.fake().rebalanceAssign([tp(1)]);
    await sleep(10);
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'partition 0 revoked');
    hook.open();
    await sleep(100);
    const p1 = seen.filter((s) => s.startsWith('1@'));
    assert.deepEqual(p1, ['1@3', '1@4'], `the hook asked to start partition 1 at 3: ${p1}`);
    await h.consumer.close();
  });

  it('a second cooperative revoke while the first drains is released on its own, without waiting for the first', async () => {
    const h = harness({ drainTimeoutMs: 4000 }, { protocol: 'COOPERATIVE' });
    const slow = gate();
    subs.push(
      h.consumer
        .process((m: KafkaMessage) =>
          m.partition === 0 && m.offset === 2 ? slow.promise : undefined,
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().produce(T, 1, 5);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => committed(h, 0) === 2 && committed(h, 1) === 5, 'first commits');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking 0');
    h.fake().produce(T, 1, 3);
    h.fake().rebalanceRevoke([tp(1)]);
    await until(
      () => h.fake().ops().includes(`incrementalUnassign(${T}[1])`),
      'partition 1 released while 0 still drains',
      2000,
    );
    assert.ok(
      !h
        .fake()
        .ops()
        .some((o) => o === `incrementalUnassign(${T}[0])`),
    );
    slow.open();
    await until(
      () => h.events.filter((e) => e.type === 'revoked').length === 2,
      'both revoked',
      3000,
    );
    assert.equal(committed(h, 0), 3);
    await h.consumer.close();
  });

  it('unsubscribing from process() during a cooperative revoke drain commits that revoke before leaving, and the rest after', async () => {
    const h = harness({ drainTimeoutMs: 4000 }, { protocol: 'COOPERATIVE' });
    const slow = gate();
    const runs = new Map<string, number>();
    const sub = h.consumer
      .process(async (m: KafkaMessage) => {
        if (m.partition === 0 && m.offset === 2) await slow.promise;
        const k = `${m.partition}@${m.offset}`;
        runs.set(k, (runs.get(k) ?? 0) + 1);
      })
      .subscribe();
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().produce(T, 1, 5);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => committed(h, 1) === 5 && committed(h, 0) === 2, 'first commits');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    let rebalancesDone = false;
    h.consumer.rebalances$.subscribe({ complete: () => (rebalancesDone = true) });
    sub.unsubscribe();
    await sleep(30);
    assert.ok(!h.fake().ops().includes('unsubscribe'), 'no leave while the revoke drains');
    slow.open();
    await until(() => rebalancesDone, 'closed', 5000);
    const ops = h.fake().ops();
    assert.ok(ops.indexOf('unsubscribe') > ops.indexOf(`commit(${T}[0]@3)`), ops.join(' '));
    assert.equal(committed(h, 0), 3);
    assert.equal(committed(h, 1), 5);
    assert.ok([...runs.values()].every((n) => n === 1));
  });

  it('a seek called from inside a handler while its partition is revoked is refused and replays nothing', async () => {
    const h = harness({}, { protocol: 'COOPERATIVE' });
    const slow = gate();
    let seekResult: unknown;
    const runs = new Map<number, number>();
    subs.push(
      h.consumer
        .process(async (m: KafkaMessage) => {
          runs.set(m.offset, (runs.get(m.offset) ?? 0) + 1);
          if (m.offset === 2 && runs.get(2) === 1) {
            await slow.promise;
            seekResult = await h.consumer.seek(tp(0), { offset: 0 }).catch((e: unknown) => e);
          }
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 2, 'below 2 committed');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    slow.open();
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.ok(seekResult instanceof NotAssignedError, String(seekResult));
    assert.equal(committed(h), 3);
    assert.ok(
      !h
        .fake()
        .ops()
        .some((o) => o.startsWith('seek(')),
    );
    assert.ok([...runs.values()].every((n) => n === 1));
    await h.consumer.close();
  });

  it('pause() during a revoke keeps the partition paused when it is assigned back, and resume() restarts it', async () => {
    const h = harness({}, { protocol: 'COOPERATIVE' });
    const slow = gate();
    const seen: number[] = [];
    subs.push(
      h.consumer
        .process(async (m: KafkaMessage) => {
          if (m.offset === 2 && !seen.includes(2)) await slow.promise;
          seen.push(m.offset);
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 2, 'below 2');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
    h.consumer.pause([tp(0)]);
    slow.open();
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.equal(committed(h), 3);
    h.fake().rebalanceAssign([tp(0)]);
    await sleep(60);
    assert.ok(h.fake().isPaused(T, 0), 'still paused by the application');
    assert.deepEqual(seen, [0, 1, 2]);
    h.consumer.resume([tp(0)]);
    await until(() => committed(h) === 5, 'resumed and committed');
    assert.deepEqual(seen, [0, 1, 2, 3, 4]);
    await h.consumer.close();
  });

  for (const onFailure of ['skip', 'dead-letter'] as const) {
    it(`a message in retry backoff at a revoke that exhausts its retries during the drain is ${onFailure === 'skip' ? 'skipped' : 'dead-lettered'} and the offsets above it committed`, async () => {
      const p = fakeProducerFactory();
      const h = harness(
        { drainTimeoutMs: 3000 },
        { protocol: 'COOPERATIVE' },
        { producerFactory: p.factory as never },
      );
      let attempts = 0;
      const done: number[] = [];
      subs.push(
        h.consumer
          .process(
            (m: KafkaMessage) => {
              if (m.offset === 1) {
                attempts += 1;
                throw new Error('permanent');
              }
              done.push(m.offset);
            },
            {
              partitionConcurrency: 2,
              retry: { count: 2, initialDelayMs: 100, jitter: 0 },
              onFailure,
              ...(onFailure === 'dead-letter' ? { deadLetter: { topic: 'dlq' } } : {}),
            },
          )
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 4);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => attempts === 1 && done.includes(2), 'offset 1 in backoff');
      h.fake().rebalanceRevoke([tp(0)]);
      await until(
        () => h.events.some((e) => e.type === 'revoked' || e.type === 'lost'),
        'revoked',
        4000,
      );
      assert.equal(attempts, 3, 'every retry ran');
      assert.equal(committed(h), 4, 'the failed message was handled by its policy and committed');
      if (onFailure === 'dead-letter') {
        assert.equal(p.producer().records.filter((r) => r.topic === 'dlq').length, 1);
      }
      await h.consumer.close();
    });
  }

  it('a lost revoke while a retry waits in backoff stops retrying and commits nothing', async () => {
    const h = harness({ drainTimeoutMs: 3000 }, { protocol: 'COOPERATIVE' });
    let attempts = 0;
    subs.push(
      h.consumer
        .process(
          (m: KafkaMessage) => {
            if (m.offset === 1) {
              attempts += 1;
              throw new Error('transient');
            }
          },
          { partitionConcurrency: 2, retry: { count: 5, initialDelayMs: 150, jitter: 0 } },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => attempts === 1 && committed(h) === 1, 'offset 1 in backoff');
    const before = commitOps(h).length;
    h.fake().rebalanceRevoke([tp(0)], { lost: true });
    await until(() => h.events.some((e) => e.type === 'lost'), 'lost', 2000);
    const at = attempts;
    await sleep(400);
    assert.equal(attempts, at, 'no retry after the loss');
    assert.equal(commitOps(h).length, before, 'nothing committed');
    assert.equal(committed(h), 1);
    await h.consumer.close();
  });

  it('processBatch: a partial batch still waiting for maxWaitMs at a revoke is either run and committed or left whole to the next owner (each offset runs once)', async () => {
    const h = harness({ drainTimeoutMs: 3000 }, { protocol: 'COOPERATIVE' });
    const batches: number[][] = [];
    subs.push(
      h.consumer
        .processBatch((b) => void batches.push(b.messages.map((m) => m.offset)), {
          maxSize: 10,
          maxWaitMs: 2000,
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().remaining(T, 0) === 0, 'fetched');
    await sleep(20);
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked', 4000);
    // Either the partial batch ran (once) and is committed, or it did not run and is not.
    const ran = batches.flat();
    assert.equal(new Set(ran).size, ran.length, 'no offset ran twice');
    assert.equal(
      committed(h) ?? 0,
      ran.length === 0 ? 0 : Math.max(...ran) + 1,
      JSON.stringify(batches),
    );
    // The next owner (assigned back) resumes from the committed offset: every offset runs exactly once.
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => batches.flat().length >= 4, 'the rest processed', 5000);
    assert.deepEqual(batches.flat().sort(), [0, 1, 2, 3]);
    await h.consumer.close();
  });

  for (const ordering of ['key', 'none'] as const) {
    it(`ordering '${ordering}' with partitionConcurrency 4: a drain deadline with the lowest offset hung commits nothing past it; the next owner redoes only the unfinished`, async () => {
      const h = harness({ drainTimeoutMs: 400 }, { protocol: 'COOPERATIVE' });
      const hung = gate();
      const runs = new Map<number, number>();
      subs.push(
        h.consumer
          .process(
            async (m: KafkaMessage) => {
              if (m.offset === 1 && m.generation === 1) await hung.promise;
              runs.set(m.offset, (runs.get(m.offset) ?? 0) + 1);
            },
            { partitionConcurrency: 4, ordering },
          )
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 6);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(h) === 1, 'offset 0 committed, 1 hung');
      h.fake().rebalanceRevoke([tp(0)]);
      await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked', 3000);
      assert.equal(committed(h), 1, 'nothing committed past the hung offset 1');
      hung.open();
      await sleep(30);
      assert.equal(committed(h), 1, 'no commit after the final commit');
      await h.consumer.close();
    });
  }

  it('backpressure-paused partition at an eager revoke is fetched again when assigned back', async () => {
    const h = harness({ maxBufferedMessages: 2, consumeBatchSize: 1 });
    const hold = gate();
    let running = 0;
    subs.push(
      h.consumer
        .process(async (m: KafkaMessage) => {
          running += 1;
          if (m.generation === 1) await hold.promise;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().isPaused(T, 0), 'paused by backpressure');
    h.fake().rebalanceRevoke([tp(0)]);
    await sleep(20);
    hold.open();
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    const c = committed(h) ?? 0;
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 10, `the reassigned partition runs (from ${c})`, 3000);
    assert.ok(running >= 10);
    await h.consumer.close();
  });
  it('close() from inside a handler (not awaited) is graceful: the calling handler finishes and counts', async () => {
    const h = harness({}, { protocol: 'COOPERATIVE' });
    const runs = new Map<number, number>();
    let closing: Promise<void> | undefined;
    subs.push(
      h.consumer
        .process(
          async (m: KafkaMessage) => {
            if (m.offset === 2) {
              closing ??= h.consumer.close();
              await sleep(30);
            }
            runs.set(m.offset, (runs.get(m.offset) ?? 0) + 1);
          },
          { partitionConcurrency: 3, ordering: 'none' },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => closing !== undefined, 'close called from the handler');
    await closing;
    assert.deepEqual([...runs.keys()].sort(), [0, 1, 2]);
    assert.ok([...runs.values()].every((n) => n === 1));
    assert.equal(committed(h), 3);
  });

  // librdkafka cannot cancel a commit, and a broker applies a deferred one with the member's
  // current epoch: a final commit answered only after the release can move the group offset back
  // below a new owner's. So the revoke holds the partition until librdkafka answers (up to shortly
  // before max.poll.interval.ms): applied late, it is the confirmation; the release comes after.
  /**
   * A cooperative member that processed 5 records of partition 0, whose final commit (offset 5)
   * librdkafka answers only after `polls` consume calls (the commit times out here after 100 ms):
   * revoked, with a drain deadline of 600 ms. Returns when the revoke was fired.
   */
  async function revokeWithFinalCommitHeld(
    polls: number,
    options: Partial<ReactiveConsumerOptions> = {},
  ) {
    const a = harness(
      { drainTimeoutMs: 600, commitTimeoutMs: 100, commitIntervalMs: 60_000, ...options },
      {
        protocol: 'COOPERATIVE',
        commitPolls: (offsets) => (offsets.some((o) => o.offset === 5) ? polls : undefined),
      },
    );
    let processed = 0;
    subs.push(a.consumer.process(() => void (processed += 1)).subscribe());
    await until(() => a.fake().isConnected(), 'A connects');
    a.fake().produce(T, 0, 5);
    a.fake().rebalanceAssign([tp(0)]);
    await until(() => processed === 5, 'A processed everything');
    const revokedAt = Date.now();
    a.fake().rebalanceRevoke([tp(0)]);
    return { a, revokedAt };
  }

  it('a final commit that timed out past the drain deadline holds the partition until it lands, then counts as committed', async () => {
    const { a, revokedAt } = await revokeWithFinalCommitHeld(300);
    let appliedBeforeRelease: boolean | undefined;
    await until(
      () => {
        const released = a.events.some((e) => e.type === 'revoked' || e.type === 'lost');
        if (released) appliedBeforeRelease ??= committed(a) === 5;
        return released;
      },
      'A released',
      10_000,
    );
    assert.equal(appliedBeforeRelease, true, 'released before the broker applied the commit');
    assert.ok(Date.now() - revokedAt >= 600, 'it was answered past the drain deadline');
    const final = a.events.find((e) => e.type === 'committed');
    assert.ok(
      final?.type === 'committed' && final.results[0]?.status === 'committed',
      `the commit applied late is the confirmation: ${JSON.stringify(final)}`,
    );
    await a.consumer.close();
  });

  it('a final commit still held at the rebalance deadline is reported as not committed, and its late landing is logged', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const { a, revokedAt } = await revokeWithFinalCommitHeld(1500, {
      logger,
      config: { 'max.poll.interval.ms': 1500 },
    });
    await until(
      () => a.events.some((e) => e.type === 'revoked' || e.type === 'lost'),
      'A released',
      5000,
    );
    // Held past the drain deadline, released before max.poll.interval.ms.
    assert.ok(Date.now() - revokedAt >= 1000 && Date.now() - revokedAt < 1500 + 500);
    const final = a.events.find((e) => e.type === 'committed');
    assert.ok(
      final?.type === 'committed' && final.results[0]?.status === 'failed',
      `the unanswered final commit is not reported as committed: ${JSON.stringify(final)}`,
    );
    assert.equal(committed(a), undefined, 'not applied yet when A released');
    assert.ok(
      lines.some((l) =>
        l.includes('librdkafka still holds the final commit at the rebalance deadline'),
      ),
    );
    await until(() => committed(a) === 5, 'the late answer applied', 15_000);
    await until(
      () => lines.some((l) => l.includes('a commit that had timed out was applied late')),
      'the late landing is logged',
    );
    await a.consumer.close();
  });
});
