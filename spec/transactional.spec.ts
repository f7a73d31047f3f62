import assert from 'node:assert/strict';
import { of } from 'rxjs';
import type { Subscription } from 'rxjs';
import {
  AlreadySubscribedError,
  ConfigError,
  ErrorCode,
  HandlerError,
  ProducerFencedError,
} from '../lib';
import { TRANSACTIONAL_DEFAULTS } from '../lib/transactional-options';
import type {
  KafkaMessage,
  OutputRecord,
  Processed,
  ReactiveConsumerOptions,
  TransactionalHandler,
  TransactionalOptions,
} from '../lib';
import type { TxnRecord } from './fakes/fake-transactional-producer';
import { T, committed, gate, harness, tp, until } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';

const setup = transactionalHarness;

type Setup = ReturnType<typeof setup>;

/** 1–3 records per input, to two topics, each naming its input. */
const fanOut = (m: KafkaMessage): OutputRecord[] => {
  const n = 1 + (m.offset % 3);
  return Array.from({ length: n }, (_, i) => ({
    topic: i % 2 === 0 ? 'out-a' : 'out-b',
    key: m.key,
    value: `${m.partition}:${m.offset}:${i}`,
  }));
};

/** How many records fanOut writes for an input. */
const fanOutCount = (_partition: number, offset: number): number => 1 + (offset % 3);

/** The values of every record the first `count` inputs of `partition` write, in order. */
const expectedFor = (partition: number, count: number, perInput = fanOutCount): string[] =>
  Array.from({ length: count }, (_, offset) =>
    Array.from({ length: perInput(partition, offset) }, (_, i) => `${partition}:${offset}:${i}`),
  ).flat();

const values = (records: TxnRecord[]): string[] => records.map((r) => String(r.value));

/** Every input's outputs exactly once in the committed records (the read_committed view). */
function assertExactlyOnce(
  s: Setup,
  partitions: Record<number, number>,
  perInput = fanOutCount,
): void {
  const seen = new Map<string, number>();
  for (const v of values(s.producer().committed)) seen.set(v, (seen.get(v) ?? 0) + 1);
  const dups = [...seen].filter(([, n]) => n > 1);
  assert.deepEqual(dups, [], 'no output committed twice');
  for (const [partition, count] of Object.entries(partitions)) {
    const missing = expectedFor(Number(partition), count, perInput).filter((v) => !seen.has(v));
    assert.deepEqual(missing, [], `no output of partition ${partition} lost`);
    assert.equal(committed(s, Number(partition)), count, `offset of ${partition} at the end`);
  }
}

/**
 * Each committed transaction holds every record of an input or none of them (and carries its
 * offset): a read_committed reader never sees part of an input's output.
 */
function assertWholeInputs(s: Setup, perInput = fanOutCount): void {
  for (const [i, t] of s.producer().transactions.entries()) {
    if (t.outcome !== 'committed') continue;
    const count = new Map<string, number>();
    for (const v of values(t.records)) {
      const input = v.split(':').slice(0, 2).join(':');
      count.set(input, (count.get(input) ?? 0) + 1);
    }
    for (const [input, n] of count) {
      const [partition, offset] = input.split(':').map(Number) as [number, number];
      assert.equal(
        n,
        perInput(partition, offset),
        `committed transaction ${i} holds all of input ${input}'s records`,
      );
    }
  }
  assertOffsetsCarryRecords(s);
}

/**
 * The invariant a crash must not break: in each committed transaction, every record's input offset
 * is below the offset the transaction commits for its partition, and at or above the one before.
 */
function assertOffsetsCarryRecords(s: Setup): void {
  const last = new Map<number, number>();
  for (const t of s.producer().transactions.filter((x) => x.outcome === 'committed')) {
    for (const r of t.records) {
      const [partition, offset] = String(r.value).split(':').map(Number) as [number, number];
      const carried = t.offsets.find((o) => o.partition === partition)?.offset;
      assert.ok(
        carried !== undefined && carried > offset,
        `offset of ${partition}@${offset} carried`,
      );
      assert.ok(
        (last.get(partition) ?? 0) <= offset,
        `${partition}@${offset} not committed before`,
      );
    }
    for (const o of t.offsets) last.set(o.partition, o.offset);
  }
}

describe('processTransactional()', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  function run(s: Setup, handler: TransactionalHandler, options: TransactionalOptions = {}) {
    const out: Processed<readonly OutputRecord[]>[] = [];
    let error: unknown;
    subs.push(
      s.consumer.processTransactional(handler, { transactionalId: 'tx-1', ...options }).subscribe({
        next: (p) => out.push(p),
        error: (e: unknown) => (error = e),
      }),
    );
    return { out, error: () => error };
  }

  it('writes each message’s records and its offset in one transaction, and never commits to the group itself', async () => {
    const s = setup();
    run(s, fanOut, { partitionConcurrency: 4 });
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 30);
    s.fake().produce(T, 1, 20);
    s.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => committed(s, 0) === 30 && committed(s, 1) === 20, 'offsets at the end');
    assertExactlyOnce(s, { 0: 30, 1: 20 });
    assertOffsetsCarryRecords(s);
    assert.ok(
      !s
        .fake()
        .ops()
        .some((op) => op.startsWith('commit(')),
      'no consumer commit',
    );
    assert.equal(s.producer().config['transactional.id'], 'tx-1');
    assert.equal(s.producer().config['enable.idempotence'], true);
    assert.equal(s.producer().config['acks'], 'all');
    await s.consumer.close();
    assert.ok(s.producer().calls.includes('disconnect'));
  });

  it('a refused second subscription leaves the running transactional pipeline committing', async () => {
    const s = setup();
    const pipeline$ = s.consumer.processTransactional(fanOut, { transactionalId: 'tx-1' });
    subs.push(pipeline$.subscribe());
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 3, 'the first 3 committed');
    let refused: unknown;
    subs.push(pipeline$.subscribe({ error: (e: unknown) => (refused = e) }));
    let refusedToo: unknown;
    subs.push(
      s.consumer.process(() => undefined).subscribe({ error: (e: unknown) => (refusedToo = e) }),
    );
    assert.ok(refused instanceof AlreadySubscribedError, String(refused));
    assert.ok(refusedToo instanceof AlreadySubscribedError, String(refusedToo));
    s.fake().produce(T, 0, 3);
    await until(() => committed(s, 0) === 6, 'the next 3 committed in transactions');
    assert.ok(!s.producer().calls.includes('disconnect'), 'the producer was not closed');
    await s.consumer.close();
    assertExactlyOnce(s, { 0: 6 });
  });

  it('writes the records of one input partition in offset order when handlers finish out of order', async () => {
    const s = setup();
    run(
      s,
      async (m: KafkaMessage) => {
        await new Promise((r) => setTimeout(r, (m.offset * 7) % 5));
        return fanOut(m);
      },
      { partitionConcurrency: 8, ordering: 'none' },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 40);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 40, 'offset at the end');
    assert.deepEqual(values(s.producer().committed), expectedFor(0, 40));
    assertOffsetsCarryRecords(s);
    await s.consumer.close();
  });

  it('puts the records of messages finishing while a commit is in flight into the next transaction', async () => {
    const s = setup({}, {});
    const g = gate();
    run(
      s,
      async (m: KafkaMessage) => {
        if (m.offset >= 5) await g.promise;
        return fanOut(m);
      },
      { partitionConcurrency: 10, maxMessages: 5 },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.producer().hold = true;
    s.fake().produce(T, 0, 10);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.producer().heldCommits === 1, 'the first commit in flight');
    g.open(); // 5..9 finish while it is held
    await new Promise((r) => setTimeout(r, 20));
    const first = s.producer().transactions[0]!;
    assert.deepEqual(values(first.records), expectedFor(0, 5), 'nothing joined the committing one');
    assert.deepEqual(first.offsets, [{ topic: T, partition: 0, offset: 5 }]);
    s.producer().release();
    await until(() => committed(s, 0) === 10, 'the next transaction');
    assertExactlyOnce(s, { 0: 10 });
    assertOffsetsCarryRecords(s);
    await s.consumer.close();
  });

  it('on a revoke, drains, commits the open transaction with the drained offsets, then unassigns', async () => {
    const s = setup({}, {});
    const g = gate();
    run(
      s,
      async (m: KafkaMessage) => {
        if (m.offset === 3) await g.promise;
        return fanOut(m);
      },
      { partitionConcurrency: 4, maxMs: 5000, maxMessages: 1000 },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    s.fake().rebalanceAssign([tp(0)]);
    await until(
      () => s.producer().transactions[0]?.records.length === 6,
      'offsets 0..2 in the txn',
    );
    s.fake().rebalanceRevoke([tp(0)]);
    await until(() => s.events.some((e) => e.type === 'revoking'), 'revoking');
    assert.equal(committed(s, 0), undefined, 'nothing committed while draining');
    g.open();
    await until(() => s.events.some((e) => e.type === 'revoked'), 'revoked');
    const commitAt = s.producer().calls.lastIndexOf('commit');
    assert.ok(commitAt >= 0);
    assert.equal(committed(s, 0), 6, 'every drained message committed');
    const ev = s.events.find((e) => e.type === 'committed');
    assert.ok(ev?.type === 'committed');
    assert.deepEqual(ev.results, [{ topic: T, partition: 0, status: 'committed', offset: 6 }]);
    assert.deepEqual(values(s.producer().committed), expectedFor(0, 6));
    assert.equal(ev.transaction?.outcome, 'committed');
    assert.ok(s.fake().ops().includes('unassign'));
    assertOffsetsCarryRecords(s);
    await s.consumer.close();
  });

  it('aborts on a failed commit, never lets the aborted work count, and redoes it (exactly once in the end)', async () => {
    const s = setup({
      plan: (op, n) => (op === 'commit' && n === 1 ? { code: 48, abortable: true } : undefined),
    });
    run(s, fanOut, { maxMessages: 4 });
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 12);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 12, 'offset at the end');
    assert.ok(s.producer().aborted.length > 0, 'an aborted transaction');
    assertExactlyOnce(s, { 0: 12 });
    assertOffsetsCarryRecords(s);
    const m = s.consumer.metrics().transactions!;
    assert.equal(m.aborted, 1);
    assert.ok(m.committed >= 3);
    for (const t of s.producer().transactions) {
      assert.ok(new Set(values(t.records).map((v) => v.split(':')[1])).size <= 4, 'maxMessages');
    }
    assert.equal(m.abortedRecords, s.producer().aborted.length);
    await s.consumer.close();
  });

  it('retries a commit librdkafka calls retriable, without aborting', async () => {
    const s = setup({
      plan: (op, n) => (op === 'commit' && n <= 2 ? { code: -185, retriable: true } : undefined),
    });
    run(s, fanOut);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 5, 'offset at the end');
    assert.equal(s.producer().aborted.length, 0);
    assertExactlyOnce(s, { 0: 5 });
    await s.consumer.close();
  });

  it('aborts the open transaction when a partition with work in it is lost, and nothing of it is committed', async () => {
    const s = setup({}, { drainTimeoutMs: 2000 });
    const g = gate();
    run(
      s,
      async (m: KafkaMessage) => {
        if (m.offset === 2) await g.promise;
        return fanOut(m);
      },
      { partitionConcurrency: 2, maxMs: 5000 },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 4);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => (s.producer().transactions[0]?.records.length ?? 0) === 3, '0..1 in the txn');
    s.fake().rebalanceRevoke([tp(0)], { lost: true });
    await until(() => s.events.some((e) => e.type === 'lost'), 'lost');
    await until(() => s.producer().aborted.length === 3, 'aborted');
    g.open();
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(committed(s, 0), undefined);
    assert.equal(
      s.producer().committed.length,
      0,
      'the late result never joins a later transaction',
    );
    await s.consumer.close();
  });

  {
    // Not reachable with librdkafka's own rebalance (it waits for the revoke's answer; under
    // cooperative it refuses to add an assigned partition again with ERR__CONFLICT), but the
    // engine handles "reassigned by a newer rebalance" for process(), so the transaction must too:
    // the old stream's records must never be committed with the new stream's offset. (Eager only:
    // the fake, unlike librdkafka, keeps a cooperative partition's fetch position when it is
    // added again, so the new stream would start past the aborted work.)
    it('aborts the open transaction when a draining partition is assigned again (eager): no input lost or written twice', async () => {
      const s = setup({}, { drainTimeoutMs: 5000 }, { protocol: 'EAGER' });
      const g = gate();
      let slow = 0;
      run(
        s,
        async (m: KafkaMessage) => {
          if (m.offset === 3 && slow++ === 0) await g.promise;
          return fanOut(m);
        },
        { partitionConcurrency: 4, maxMs: 200, maxMessages: 1000 },
      );
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 6);
      s.fake().rebalanceAssign([tp(0)]);
      // 0..2 are in the open transaction (1 + 2 + 3 records), 3 is in flight, 4..5 wait behind it.
      await until(
        () => (s.producer().transactions[0]?.records.length ?? 0) === 6,
        '0..2 in the txn',
      );
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.events.some((e) => e.type === 'revoking'), 'revoking');
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => s.producer().aborted.length === 6, 'the open transaction aborted');
      g.open(); // the old stream's offset 3 resolves now: dropped
      await until(() => committed(s, 0) === 6, 'the new stream redid 0..5', 5000);
      s.fake().produce(T, 0, 2);
      await until(() => committed(s, 0) === 8, 'more work after the late result', 5000);
      await s.consumer.close();
      assertExactlyOnce(s, { 0: 8 });
      assertOffsetsCarryRecords(s);
    });
  }

  it('stops with a ProducerFencedError when another producer took the transactional.id', async () => {
    const s = setup({
      plan: (op) => (op === 'commit' ? { code: -144, fatal: true } : undefined),
    });
    const r = run(s, fanOut);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => r.error() !== undefined, 'the pipeline errors', 5000);
    const err = r.error();
    assert.ok(err instanceof ProducerFencedError, String(err));
    assert.equal(err.code, ErrorCode.ProducerFenced);
    assert.equal(err.transactionalId, 'tx-1');
    assert.equal(committed(s, 0), undefined, 'nothing committed');
    assert.equal(s.producer().committed.length, 0);
  });

  it('skips a message that failed for good with onFailure skip: it counts with no output', async () => {
    const s = setup();
    run(
      s,
      (m: KafkaMessage) => {
        if (m.offset === 1) throw new Error('bad');
        return fanOut(m);
      },
      { onFailure: 'skip', retry: { count: 1, initialDelayMs: 1, maxDelayMs: 1 } },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 3, 'offset at the end');
    assert.deepEqual(
      values(s.producer().committed),
      expectedFor(0, 3).filter((v) => !v.startsWith('0:1:')),
    );
    await s.consumer.close();
  });

  it('commits what is before a message that failed for good, then stops (onFailure stop)', async () => {
    const s = setup();
    const r = run(
      s,
      (m: KafkaMessage) => {
        if (m.offset === 2) throw new Error('bad');
        return fanOut(m);
      },
      { retry: { count: 0 } },
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => r.error() !== undefined, 'the pipeline errors');
    assert.ok(r.error() instanceof HandlerError);
    await until(() => committed(s, 0) === 2, 'offsets before it committed');
    assert.deepEqual(values(s.producer().committed), expectedFor(0, 2));
  });

  it('accepts records as an Observable and as a Promise, and an empty array', async () => {
    const s = setup();
    run(s, (m: KafkaMessage) =>
      m.offset === 0 ? of(fanOut(m)[0]!) : m.offset === 1 ? Promise.resolve(fanOut(m)) : [],
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 3);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 3, 'offset at the end');
    assert.deepEqual(values(s.producer().committed), ['0:0:0', '0:1:0', '0:1:1']);
    await s.consumer.close();
  });

  it('fails a message whose handler returns something that is not records', async () => {
    const s = setup();
    const r = run(s, (() => 'nope') as never, { retry: { count: 0 } });
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 1);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => r.error() !== undefined, 'the pipeline errors');
    assert.ok(r.error() instanceof HandlerError);
  });

  it('waits for the queue when produce() reports it full, then goes on', async () => {
    const s = setup({ queueFull: (n) => n === 2 || n === 3 });
    run(s, fanOut);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 6, 'offset at the end');
    assertExactlyOnce(s, { 0: 6 });
    await s.consumer.close();
  });

  describe('a message the producer takes only part of (QUEUE_FULL half-way through it)', () => {
    /** Five records per input. */
    const five = (m: KafkaMessage): OutputRecord[] =>
      Array.from({ length: 5 }, (_, i) => ({
        topic: 'out-a',
        key: m.key,
        value: `${m.partition}:${m.offset}:${i}`,
      }));
    const fiveEach = (): number => 5;
    /** Refuses the record `value` with QUEUE_FULL while `full(refusals so far)` holds. */
    function queueFullOn(value: string, full: (refusals: number) => boolean) {
      let refusals = 0;
      const queueFull = (_n: number, r: TxnRecord): boolean => {
        if (String(r.value) !== value || !full(refusals)) return false;
        refusals += 1;
        return true;
      };
      return { queueFull, refusals: () => refusals };
    }

    it('commits no transaction while a message is partly in it: its records and its offset commit together', async () => {
      // Input 1's third record is refused four times (≈ 80 ms at the unit's retry pace: many
      // chances for a periodic commit at maxMs 5). A second commit, if there is one, fails: the
      // partition goes back and redoes its work, which would write twice any record committed
      // without its input's offset.
      const q = queueFullOn('0:1:2', (n) => n < 4);
      const s = setup({
        queueFull: q.queueFull,
        plan: (op, n) => (op === 'commit' && n === 2 ? { code: 48, abortable: true } : undefined),
      });
      run(s, five, { maxMs: 5 });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 4);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(s, 0) === 4, 'offset at the end');
      assert.equal(q.refusals(), 4);
      assertWholeInputs(s, fiveEach);
      assertExactlyOnce(s, { 0: 4 }, fiveEach);
      await s.consumer.close();
    });

    it('after a revoke’s commit, writes nothing more of the revoked partition: what waited behind a full queue is redone by the next assignment, not written into a later transaction', async () => {
      // The queue stays full until the revoke has begun, however late a loaded machine's poll
      // delivers it (a count of refusals from the start ran out first under CI load: 3..5 were
      // written before the revoke), and for 40 refusals more from then on.
      let revoking = false;
      let afterRevoke = 0;
      const q = queueFullOn('0:2:2', () => !revoking || afterRevoke++ < 40);
      const s = setup({ queueFull: q.queueFull });
      run(s, five, { maxMs: 50, maxMessages: 1000 });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 6);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => q.refusals() >= 1, 'input 2 partly written, 3..5 waiting behind it');
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.events.some((e) => e.type === 'revoking'), 'the revoke began');
      revoking = true;
      await until(() => s.events.some((e) => e.type === 'revoked'), 'revoked');
      const ev = s.events.find((e) => e.type === 'committed');
      assert.ok(ev?.type === 'committed');
      assert.deepEqual(ev.results, [{ topic: T, partition: 0, status: 'committed', offset: 3 }]);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(s, 0) === 6, 'the next assignment redid 3..5');
      assertWholeInputs(s, fiveEach);
      assertExactlyOnce(s, { 0: 6 }, fiveEach);
      await s.consumer.close();
    });

    it('on a revoke, lets the partly-written message finish, then commits it whole with its offset', async () => {
      const q = queueFullOn('0:2:2', (n) => n < 5);
      const s = setup({ queueFull: q.queueFull });
      run(s, five, { maxMs: 5000, maxMessages: 1000 });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 3);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => q.refusals() >= 1, 'input 2 partly written');
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.events.some((e) => e.type === 'revoked'), 'revoked');
      const ev = s.events.find((e) => e.type === 'committed');
      assert.ok(ev?.type === 'committed');
      assert.deepEqual(ev.results, [{ topic: T, partition: 0, status: 'committed', offset: 3 }]);
      assert.deepEqual(ev.transaction, { outcome: 'committed', messages: 3, records: 15 });
      assert.equal(s.producer().aborted.length, 0, 'nothing aborted');
      assertWholeInputs(s, fiveEach);
      assertExactlyOnce(s, { 0: 3 }, fiveEach);
      await s.consumer.close();
    });

    it('aborts the transaction when the partly-written message cannot finish before the revoke’s deadline: nothing of it visible, the next assignment redoes it', async () => {
      let revoked = false;
      const q = queueFullOn('0:2:2', () => !revoked);
      const s = setup({ queueFull: q.queueFull }, { drainTimeoutMs: 400 });
      run(s, five, { maxMs: 5000, maxMessages: 3 });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 3);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => q.refusals() >= 1, 'input 2 partly written');
      s.fake().rebalanceRevoke([tp(0)]);
      await until(() => s.events.some((e) => e.type === 'revoked'), 'revoked');
      revoked = true;
      const ev = s.events.find((e) => e.type === 'committed');
      assert.ok(ev?.type === 'committed');
      assert.equal(ev.transaction?.outcome, 'aborted', JSON.stringify(ev.transaction));
      assert.equal(ev.results[0]?.status, 'failed', JSON.stringify(ev.results));
      assert.equal(committed(s, 0), undefined, 'no offset committed');
      assert.deepEqual(values(s.producer().committed), [], 'nothing of the transaction visible');
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(s, 0) === 3, 'the next assignment redid 0..2');
      assertWholeInputs(s, fiveEach);
      assertExactlyOnce(s, { 0: 3 }, fiveEach);
      await s.consumer.close();
    });

    it('commits every maxMs while the producer’s queue is the bottleneck (a message partly in at almost every check): each long before transaction.timeout.ms', async () => {
      // A producer queue of 8 records freeing one every 5 ms (≈ 40 five-record inputs a second)
      // behind handlers that finish at once: produce() refuses part-way through most inputs, so
      // the open transaction nearly always holds a partly-written message when the loop checks.
      let tokens = 8;
      let last = Date.now();
      const queueFull = (): boolean => {
        const now = Date.now();
        tokens = Math.min(8, tokens + (now - last) / 5);
        last = now;
        if (tokens < 1) return true;
        tokens -= 1;
        return false;
      };
      const s = setup({ queueFull }, { commitTimeoutMs: 500 });
      run(s, five, { maxMs: 50, producerConfig: { 'transaction.timeout.ms': 3000 } });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 2000);
      s.fake().rebalanceAssign([tp(0)]);
      // Before: nothing committed until maxMessages (500 inputs, ≈ 12 s here), by then past the
      // transaction's deadline, so aborted and redone for ever.
      await until(
        () => s.producer().transactions.filter((t) => t.outcome === 'committed').length >= 5,
        'five transactions committed',
        2000,
      );
      assert.ok((committed(s, 0) ?? 0) > 0, 'offsets moved');
      assert.deepEqual(s.producer().expiredCalls, [], 'no call reached an expired transaction');
      assertWholeInputs(s, fiveEach);
      await s.consumer.close();
    });

    it('aborts the open transaction when a partition is lost while one of its messages is partly in it', async () => {
      let lost = false;
      const q = queueFullOn('0:0:2', () => !lost);
      const s = setup(
        { queueFull: q.queueFull },
        { drainTimeoutMs: 2000 },
        { protocol: 'COOPERATIVE' },
      );
      run(s, five, { maxMs: 5 });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 1);
      s.fake().produce(T, 1, 3);
      s.fake().rebalanceAssign([tp(0), tp(1)]);
      await until(() => q.refusals() >= 1, 'input 0 of partition 0 partly written');
      s.fake().rebalanceRevoke([tp(0)], { lost: true });
      await until(() => s.events.some((e) => e.type === 'lost'), 'lost');
      lost = true;
      await until(() => committed(s, 1) === 3, 'partition 1 committed');
      assert.deepEqual(
        values(s.producer().committed).filter((v) => v.startsWith('0:')),
        [],
        'nothing of the lost partition’s message visible',
      );
      assertWholeInputs(s, fiveEach);
      assertExactlyOnce(s, { 1: 3 }, fiveEach);
      await s.consumer.close();
    });
  });

  describe('commitTransaction timing out (librdkafka goes on with it in the background)', () => {
    /** The first two commit calls time out after their whole timeout; the broker commits during the second. */
    const timesOutTwice = (op: string, n: number) =>
      op === 'commit' && n <= 2
        ? { code: -185, retriable: true, afterTimeout: true, committedMeanwhile: n === 2 }
        : undefined;

    it('calls commitTransaction again until the transaction’s deadline, never aborts it, and counts the commit the broker made', async () => {
      // At commitTimeoutMs 100 the two timeouts outlast twice commitTimeoutMs.
      const s = setup({ plan: timesOutTwice }, { commitTimeoutMs: 100 });
      const r = run(s, fanOut, { maxMessages: 5, maxMs: 5000 });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 5);
      s.fake().rebalanceAssign([tp(0)]);
      await until(
        () => s.consumer.metrics().transactions?.committed === 1 || r.error() !== undefined,
        'the commit confirmed',
      );
      assert.equal(r.error(), undefined, String(r.error()));
      const calls = s.producer().calls;
      assert.equal(calls.filter((c) => c === 'commit').length, 3, 'resumed twice');
      assert.ok(!calls.includes('abort'), 'never aborted');
      const done = s.producer().transactions.filter((t) => t.outcome === 'committed');
      assert.equal(done.length, 1, 'one transaction committed, once');
      assert.equal(committed(s, 0), 5);
      const m = s.consumer.metrics().transactions!;
      assert.deepEqual(
        { committed: m.committed, aborted: m.aborted, messages: m.messages },
        { committed: 1, aborted: 0, messages: 5 },
      );
      assertExactlyOnce(s, { 0: 5 });
      await s.consumer.close();
    });

    it('on a revoke, resumes a commitTransaction that timed out past the revoke’s deadline and reports the transaction committed', async () => {
      const s = setup({ plan: timesOutTwice }, { commitTimeoutMs: 100, drainTimeoutMs: 300 });
      const r = run(s, fanOut, { maxMs: 5000, maxMessages: 1000 });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 4);
      s.fake().rebalanceAssign([tp(0)]);
      await until(
        () => s.producer().transactions[0]?.records.length === expectedFor(0, 4).length,
        '0..3 in the transaction',
      );
      s.fake().rebalanceRevoke([tp(0)]);
      await until(
        () => s.events.some((e) => e.type === 'revoked') || r.error() !== undefined,
        'revoked',
      );
      assert.equal(r.error(), undefined, String(r.error()));
      const ev = s.events.find((e) => e.type === 'committed');
      assert.ok(ev?.type === 'committed');
      assert.deepEqual(ev.results, [{ topic: T, partition: 0, status: 'committed', offset: 4 }]);
      assert.equal(ev.transaction?.outcome, 'committed');
      assert.ok(!s.producer().calls.includes('abort'), 'never aborted');
      assert.equal(s.producer().transactions.filter((t) => t.outcome === 'committed').length, 1);
      assertExactlyOnce(s, { 0: 4 });
      await s.consumer.close();
    });

    it('aborts when sendOffsetsToTransaction times out (it cannot be resumed), and redoes the work', async () => {
      // librdkafka makes a TxnOffsetCommit that timed out an abortable error.
      const s = setup(
        {
          plan: (op, n) =>
            op === 'send' && n === 1
              ? { code: -185, abortable: true, afterTimeout: true }
              : undefined,
        },
        { commitTimeoutMs: 100 },
      );
      run(s, fanOut, { maxMessages: 3, maxMs: 5000 });
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 6);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(s, 0) === 6, 'offset at the end');
      const calls = s.producer().calls;
      const send = calls.indexOf('send');
      assert.equal(calls[send + 1], 'abort', `aborted right after the send (${calls.join(' ')})`);
      assert.equal(s.consumer.metrics().transactions?.aborted, 1);
      assertExactlyOnce(s, { 0: 6 });
      assertOffsetsCarryRecords(s);
      await s.consumer.close();
    });
  });

  it('aborts instead of committing when the partition was lost and assigned again while the offsets were being sent', async () => {
    // node-rdkafka reads the consumer's group metadata when its worker runs: offsets sent before a
    // rebalance can go to the broker under the new generation.
    const s = setup({}, { drainTimeoutMs: 2000 });
    run(s, fanOut, { maxMessages: 5, maxMs: 5000 });
    s.producer().holdOffsets = true;
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.producer().heldOffsets === 1, 'the offsets being sent');
    s.fake().rebalanceRevoke([tp(0)], { lost: true });
    await until(() => s.events.some((e) => e.type === 'lost'), 'lost');
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => s.events.filter((e) => e.type === 'assigned').length === 2, 'assigned again');
    s.producer().releaseOffsets();
    await until(() => committed(s, 0) === 5, 'the new stream’s redo committed');
    assert.equal(
      s.producer().transactions[0]?.outcome,
      'aborted',
      'the transaction with the old stream’s offsets aborted',
    );
    assertExactlyOnce(s, { 0: 5 });
    assertOffsetsCarryRecords(s);
    await s.consumer.close();
  });

  it('reports transactions in metrics()', async () => {
    const s = setup();
    run(s, fanOut);
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 6);
    s.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(s, 0) === 6, 'offset at the end');
    const t = s.consumer.metrics().transactions!;
    assert.equal(t.transactionalId, 'tx-1');
    assert.equal(t.messages, 6);
    assert.equal(t.records, expectedFor(0, 6).length);
    assert.equal(t.aborted, 0);
    assert.ok(t.duration.count >= 1);
    assert.equal(s.consumer.metrics().commits.failed, 0);
    await s.consumer.close();
  });

  describe('settings', () => {
    const h = () => harness();
    const refuses = (options: TransactionalOptions, key: string, consumer = h()) =>
      assert.throws(
        () => consumer.consumer.processTransactional(() => [], options),
        (e: unknown) => e instanceof ConfigError && e.key === key,
      );

    it('refuses what contradicts exactly once', () => {
      refuses({ deadLetter: { topic: 'dlq' } } as never, 'deadLetter');
      refuses({ onFailure: 'dead-letter' } as never, 'onFailure');
      refuses(
        { producerConfig: { 'enable.idempotence': false } },
        'producerConfig.enable.idempotence',
      );
      refuses({ producerConfig: { acks: 1 } }, 'producerConfig.acks');
      refuses({ producerConfig: { dr_cb: true } }, 'producerConfig.dr_cb');
      refuses(
        { producerConfig: { 'transaction.timeout.ms': 1000 } },
        'producerConfig.transaction.timeout.ms',
      );
      refuses({ maxMessages: 0 }, 'maxMessages');
      refuses({ maxMs: 1.5 }, 'maxMs');
      refuses({ transactionalId: '' }, 'transactionalId');
      refuses(
        { transactionalId: 'a', producerConfig: { 'transactional.id': 'b' } },
        'transactionalId',
      );
      refuses(
        {},
        'isolation.level',
        harness({ config: { 'isolation.level': 'read_uncommitted' } as never }),
      );
      refuses(
        {},
        'rememberCompleted',
        harness({ rememberCompleted: { topic: 'memo' } } as Partial<ReactiveConsumerOptions>),
      );
      assert.throws(() => h().consumer.processTransactional(42 as never), ConfigError);
    });

    it('derives a stable transactional.id from the prefix (default: group.id) and the instance id', async () => {
      const ids: string[] = [];
      for (const [options, config] of [
        [{ transactionalIdPrefix: 'etl', instanceId: 'pod-3' }, {}],
        [{}, { 'group.instance.id': 'worker-7' }],
      ] as const) {
        const s = setup({}, { config: config as never });
        subs.push(s.consumer.processTransactional(() => [], options).subscribe());
        await until(() => s.fake().isConnected(), 'connect');
        ids.push(String(s.producer().config['transactional.id']));
        await s.consumer.close();
      }
      assert.deepEqual(ids, ['etl-pod-3', 'g-worker-7']);
      assert.equal(TRANSACTIONAL_DEFAULTS.maxMessages, 500);
    });
  });
});
