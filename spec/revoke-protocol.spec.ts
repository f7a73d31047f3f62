import assert from 'node:assert/strict';
import { lastValueFrom, toArray } from 'rxjs';
import type { Subscription } from 'rxjs';
import * as Kafka from 'node-rdkafka';
import { ConnectError, KafkaClientError } from '../lib';
import type { KafkaMessage } from '../lib';
import { T, harness, tp, until } from './helpers/harness';

const E = Kafka.CODES.ERRORS;

describe('revoke protocol', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('releases the partition at the drain deadline, aborts the straggler and never commits its late completion', async () => {
    const h = harness({
      drainTimeoutMs: 200,
      config: { 'max.poll.interval.ms': 10_000, 'session.timeout.ms': 6000 },
    });
    let release!: () => void;
    const hung = new Promise<void>((r) => (release = r));
    let signal: AbortSignal | undefined;
    subs.push(
      h.consumer
        .process(
          (m: KafkaMessage) => {
            if (m.offset === 2) {
              signal = m.signal;
              return hung;
            }
            return undefined;
          },
          { partitionConcurrency: 4 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => signal !== undefined, 'the hung handler');
    await until(
      () => h.fake().commits.get(`${T}[0]`) === 2,
      'contiguous commit up to the hung message',
    );
    const t0 = Date.now();
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.ok(Date.now() - t0 < 2000, 'released within the deadline');
    const drained = h.events.find((e) => e.type === 'drained');
    assert.ok(drained?.type === 'drained' && drained.timedOut && drained.stragglers === 1);
    assert.equal(signal?.aborted, true);
    assert.equal(h.fake().commits.get(`${T}[0]`), 2);
    assert.ok(h.fake().ops().includes('unassign'));
    release();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(h.fake().commits.get(`${T}[0]`), 2, 'the late completion is never committed');
    await h.consumer.close();
  });

  it('holds the partitions while librdkafka still holds their final commit, and counts it applied late (KIP-848, coordinator unreachable)', async () => {
    // The coordinator is out of reach from the revoke on: every commit waits in librdkafka's
    // wait-for-coordinator queue, which it serves after the member's heartbeat once the coordinator
    // is back. Handed over at the drain deadline, the partition's commit would land after the
    // heartbeat that released it: after the next owner's commits.
    let unreachable = false;
    const h = harness(
      {
        drainTimeoutMs: 300,
        commitTimeoutMs: 100,
        // No periodic commit: one that took offset 8 before the coordinator went away (a loaded
        // machine) would leave the revoke nothing to commit, and nothing to hold.
        commitIntervalMs: 600_000,
        config: { 'group.protocol': 'consumer', 'max.poll.interval.ms': 20_000 },
      },
      {
        groupProtocol: 'consumer',
        commitPlan: () => (unreachable ? { polls: 1, held: true, deferred: true } : { polls: 1 }),
      },
    );
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => (h.consumer.metrics().messages.processed ?? 0) >= 5, 'five processed');
    await h.consumer.commit();
    await until(() => h.fake().commits.get(`${T}[0]`) === 5, 'the commit of 5');
    h.fake().produce(T, 0, 3);
    await until(
      () => (h.consumer.metrics().messages.processed ?? 0) >= 8,
      'the three new messages processed',
    );
    unreachable = true;
    const revokedAt = Date.now();
    h.fake().rebalanceRevoke([tp(0)]);
    // Well past the drain deadline: still held, not handed over.
    await until(() => Date.now() - revokedAt > 900, 'the drain deadline to pass');
    assert.ok(!h.events.some((e) => e.type === 'revoked' || e.type === 'lost'));
    assert.ok(
      !h
        .fake()
        .ops()
        .some((o) => o.startsWith('incrementalUnassign')),
      'handed over while held',
    );
    unreachable = false;
    h.fake().releaseHeld(); // the coordinator is back
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    const committed = h.events.find((e) => e.type === 'committed');
    assert.ok(committed?.type === 'committed');
    assert.deepEqual(
      committed.results.map((r) => [r.partition, r.status, r.status === 'committed' && r.offset]),
      [[0, 'committed', 8]],
    );
    assert.equal(h.fake().commits.get(`${T}[0]`), 8, 'what Kafka holds');
    await h.consumer.close();
  });

  it('turns a revoke whose commit is refused with ILLEGAL_GENERATION into lost', async () => {
    let refuse = false;
    const h = harness({}, { commitResult: () => (refuse ? E.ERR_ILLEGAL_GENERATION : undefined) });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0)]);
    h.fake().produce(T, 0, 3);
    await until(() => h.fake().commits.get(`${T}[0]`) === 3, 'commit');
    h.fake().produce(T, 0, 3);
    await until(() => h.fake().remaining(T, 0) === 0, 'consumed');
    refuse = true;
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'lost'), 'lost');
    const committed = h.events.find((e) => e.type === 'committed');
    assert.ok(committed?.type === 'committed' && committed.results[0]?.status === 'lost');
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned', 'revoking', 'drained', 'committed', 'lost'],
    );
    assert.ok(h.fake().ops().includes('unassign'));
    await h.consumer.close();
  });

  it('reports a commit rejected with REBALANCE_IN_PROGRESS as failed, never as committed', async () => {
    let refuse = false;
    const h = harness(
      {},
      { commitResult: () => (refuse ? E.ERR_REBALANCE_IN_PROGRESS : undefined) },
    );
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0)]);
    h.fake().produce(T, 0, 3);
    await until(() => h.fake().commits.get(`${T}[0]`) === 3, 'commit');
    refuse = true;
    h.fake().produce(T, 0, 2);
    await until(() => h.fake().remaining(T, 0) === 0, 'consumed');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    const committed = h.events.find((e) => e.type === 'committed');
    assert.ok(committed?.type === 'committed');
    assert.equal(committed.results[0]?.status, 'failed');
    assert.equal(h.fake().commits.get(`${T}[0]`), 3);
    await h.consumer.close();
  });

  it('never unassigns a newer assignment when a revoke is overtaken (eager)', async () => {
    const h = harness();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    subs.push(h.consumer.process((m) => (m.offset === 0 ? gate : undefined)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 1);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.events.length === 1, 'assigned');
    await new Promise((r) => setTimeout(r, 20));
    h.fake().rebalanceRevoke([tp(0)]);
    // A newer assignment arrives before the drain finished.
    h.fake().rebalanceAssign([tp(1)]);
    release();
    await until(() => h.events.some((e) => e.type === 'committed'), 'the revoke to finish');
    assert.ok(!h.fake().ops().includes('unassign'), h.fake().ops().join(' '));
    // The superseded stream committed nothing: it ended lost when the newer assignment dropped it.
    assert.deepEqual(
      h.events.filter((e) => e.type === 'lost' || e.type === 'revoked').map((e) => e.type),
      ['lost'],
    );
    assert.deepEqual(h.fake().assignments(), [tp(1)]);
    await h.consumer.close();
  });

  it('keeps processing retained partitions while revoked ones drain (cooperative)', async () => {
    const h = harness({}, { protocol: 'COOPERATIVE' });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const seen: number[] = [];
    subs.push(
      h.consumer
        .process(async (m) => {
          if (m.partition === 0 && m.offset === 0) await gate;
          seen.push(m.partition);
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 1);
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await new Promise((r) => setTimeout(r, 20));
    h.fake().produce(T, 1, 20);
    await until(() => seen.filter((p) => p === 1).length === 20, 'retained partition messages');
    h.fake().rebalanceRevoke([tp(0)]);
    // The revoke of partition 0 is pending; partition 1 stays assigned.
    assert.deepEqual(h.fake().assignments(), [tp(0), tp(1)]);
    release();
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.ok(h.fake().ops().includes(`incrementalUnassign(${T}[0])`));
    assert.deepEqual(h.fake().assignments(), [tp(1)]);
    h.fake().produce(T, 1, 5);
    await until(() => seen.filter((p) => p === 1).length === 25, 'partition 1 continues');
    await h.consumer.close();
    assert.equal(h.fake().commits.get(`${T}[1]`), 25);
  });

  it('commits the end offset at assignment of a partition that delivered nothing (reset to latest)', async () => {
    const h = harness({ topicConfig: { 'auto.offset.reset': 'latest' } });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().watermarks.set(`${T}[0]`, 17);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.consumer.positions()[0]?.offset === 17, 'start position lookup');
    h.fake().watermarks.set(`${T}[0]`, 25); // records produced later, never fetched: not skipped
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.equal(h.fake().commits.get(`${T}[0]`), 17);
    await h.consumer.close();
  });

  it('commits nothing for an idle partition under auto.offset.reset=earliest', async () => {
    const h = harness({ topicConfig: { 'auto.offset.reset': 'earliest' } });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().watermarks.set(`${T}[0]`, 17);
    h.fake().rebalanceAssign([tp(0)]);
    await new Promise((r) => setTimeout(r, 20));
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.equal(h.fake().commits.get(`${T}[0]`), undefined);
    const committed = h.events.find((e) => e.type === 'committed');
    assert.ok(committed?.type === 'committed' && committed.results[0]?.status === 'unchanged');
    await h.consumer.close();
  });

  it('unassigns at once in the final revoke fired by disconnect', async () => {
    const h = harness({ closeTimeoutMs: 300, drainTimeoutMs: 100 });
    subs.push(h.consumer.process(() => new Promise(() => undefined)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 1);
    h.fake().rebalanceAssign([tp(0)]);
    await new Promise((r) => setTimeout(r, 10));
    // Make unsubscribe produce no revoke so the assignment is still there at disconnect.
    h.fake().unsubscribe = function () {
      return this;
    };
    await h.consumer.close();
    const ops = h.fake().ops();
    assert.ok(ops.indexOf('disconnect') < ops.lastIndexOf('unassign'), ops.join(' '));
    assert.deepEqual(h.fake().assignments(), []);
  });

  it('errors the pipeline with a ConnectError when the cluster cannot be reached', async () => {
    const h = harness({}, { connectError: 'Local: Broker transport failure' });
    const err = await lastValueFrom(h.consumer.process(() => undefined).pipe(toArray())).catch(
      (e: unknown) => e,
    );
    assert.ok(err instanceof ConnectError, String(err));
    assert.match(err.message, /fake:9092/);
  });
});

describe('lost partitions and client errors', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('treats the revoke after a max.poll.interval.ms log line as lost: no commit, signals aborted', async () => {
    const h = harness();
    let signal: AbortSignal | undefined;
    subs.push(
      h.consumer
        .process((m) => {
          signal = m.signal;
          return m.offset === 3 ? new Promise(() => undefined) : undefined;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().commits.get(`${T}[0]`) === 3, 'commit up to the stuck message');
    const commitsBefore = h
      .fake()
      .ops()
      .filter((o) => o.startsWith('commit')).length;
    h.fake().emit('event.log', {
      severity: 4,
      fac: 'MAXPOLL',
      message: 'Application maximum poll interval exceeded',
    });
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'lost'), 'lost');
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned', 'lost'],
    );
    assert.equal(signal?.aborted, true);
    assert.equal(
      h
        .fake()
        .ops()
        .filter((o) => o.startsWith('commit')).length,
      commitsBefore,
      'nothing committed',
    );
    assert.ok(h.fake().ops().includes('unassign'));
    await h.consumer.close();
  });

  it('ends the pipeline with a typed error on a fatal client error', async () => {
    const h = harness();
    const result = lastValueFrom(h.consumer.process(() => undefined).pipe(toArray())).catch(
      (e: unknown) => e,
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().emit(
      'event.error',
      Object.assign(new Error('Broker: Fenced instance id'), { code: E.ERR__FATAL, isFatal: true }),
    );
    const err = await result;
    assert.ok(err instanceof KafkaClientError, String(err));
    assert.equal(err.code, 'ERR_RKC_KAFKA');
    assert.equal(err.fatal, true);
  });

  it('logs and rides out transient client errors', async () => {
    const h = harness();
    const seen: number[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().emit(
      'event.error',
      Object.assign(new Error('Local: All broker connections are down'), {
        code: E.ERR__ALL_BROKERS_DOWN,
      }),
    );
    h.fake().emit(
      'event.error',
      Object.assign(new Error('Local: Broker transport failure'), { code: E.ERR__TRANSPORT }),
    );
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 3, 'processing continues');
    await h.consumer.close();
  });

  it('answers an assignment overtaken by a revoke while its start offsets are looked up, then releases it', async () => {
    // librdkafka waits for the assign call; leaving it unanswered hangs its close (seen in the
    // chaos suite under KIP-848), so the pending assignment is answered without start offsets and
    // released by the revoke at once.
    const h = harness({ topicConfig: { 'auto.offset.reset': 'latest' } });
    const seen: number[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned', 'revoking', 'drained', 'committed', 'revoked'],
    );
    const ops = h.fake().ops();
    assert.ok(ops.indexOf(`assign(${T}[0])`) < ops.lastIndexOf('unassign'), ops.join(' '));
    assert.deepEqual(h.fake().assignments(), []);
    assert.deepEqual(seen, [], 'nothing processed from an assignment revoked at once');
    assert.equal(h.fake().commits.get(`${T}[0]`), undefined, 'nothing committed for it');
    await h.consumer.close();
  });

  it('drains an assignment revoked right after it was made', async () => {
    const h = harness();
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.events.length === 1, 'assigned');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned', 'revoking', 'drained', 'committed', 'revoked'],
    );
    h.fake().rebalanceAssign([tp(0)]);
    await until(
      () => h.fake().commits.get(`${T}[0]`) === 3,
      'the next assignment processes everything',
    );
    await h.consumer.close();
  });
});

describe('drain with long buffers (regression: rxjs mergeMap recursion stalled drains)', () => {
  it('drains revoked partitions at once even with thousands of buffered messages each', async function () {
    this.timeout(30_000);
    const h = harness(
      { config: { 'max.poll.interval.ms': 20_000, 'session.timeout.ms': 6000 } },
      { protocol: 'COOPERATIVE' },
    );
    let n = 0;
    let i = 0;
    const sub = h.consumer
      .process(
        async () => {
          i += 1;
          // Mostly immediate, with a slow tail, as in the chaos suite (deterministic).
          const ms = i % 20 === 0 ? 200 : i % 5;
          if (ms > 0) await new Promise((r) => setTimeout(r, ms));
          n += 1;
        },
        { concurrency: 16, partitionConcurrency: 2 },
      )
      .subscribe();
    await until(() => h.fake().isConnected(), 'connect');
    for (let p = 0; p < 12; p++) h.fake().produce(T, p, 3000);
    h.fake().rebalanceAssign([...Array(12).keys()].map(tp));
    await until(() => n > 500, '500 processed');
    h.fake().rebalanceRevoke([...Array(9).keys()].map(tp));
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked', 10_000);
    const drained = h.events.find((e) => e.type === 'drained');
    assert.ok(
      drained?.type === 'drained' && !drained.timedOut && drained.durationMs < 2000,
      JSON.stringify(drained),
    );
    const before = n;
    await until(() => n > before + 500, 'the kept partitions keep processing');
    sub.unsubscribe();
    await h.consumer.close();
  });
});
