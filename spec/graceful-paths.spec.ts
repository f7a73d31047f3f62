/**
 * Regression tests for the paths on which "a graceful rebalance or shutdown loses nothing and
 * repeats nothing" broke: a stop while a revoke drains, a stop by unsubscribing, a retry in backoff
 * at the revoke, thousands of waiters cancelled at once, a slow completed-offset write, a seek
 * racing a rebalance. Each was a failing test before its fix.
 */
import assert from 'node:assert/strict';
import { Subject, filter, firstValueFrom, takeUntil, tap } from 'rxjs';
import type { Subscription } from 'rxjs';
import { ConfigError, NotAssignedError, StartPositionError } from '../lib';
import type { KafkaMessage, PartitionStream } from '../lib';
import type { CompletedStore } from '../lib/internal/commit/completed-store';
import { T, committed, gate, harness, tp, until } from './helpers/harness';
import type { Assignments } from '../lib/internal/rebalance/assignments';

describe('graceful on every path', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  for (const protocol of ['EAGER', 'COOPERATIVE'] as const) {
    it(`close() with a timeout beyond Node's largest timer (2^31 ms) still drains and commits (${protocol})`, async () => {
      // setTimeout turns a longer delay into 1 ms: the close took its deadline as passed at once.
      const h = harness(
        { drainTimeoutMs: 3000, commitIntervalMs: 60_000 },
        { protocol, member: true },
      );
      const slow = gate();
      let started = false;
      subs.push(
        h.consumer
          .process((m: KafkaMessage) => {
            if (m.offset !== 2) return undefined;
            started = true;
            return slow.promise;
          })
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 4);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => started, 'offset 2 running');
      const closed = h.consumer.close({ timeoutMs: Number.MAX_SAFE_INTEGER });
      let done = false;
      void closed.then(() => (done = true));
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(done, false, 'close() waits for the handler in flight');
      slow.open();
      await closed;
      assert.equal(committed(h, 0), 3, 'offsets 0..2 committed');
      assert.deepEqual(
        h.events.filter((e) => e.type === 'revoked' || e.type === 'lost').map((e) => e.type),
        ['revoked'],
      );
    });

    it(`close() during an in-flight revoke leaves the group only after that revoke committed and unassigned (${protocol})`, async () => {
      const h = harness({}, { protocol });
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
      // The broker revokes partition 0 (cooperative) or everything (eager) while offset 2 runs.
      h.fake().rebalanceRevoke(protocol === 'EAGER' ? [tp(0), tp(1)] : [tp(0)]);
      await until(() => h.events.some((e) => e.type === 'revoking'), 'revoking');
      const closed = h.consumer.close();
      await new Promise((r) => setTimeout(r, 30));
      assert.ok(
        !h.fake().ops().includes('unsubscribe'),
        'no unsubscribe while a revoke is still draining',
      );
      slow.open();
      await closed;
      const ops = h.fake().ops();
      // Offset 2 finished during the drain; 3 and 4 had not started and are left to the next owner.
      const finalCommit = ops.findIndex((o) => o.startsWith('commit(') && o.includes(`${T}[0]@3`));
      const release = ops.findIndex((o) => o === 'unassign' || o.startsWith('incrementalUnassign'));
      assert.ok(finalCommit >= 0, `final commit of partition 0 in ${ops.join(' ')}`);
      assert.ok(release > finalCommit, 'unassigned after the final commit');
      assert.ok(
        ops.indexOf('unsubscribe') === -1 || ops.indexOf('unsubscribe') > release,
        `unsubscribe only after the revoke finished: ${ops.join(' ')}`,
      );
      assert.equal(committed(h, 0), 3);
      assert.equal(committed(h, 1), 5);
    });
  }

  for (const how of ['unsubscribe', 'takeUntil'] as const) {
    it(`stopping by ${how} is as graceful as close(): in-flight work finishes and counts`, async () => {
      const h = harness({}, { protocol: 'COOPERATIVE' });
      const slow = gate();
      const finished: number[] = [];
      const stop$ = new Subject<void>();
      let completed = false;
      const sub = h.consumer
        .process(
          async (m: KafkaMessage) => {
            if (m.offset >= 3) await slow.promise;
            finished.push(m.offset);
          },
          { partitionConcurrency: 4 },
        )
        .pipe(how === 'takeUntil' ? takeUntil(stop$) : (s) => s)
        .subscribe({ complete: () => (completed = true) });
      subs.push(sub);
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 6);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(h) === 3, 'commit below the slow ones');
      let rebalancesDone = false;
      h.consumer.rebalances$.subscribe({ complete: () => (rebalancesDone = true) });
      if (how === 'unsubscribe') sub.unsubscribe();
      else stop$.next();
      if (how === 'takeUntil') assert.equal(completed, true);
      await new Promise((r) => setTimeout(r, 20));
      slow.open();
      await until(() => rebalancesDone, 'the consumer closed');
      assert.deepEqual(finished.sort(), [0, 1, 2, 3, 4, 5]);
      assert.equal(committed(h), 6, 'the work that finished after the stop is committed');
    });
  }

  it('keeps retrying a message in backoff when its partition is revoked, so the work above it is not redone', async () => {
    const h = harness({ drainTimeoutMs: 3000 }, { protocol: 'COOPERATIVE' });
    let attempts = 0;
    const done: number[] = [];
    subs.push(
      h.consumer
        .process(
          (m: KafkaMessage) => {
            if (m.offset === 1 && ++attempts === 1) throw new Error('transient');
            done.push(m.offset);
          },
          { partitionConcurrency: 2, retry: { count: 3, initialDelayMs: 150, jitter: 0 } },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => attempts === 1 && done.includes(2), 'offset 1 in backoff, 2 done');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.equal(attempts, 2, 'retried during the drain');
    assert.equal(committed(h), 4, 'everything committed: the next owner redoes nothing');
    await h.consumer.close();
  });

  it('releases a partition with thousands of waiting messages and unlimited partition concurrency', async () => {
    const h = harness({ maxBufferedMessages: 20_000, consumeBatchSize: 1000 });
    const running = gate();
    let started = 0;
    subs.push(
      h.consumer
        .process(
          () => {
            started += 1;
            return running.promise;
          },
          { concurrency: 2, partitionConcurrency: Infinity },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 15_000, 1);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().remaining(T, 0) === 0, 'everything fetched');
    await until(() => started === 2, 'two running');
    h.fake().rebalanceRevoke([tp(0)]);
    // The 14,998 waiting messages are cancelled at once; the two running ones finish.
    running.open();
    await until(() => h.events.some((e) => e.type === 'drained'), 'drained', 3000);
    const drained = h.events.find((e) => e.type === 'drained');
    assert.ok(drained?.type === 'drained' && !drained.timedOut, 'drained before the deadline');
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.equal(committed(h), 2);
    await h.consumer.close();
  });

  it('never sends a periodic commit after the final commit while a completed-offset write is slow', async () => {
    let slowSaves = false;
    const saves: { partition: number; base: number }[] = [];
    const store: CompletedStore = {
      load: () => Promise.resolve(new Map()),
      save: async (entries) => {
        for (const e of entries) saves.push({ partition: e.partition, base: e.base });
        if (slowSaves) await new Promise((r) => setTimeout(r, 900));
      },
      close: () => Promise.resolve(),
    };
    const h = harness(
      { rememberCompleted: { topic: 'memory' }, commitIntervalMs: 10, drainTimeoutMs: 400 },
      { protocol: 'COOPERATIVE' },
      { storeFactory: () => store },
    );
    const hold = gate();
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => (m.offset === 0 ? hold.promise : undefined), {
          partitionConcurrency: 4,
          ordering: 'none',
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => saves.length > 0, 'a memory of 1 and 2 written');
    slowSaves = true;
    hold.open();
    // The periodic commit of 3 is now waiting for its slow memory write; revoke meanwhile.
    await until(() => saves.length > 1, 'the periodic memory write started');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked' || e.type === 'lost'), 'revoked');
    const revoked = h.events.find((e) => e.type === 'revoked');
    assert.ok(revoked?.type === 'revoked' && revoked.totalMs < 1000, 'within the drain deadline');
    // Let the slow periodic write finish: its commit must not be sent any more.
    await new Promise((r) => setTimeout(r, 1000));
    const commits = h
      .fake()
      .ops()
      .filter((o) => o.startsWith('commit('));
    const release = h
      .fake()
      .ops()
      .findIndex((o) => o.startsWith('incrementalUnassign'));
    const after = h
      .fake()
      .ops()
      .slice(release + 1)
      .filter((o) => o.startsWith('commit('));
    assert.deepEqual(after, [], `no commit after the unassign: ${commits.join(' ')}`);
    await h.consumer.close();
  });

  it('rejects a seek whose partition was revoked and assigned again while its position was looked up', async () => {
    const h = harness({}, { protocol: 'COOPERATIVE' });
    const seen: { offset: number; generation: number }[] = [];
    subs.push(
      h.consumer
        .process(
          (m: KafkaMessage) => void seen.push({ offset: m.offset, generation: m.generation }),
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 10, 'consumed');
    // Hold the timestamp lookup: revoke and reassign the partition meanwhile.
    const fake = h.fake();
    const lookup = gate();
    const original = fake.offsetsForTimes.bind(fake);
    fake.offsetsForTimes = (tps, timeout, cb) =>
      void lookup.promise.then(() => original(tps, timeout, cb));
    const seek = h.consumer.seek(tp(0), { timestamp: 0 });
    fake.rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    fake.rebalanceAssign([tp(0)]);
    await until(() => h.events.filter((e) => e.type === 'assigned').length === 2, 'reassigned');
    lookup.open();
    await assert.rejects(seek, NotAssignedError);
    await new Promise((r) => setTimeout(r, 30));
    assert.ok(
      !h
        .fake()
        .ops()
        .some((o) => o.startsWith('seek(')),
      'the seek never touched the new assignment',
    );
    assert.equal(seen.length, 10, 'nothing replayed');
    await h.consumer.close();
  });

  it('brings a revoke forward when close() has to finish sooner, so the final commit still happens', async () => {
    const h = harness({ drainTimeoutMs: 8000, commitIntervalMs: 60_000 });
    const hung = gate();
    const done: number[] = [];
    let hanging = false;
    subs.push(
      h.consumer
        .process(
          (m: KafkaMessage) => {
            if (m.offset !== 2) return void done.push(m.offset);
            hanging = true;
            return hung.promise;
          },
          { partitionConcurrency: 2 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => hanging && done.length === 2, 'offsets 0 and 1 done, 2 hanging');
    const started = Date.now();
    await h.consumer.close({ timeoutMs: 1500 });
    assert.ok(
      Date.now() - started < 2500,
      `closed within its timeout (${Date.now() - started} ms)`,
    );
    assert.equal(committed(h), 2, 'what finished before the hung handler was committed');
    hung.open();
  });

  it('rejects a close() timeout that is not a positive integer with a ConfigError', async () => {
    const h = harness();
    await assert.rejects(h.consumer.close({ timeoutMs: -1 }), ConfigError);
    await h.consumer.close();
  });

  it('ignores an ack of a message of the stream a seek replaced (same generation, same offsets)', async () => {
    const h = harness({ commitIntervalMs: 5 });
    const streams: PartitionStream[] = [];
    subs.push(h.consumer.partitions$.subscribe((p) => streams.push(p)));
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => streams.length === 1, 'the first stream');
    const old: KafkaMessage[] = [];
    // Delivered and never acknowledged (the acknowledge() at the end only marks the pipeline's end).
    const oldSub = streams[0]!.messages$
      .pipe(
        tap((m) => old.push(m)),
        filter(() => false),
        streams[0]!.acknowledge(),
      )
      .subscribe();
    await until(() => old.length === 5, 'offsets 0..4 delivered, none acked');
    await h.consumer.seek(tp(0), { offset: 0 });
    await until(() => streams.length === 2, 'the stream after the seek');
    const fresh: KafkaMessage[] = [];
    subs.push(streams[1]!.messages$.subscribe((m) => fresh.push(m)));
    await until(() => fresh.length === 5, 'offsets 0..4 again');
    assert.equal(old[0]!.generation, fresh[0]!.generation, 'a seek keeps the generation');
    for (const m of old) streams[1]!.ack(m);
    assert.equal(
      h.consumer.metrics().partitions.find((p) => p.partition === 0)?.inFlight,
      5,
      'none of them counted',
    );
    for (const m of fresh.slice(0, 2)) streams[1]!.ack(m);
    await until(() => committed(h) === 2, 'only the new stream’s acks commit');
    for (const m of fresh.slice(2)) streams[1]!.ack(m);
    await until(() => committed(h) === 5, 'the rest, acked on the new stream');
    oldSub.unsubscribe(); // the replaced stream's pipeline ends (a close would wait for it)
    await h.consumer.close();
  });

  it("ignores an ack of another topic's message on a partition stream", async () => {
    const h = harness({}, {});
    let stream: PartitionStream | undefined;
    subs.push(h.consumer.partitions$.subscribe((p) => (stream = p)));
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 1);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => stream !== undefined, 'a partition stream');
    const own = await firstValueFrom((stream as PartitionStream).messages$);
    (stream as PartitionStream).ack({ ...own, topic: 'another-topic' });
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(committed(h) ?? 0, 0, 'nothing committed past the unprocessed offset');
    (stream as PartitionStream).ack(own);
    await until(() => committed(h) === 1, 'the real ack commits');
    await h.consumer.close();
  });

  it('ends the consumer with the onAssign failure even when the assignment was answered early', async () => {
    const h = harness({
      onAssign: () => new Promise((_, reject) => setTimeout(() => reject(new Error('no')), 50)),
    });
    let failure: unknown;
    subs.push(h.consumer.process(() => undefined).subscribe({ error: (e) => (failure = e) }));
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0)]);
    // A revoke answers the assignment before the hook settles.
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => failure !== undefined, 'the pipeline failed');
    assert.ok(failure instanceof StartPositionError, String(failure));
  });

  it('forgets a stream replaced by a seek once its aborted handlers finished', async () => {
    const h = harness({}, { protocol: 'COOPERATIVE' });
    const hold = gate();
    let holding = false;
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => {
          if (m.offset !== 0 || m.generation !== 1 || holding) return undefined;
          holding = true;
          return hold.promise;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => holding, 'offset 0 running');
    const { assignments } = (
      h.consumer as unknown as { engine: { base: { assignments: Assignments } } }
    ).engine.base;
    const retired = (): number => assignments.retiredOf([tp(0)]).length;
    await h.consumer.seek(tp(0), { offset: 3 });
    assert.equal(retired(), 1, 'the replaced stream waits for its aborted handler');
    hold.open();
    await until(() => retired() === 0, 'forgotten without a revoke');
    await until(() => committed(h) === 5, 'the new stream committed');
    await h.consumer.close();
  });

  it('treats a revoke of a lost assignment as lost at once: handlers aborted, nothing committed', async () => {
    const h = harness({ drainTimeoutMs: 5000 }, { protocol: 'COOPERATIVE' });
    const hung = gate();
    let signal: AbortSignal | undefined;
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => {
          if (m.offset !== 3) return undefined;
          signal = m.signal;
          return hung.promise;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => signal !== undefined && committed(h) === 3, 'offset 3 hanging, 3 committed');
    const commitsBefore = h
      .fake()
      .ops()
      .filter((o) => o.startsWith('commit(')).length;
    const t0 = Date.now();
    // librdkafka was fenced by a heartbeat: the revoke looks ordinary, the assignment is lost.
    h.fake().rebalanceRevoke([tp(0)], { lost: true });
    await until(() => h.events.some((e) => e.type === 'lost'), 'lost', 2000);
    assert.ok(Date.now() - t0 < 1000, 'promptly, without waiting for the drain deadline');
    assert.equal(signal?.aborted, true, 'the hung handler was aborted');
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned', 'revoking', 'lost'],
    );
    assert.equal(
      h
        .fake()
        .ops()
        .filter((o) => o.startsWith('commit(')).length,
      commitsBefore,
      'no commit for a lost assignment',
    );
    assert.ok(
      h
        .fake()
        .ops()
        .some((o) => o.startsWith('incrementalUnassign')),
    );
    hung.open();
    await h.consumer.close();
  });

  it('retries a final commit refused with STALE_MEMBER_EPOCH until it is confirmed (KIP-848 coordinator failover)', async () => {
    let stale = 0;
    const h = harness(
      { drainTimeoutMs: 5000, commitIntervalMs: 60_000 },
      {
        protocol: 'COOPERATIVE',
        commitResult: () => (stale > 0 && stale-- > 0 ? 113 : undefined),
      },
    );
    let processed = 0;
    subs.push(h.consumer.process(() => void (processed += 1)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => processed === 4, 'processed');
    stale = 5;
    h.fake().rebalanceRevoke([tp(0)]);
    await until(
      () => h.events.some((e) => e.type === 'revoked' || e.type === 'lost'),
      'revoked',
      8000,
    );
    const done = h.events.find((e) => e.type === 'committed');
    assert.ok(
      done?.type === 'committed' && done.results[0]?.status === 'committed',
      JSON.stringify(done),
    );
    assert.equal(committed(h), 4);
    assert.equal(stale, 0, 'every stale refusal was retried');
    await h.consumer.close();
  });

  it('never lets a commit that timed out land after a newer one (no backwards commit)', async () => {
    const h = harness(
      { commitIntervalMs: 20, commitTimeoutMs: 100 },
      {
        protocol: 'COOPERATIVE',
        // The commit of offset 2 is answered (and applied) only after 60 consume calls: long after
        // its wait timed out here.
        commitPolls: (offsets) => (offsets.some((o) => o.offset === 2) ? 60 : undefined),
      },
    );
    const hold = gate();
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => (m.offset === 2 ? hold.promise : undefined))
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(
      () =>
        h
          .fake()
          .ops()
          .some((o) => o === `commit(${T}[0]@2)`),
      'commit of 2 sent',
    );
    hold.open();
    await until(() => committed(h) === 5, 'the newer offset committed', 5000);
    const ops = h
      .fake()
      .ops()
      .filter((o) => o.startsWith('commit('));
    const late = ops.indexOf(`commit(${T}[0]@2)`);
    const newer = ops.findIndex((o) => o === `commit(${T}[0]@5)`);
    assert.ok(late >= 0 && newer > late, ops.join(' '));
    // Every result has arrived: the group still holds the newer offset.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(committed(h), 5, 'the late answer did not move the offset back');
    await h.consumer.close();
    assert.equal(committed(h), 5);
  });
});
