import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { ErrorCode, NotAssignedError, StartPositionError } from '../lib';
import type {
  AssignedPartition,
  KafkaMessage,
  ReactiveConsumerOptions,
  StartPosition,
} from '../lib';
import { T, committed, gate, harness, tp, until } from './helpers/harness';
import type { Harness } from './helpers/harness';

describe('start positions (onAssign hook)', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  async function startAt(
    position: (
      p: AssignedPartition,
    ) => StartPosition | undefined | Promise<StartPosition | undefined>,
    prepare: (h: ReturnType<typeof harness>) => void = () => undefined,
  ) {
    const seenHook: AssignedPartition[] = [];
    const h = harness({
      onAssign: (p) => {
        seenHook.push(p);
        return position(p);
      },
    });
    const seen: number[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 20);
    prepare(h);
    h.fake().rebalanceAssign([tp(0)]);
    return { h, seen, seenHook };
  }

  it('puts an explicit offset into the assign call itself', async () => {
    const { h, seen, seenHook } = await startAt(() => ({ offset: 15 }));
    await until(() => seen.length === 5, 'five messages');
    assert.deepEqual(seen, [15, 16, 17, 18, 19]);
    assert.ok(h.fake().ops().includes(`assign(${T}[0])`));
    const assign = h.fake().calls.find((c) => c.op === 'assign');
    assert.ok(assign);
    assert.deepEqual(seenHook, [{ topic: T, partition: 0, committed: undefined, generation: 1 }]);
    await h.consumer.close();
    assert.equal(committed(h), 20);
  });

  it('resolves earliest, latest and a timestamp to offsets', async () => {
    for (const [position, first] of [
      ['earliest', 0],
      ['latest', undefined],
      [{ timestamp: 1000 + 12 }, 12],
    ] as const) {
      const { h, seen } = await startAt(
        () => position,
        (hh) => {
          const log = (hh.fake() as unknown as { logs: Map<string, KafkaMessage[]> }).logs.get(
            `${T}[0]`,
          );
          log?.forEach((m) => Object.assign(m, { timestamp: 1000 + m.offset }));
        },
      );
      if (first === undefined) {
        // latest: nothing is read; the start (the end offset) is committed at close.
        await until(() => h.events.some((e) => e.type === 'assigned'), 'assigned');
        await h.consumer.close();
        assert.deepEqual(seen, [], 'latest');
        assert.equal(committed(h), 20, 'latest start committed');
      } else {
        await until(() => seen.length === 20 - first, `${JSON.stringify(position)}`);
        assert.equal(seen[0], first);
        await h.consumer.close();
      }
    }
  });

  it('keeps the committed offset for undefined and "committed", and tells the hook what it is', async () => {
    const { h, seen, seenHook } = await startAt(
      async () => {
        await new Promise((r) => setTimeout(r, 5));
        return undefined;
      },
      (hh) => hh.fake().commits.set(`${T}[0]`, 7),
    );
    await until(() => seen.length === 13, 'from the committed offset');
    assert.equal(seen[0], 7);
    assert.equal(seenHook[0]?.committed, 7);
    await h.consumer.close();
  });

  it('ends with a StartPositionError when the hook never answers, after answering the assignment', async () => {
    const h = harness({
      commitTimeoutMs: 50,
      onAssign: () => new Promise<undefined>(() => undefined),
    });
    let error: unknown;
    subs.push(h.consumer.process(() => undefined).subscribe({ error: (e) => (error = e) }));
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => error !== undefined, 'the pipeline to error');
    assert.ok(error instanceof StartPositionError, String(error));
    assert.match(error.message, /within 100 ms/);
    assert.ok(h.fake().ops().includes(`assign(${T}[0])`));
  });

  it('ends the consumer with a StartPositionError when the hook throws or answers nonsense', async () => {
    for (const hook of [
      () => {
        throw new Error('lookup failed');
      },
      () => ({ offset: -3 }) as StartPosition,
    ]) {
      const h = harness({ onAssign: hook });
      let error: unknown;
      subs.push(h.consumer.process(() => undefined).subscribe({ error: (e) => (error = e) }));
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => error !== undefined, 'the pipeline to error');
      assert.ok(error instanceof StartPositionError, String(error));
      assert.equal(error.code, ErrorCode.StartPosition);
      assert.deepEqual(error.coordinates, { topic: T, partition: 0 });
      // The assignment was answered before closing (librdkafka waits for it).
      assert.ok(h.fake().ops().includes(`assign(${T}[0])`));
    }
  });
});

describe('seek while running', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('replays from an earlier offset: buffered messages dropped, ledger reset, order kept', async () => {
    const h = harness({ commitIntervalMs: 5 });
    const seen: number[] = [];
    subs.push(
      h.consumer
        .process((m) => {
          seen.push(m.offset);
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 10, 'first pass committed');
    const offset = await h.consumer.seek(tp(0), { offset: 4 });
    assert.equal(offset, 4);
    await until(() => seen.length === 16, 'replayed 4..9');
    assert.deepEqual(seen.slice(10), [4, 5, 6, 7, 8, 9]);
    await until(() => committed(h) === 10, 'committed again after the replay');
    assert.ok(h.fake().ops().includes(`seek(${T}[0]@4)`));
    await h.consumer.close();
  });

  // Neither may be refused as "revoked", and a first seek that needs a lookup ('earliest') must
  // not be overtaken by a later plain offset.
  for (const [first, firstOffset] of [
    [{ offset: 2 }, 2],
    ['earliest', 0],
  ] as const) {
    it(`two seeks of one partition at once both apply, in call order (${JSON.stringify(first)} then 6)`, async () => {
      const h = harness({ commitIntervalMs: 5 });
      const seen: number[] = [];
      subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 10);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(h) === 10, 'first pass committed');
      const results = await Promise.allSettled([
        h.consumer.seek(tp(0), first),
        h.consumer.seek(tp(0), { offset: 6 }),
      ]);
      assert.deepEqual(
        results.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason))),
        [firstOffset, 6],
      );
      const seeks = h
        .fake()
        .ops()
        .filter((o) => o.startsWith('seek('));
      assert.deepEqual(
        seeks.slice(-2),
        [`seek(${T}[0]@${firstOffset})`, `seek(${T}[0]@6)`],
        'in call order',
      );
      await until(() => seen.length === 14, 'replayed 6..9');
      assert.deepEqual(seen.slice(10), [6, 7, 8, 9], 'the later seek wins');
      await until(() => committed(h) === 10, 'committed again');
      await h.consumer.close();
    });
  }

  it('aborts in-flight work of the old position and never commits it', async () => {
    const h = harness({ commitIntervalMs: 5 });
    let stuckSignal: AbortSignal | undefined;
    let release!: () => void;
    const seen: number[] = [];
    subs.push(
      h.consumer
        .process(
          (m) => {
            seen.push(m.offset);
            if (m.offset === 2 && !stuckSignal) {
              stuckSignal = m.signal;
              return new Promise<void>((r) => (release = r));
            }
            return undefined;
          },
          { partitionConcurrency: 4 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 10);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 2, 'committed up to the stuck message');
    await h.consumer.seek(tp(0), { offset: 8 });
    assert.equal(stuckSignal?.aborted, true);
    release();
    await until(() => committed(h) === 10, 'committed from the new position');
    const after = seen.slice(seen.lastIndexOf(8));
    assert.deepEqual(after, [8, 9]);
    await h.consumer.close();
  });

  it('takes a seek whose reply timed out as applied: librdkafka queued it before waiting', async () => {
    const h = harness({ commitIntervalMs: 5 }, { seekTimesOut: true });
    const seen: number[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 6);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 6, 'first pass committed');
    assert.equal(await h.consumer.seek(tp(0), { offset: 2 }), 2);
    await until(() => seen.length === 10, 'replayed 2..5');
    assert.deepEqual(seen.slice(6), [2, 3, 4, 5]);
    await until(() => committed(h) === 6, 'committed again after the replay');
    await h.consumer.close();
  });

  it('leaves the stream untouched when the native seek fails', async () => {
    const h = harness({}, { seekError: 'Local: Erroneous state' });
    const seen: number[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 5, 'first five');
    await assert.rejects(h.consumer.seek(tp(0), { offset: 1 }), /Erroneous state/);
    h.fake().produce(T, 0, 3);
    await until(() => seen.length === 8, 'the same stream goes on');
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7]);
    await until(() => committed(h) === 8, 'committed');
    await h.consumer.close();
  });

  it('holds a revoke until handlers aborted by a seek have finished', async () => {
    const h = harness();
    let release!: () => void;
    let stuck = 0;
    subs.push(
      h.consumer
        .process((m) => {
          if (m.offset === 2 && stuck++ === 0) return new Promise<void>((r) => (release = r)); // ignores its signal
          return undefined;
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 6);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => stuck === 1, 'stuck on 2');
    await h.consumer.seek(tp(0), { offset: 4 });
    await until(() => committed(h) === 6, 'the new stream processed 4 and 5');
    h.fake().rebalanceRevoke([tp(0)]);
    await new Promise((r) => setTimeout(r, 30));
    assert.ok(!h.events.some((e) => e.type === 'revoked'), 'the aborted handler still runs');
    release();
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked once it finished');
    await h.consumer.close();
  });

  it('rejects a seek of a partition it does not own with NotAssignedError', async () => {
    const h = harness();
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await assert.rejects(h.consumer.seek(tp(3), 'earliest'), (e: unknown) => {
      assert.ok(e instanceof NotAssignedError);
      assert.equal(e.code, ErrorCode.NotAssigned);
      return true;
    });
    await h.consumer.close();
  });

  it('keeps the revoke protocol when a rebalance hits right after a seek', async () => {
    const h = harness();
    const seen: number[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 6);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 6, 'all read');
    const seek = h.consumer.seek(tp(0), { offset: 2 });
    h.fake().rebalanceRevoke([tp(0)]);
    await seek.catch(() => undefined);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    const ops = h.fake().ops();
    assert.ok(
      ops.lastIndexOf(`commit(${T}[0]@${committed(h) ?? -1})`) < ops.lastIndexOf('unassign'),
    );
    // The final commit is the seek position or what was processed after it, never past unprocessed work.
    assert.ok((committed(h) ?? 0) >= 2 && (committed(h) ?? 0) <= 6, String(committed(h)));
    await h.consumer.close();
  });
});

describe('pause and resume by the application', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('stays paused when backpressure lifts, and stays paused for backpressure when the user resumes', async () => {
    const h = harness({ maxBufferedMessages: 4, resumeThreshold: 0.5, consumeBatchSize: 2 });
    const pending: (() => void)[] = [];
    let started = 0;
    subs.push(
      h.consumer
        .process(
          () => {
            started += 1;
            return new Promise<void>((r) => pending.push(r));
          },
          { partitionConcurrency: 8 },
        )
        .subscribe(),
    );
    const delivered = () => 20 - h.fake().remaining(T, 0);
    /** Lets every delivered message finish. */
    const finishDelivered = () =>
      until(() => {
        pending.splice(0).forEach((r) => r());
        return started === delivered() && pending.length === 0;
      }, 'delivered messages to finish');
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 20);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().isPaused(T, 0), 'backpressure pause');
    h.consumer.pause([tp(0)]);
    await finishDelivered();
    const before = delivered();
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(h.fake().isPaused(T, 0), 'user pause holds after the buffer drained');
    assert.equal(delivered(), before, 'nothing fetched while paused by the user');
    assert.deepEqual(h.consumer.paused(), [tp(0)]);
    h.consumer.resume([tp(0)]);
    await until(() => delivered() > before, 'fetching again');
    await until(() => h.fake().isPaused(T, 0) || delivered() === 20, 'backpressure pause again');
    if (delivered() < 20) {
      h.consumer.resume(); // a user resume while backpressure holds it: stays paused
      assert.ok(h.fake().isPaused(T, 0));
    }
    await until(() => {
      pending.splice(0).forEach((r) => r());
      return delivered() === 20 && started === 20;
    }, 'everything once backpressure lifts');
    await h.consumer.close();
  });

  /** A consumer whose first `lost` pause() calls librdkafka drops; `seen` lists what it processed. */
  async function droppingPauses(lost: number, options: Partial<ReactiveConsumerOptions> = {}) {
    const h = harness(options, { losePauses: lost });
    const seen: number[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    return { h, seen };
  }

  /** Waits until partition 0's fetch position was moved back to `offset` (at least `times` times). */
  const movedBack = (h: Harness, offset: number, times = 1): Promise<void> =>
    until(
      () => calls(h, `seek(${T}[0]@${offset})`) >= times,
      `the position moved back to ${offset}`,
    );

  /** How many times the fake saw exactly this call. */
  function calls(h: Harness, op: string): number {
    return h
      .fake()
      .ops()
      .filter((o) => o === op).length;
  }

  it('delivers nothing of a paused partition when librdkafka dropped the pause, and all of it once after resume()', async () => {
    const { h, seen } = await droppingPauses(1);
    h.fake().produce(T, 0, 5);
    h.consumer.pause();
    h.fake().rebalanceAssign([tp(0)]);
    // The pause of the new assignment is lost: the fake hands out the records all the same, and
    // the consumer holds them back, pauses again and moves the position back to the first.
    await until(() => h.fake().isPaused(T, 0), 'paused again');
    await movedBack(h, 0);
    assert.deepEqual(seen, [], 'nothing delivered while paused');
    assert.equal(committed(h), undefined, 'nothing committed while paused');
    h.consumer.resume();
    await until(() => seen.length === 5, 'everything after resume()');
    await until(() => committed(h) === 5, 'committed to the end');
    await h.consumer.close();
    assert.deepEqual(seen, [0, 1, 2, 3, 4], 'each record once, in order');
  });

  it('positions() names the next offset to read while held-back records wait to be fetched again, not the offset to commit', async () => {
    const h = harness({ consumeBatchSize: 5 }, { losePauses: 1 });
    const seen: number[] = [];
    const slow = gate();
    subs.push(
      h.consumer
        .process(
          (m) => {
            seen.push(m.offset);
            return m.offset >= 2 && m.offset < 5 ? slow.promise : undefined;
          },
          { partitionConcurrency: 4 },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0)]);
    h.fake().produce(T, 0, 5);
    await until(() => seen.length === 5, 'offsets 0..4 delivered, 2..4 running');
    h.consumer.pause([tp(0)]); // dropped by librdkafka
    h.fake().produce(T, 0, 5);
    await movedBack(h, 5);
    // Not 2 (the offset to commit): the next record read is 5.
    assert.deepEqual(h.consumer.positions(), [{ topic: T, partition: 0, offset: 5 }]);
    slow.open();
    h.consumer.resume([tp(0)]);
    await until(() => seen.length === 10, 'the rest after resume()');
    await until(
      () => h.consumer.positions()[0]?.offset === 10,
      "librdkafka's position once the rewind ended",
    );
    await h.consumer.close();
  });

  it('holds back what arrives after a pause() librdkafka dropped while running, and goes on from there after resume()', async () => {
    const { h, seen } = await droppingPauses(1, { consumeBatchSize: 2 });
    h.fake().rebalanceAssign([tp(0)]);
    h.fake().produce(T, 0, 4);
    await until(() => seen.length === 4, 'the first records');
    h.consumer.pause([tp(0)]); // lost
    h.fake().produce(T, 0, 6);
    await until(() => h.fake().isPaused(T, 0), 'paused again');
    await movedBack(h, 4);
    assert.deepEqual(seen, [0, 1, 2, 3], 'nothing delivered after pause()');
    h.consumer.resume([tp(0)]);
    await until(() => seen.length === 10, 'the rest after resume()');
    await until(() => committed(h) === 10, 'committed to the end');
    await h.consumer.close();
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 'each record once, in order');
  });

  it('pauses again when records keep coming after the position was moved back (a second pause dropped)', async () => {
    const { h, seen } = await droppingPauses(2, { consumeBatchSize: 2 });
    h.fake().produce(T, 0, 6);
    h.consumer.pause();
    h.fake().rebalanceAssign([tp(0)]);
    // The assignment's pause and the first pause asked again are both lost: records keep coming
    // after the seek back, so the consumer pauses a third time (that one holds).
    await until(() => calls(h, `pause(${T}[0])`) >= 3, 'paused a third time');
    await until(() => h.fake().isPaused(T, 0), 'paused at last');
    await movedBack(h, 0, 2);
    assert.deepEqual(seen, [], 'nothing delivered while paused');
    h.consumer.resume();
    await until(() => seen.length === 6, 'everything after resume()');
    await until(() => committed(h) === 6, 'committed to the end');
    await h.consumer.close();
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5], 'each record once, in order');
  });

  it('a pause() from inside a handler that librdkafka drops, then a revoke while the position is moved back: the final commit stops at what ran, the next assignment gets the rest', async () => {
    const h = harness({ consumeBatchSize: 2 }, { losePauses: 1 });
    const seen: number[] = [];
    subs.push(
      h.consumer
        .process((m) => {
          seen.push(m.offset);
          if (m.offset === 1) h.consumer.pause([tp(0)]); // lost
        })
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 8);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().isPaused(T, 0), 'paused again');
    const ran = seen.length;
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    assert.equal(committed(h), ran, 'the final commit is what ran, not what was held back');
    h.consumer.resume();
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 8, 'the rest after the next assignment');
    await h.consumer.close();
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7], 'each record once, in order');
  });

  it('goes on after resume() when the first record held back no longer exists (deleted while paused)', async () => {
    const { h, seen } = await droppingPauses(1);
    h.fake().produce(T, 0, 6);
    h.consumer.pause();
    h.fake().rebalanceAssign([tp(0)]);
    await movedBack(h, 0);
    // Retention removed 0 and 1 meanwhile: librdkafka's fetch resets to the first one left.
    h.fake().seek({ topic: T, partition: 0, offset: 2 }, 0, () => undefined);
    h.consumer.resume();
    await until(() => seen.length === 4, 'the records left, after resume()');
    assert.deepEqual(seen, [2, 3, 4, 5]);
    await h.consumer.close();
  });

  it('pauses every partition and later assignments with pause(), across rebalances', async () => {
    const h = harness();
    const seen: string[] = [];
    subs.push(h.consumer.process((m) => void seen.push(`${m.partition}@${m.offset}`)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().produce(T, 1, 3);
    h.consumer.pause();
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'assigned'), 'assigned');
    assert.ok(h.fake().isPaused(T, 0), 'a new assignment starts paused');
    h.fake().rebalanceRevoke([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => h.events.filter((e) => e.type === 'assigned').length === 2, 'reassigned');
    assert.ok(h.fake().isPaused(T, 0) && h.fake().isPaused(T, 1), 'still paused after a rebalance');
    assert.equal(seen.length, 0);
    h.consumer.resume([tp(1)]);
    await until(() => seen.length === 3, 'partition 1 only');
    assert.ok(seen.every((s) => s.startsWith('1@')));
    h.consumer.resume();
    await until(() => seen.length === 6, 'both');
    await h.consumer.close();
  });

  it('a partition resumed by name after pause() of everything stays resumed when it is assigned again', async () => {
    const h = harness();
    const seen: string[] = [];
    subs.push(h.consumer.process((m) => void seen.push(`${m.partition}@${m.offset}`)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0), tp(1)]);
    await until(() => h.events.some((e) => e.type === 'assigned'), 'assigned');
    h.consumer.pause();
    h.consumer.resume([tp(0)]);
    assert.deepEqual(h.consumer.paused(), [tp(1)]);
    h.fake().rebalanceRevoke([tp(0), tp(1)]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    h.fake().rebalanceAssign([tp(0), tp(1), tp(2)]);
    await until(() => h.events.filter((e) => e.type === 'assigned').length === 2, 'reassigned');
    assert.deepEqual(
      h.consumer.paused().sort((a, b) => a.partition - b.partition),
      [tp(1), tp(2)],
      'p0 was resumed by name; p1 and the new p2 fall under pause()',
    );
    assert.ok(!h.fake().isPaused(T, 0), 'p0 fetches');
    h.fake().produce(T, 0, 3);
    h.fake().produce(T, 1, 3);
    await until(() => seen.length === 3, "p0's records");
    assert.ok(seen.every((s) => s.startsWith('0@')));
    // A second pause() of everything takes p0 in again.
    h.consumer.pause();
    h.fake().rebalanceRevoke([tp(0), tp(1), tp(2)]);
    await until(() => h.events.filter((e) => e.type === 'revoked').length === 2, 'revoked again');
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.events.filter((e) => e.type === 'assigned').length === 3, 'assigned again');
    assert.ok(h.fake().isPaused(T, 0), 'paused by the second pause()');
    await h.consumer.close();
  });
});
