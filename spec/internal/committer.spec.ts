import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import { Committer } from '../../lib/internal/commit/committer';
import { Conditions } from '../../lib/internal/loop/wait-conditions';
import { NO_OBSERVER } from '../../lib/internal/observe/engine-observer';
import { PartitionLoggers } from '../../lib/internal/observe/partition-loggers';
import { PartitionControl } from '../../lib/internal/partition/partition-control';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import type { CommitPlan, FakeOptions } from '../fakes/fake-consumer';
import { waitFor } from '../../lib/testing/wait';
import { clientOverFake } from '../helpers/client';

const E = Kafka.CODES.ERRORS;
const T = 'orders';

/** A committer over a ConsumerClient over the fake, with a poll loop serving commit results. */
function setup(fakeOptions: FakeOptions = {}, commitTimeoutMs = 200, lateCommitWindowMs = 5000) {
  const { client, fake, settings, logger } = clientOverFake(
    { commitIntervalMs: 1, commitTimeoutMs, lateCommitWindowMs },
    fakeOptions,
  );
  const conditions = new Conditions();
  client.onAnswered = () => conditions.changed();
  const committer = new Committer(client, settings, logger, undefined, {
    conditions,
    loggers: new PartitionLoggers(logger),
    progressed: () => undefined,
    hopeless: () => false,
    observer: () => NO_OBSERVER,
  });
  let polling = true;
  const poll = async (): Promise<void> => {
    while (polling) await client.consume(10, 1);
  };
  const loop = poll();
  const control = (partition: number, done: number): PartitionControl => {
    const c = new PartitionControl(T, partition, 1, tpKey(T, partition), () => undefined);
    for (let o = 0; o < done; o++) {
      c.ledger.deliver(o);
      c.ledger.complete(o);
    }
    return c;
  };
  const stop = async (): Promise<void> => {
    polling = false;
    await loop;
  };
  return { committer, client, fake, control, stop, conditions };
}

/** The commit requests the library sent, in order. */
const commitsSent = (s: { fake: () => { ops(): string[] } }): string[] =>
  s
    .fake()
    .ops()
    .filter((o) => o.startsWith('commit('));

describe('Committer', () => {
  it('confirms a final commit and records exactly the offset the broker confirmed', async () => {
    const s = setup();
    const c = s.control(0, 3);
    const [result] = await s.committer.commitFinal([c], Date.now() + 2000);
    assert.deepEqual(result, { topic: T, partition: 0, status: 'committed', offset: 3 });
    assert.equal(c.lastCommitted, 3);
    assert.equal(s.fake().commits.get(`${T}[0]`), 3);
    await s.stop();
  });

  it('reports an unchanged final offset without sending it again', async () => {
    const s = setup();
    const c = s.control(0, 3);
    c.confirmCommitted(3);
    const [result] = await s.committer.commitFinal([c], Date.now() + 2000);
    assert.equal(result?.status, 'unchanged');
    assert.deepEqual(commitsSent(s), []);
    await s.stop();
  });

  it('retries STALE_MEMBER_EPOCH and coordinator errors until the broker confirms', async () => {
    const refusals = [E.ERR_STALE_MEMBER_EPOCH, E.ERR_NOT_COORDINATOR, E.ERR__WAIT_COORD];
    const s = setup({ commitResult: () => refusals.shift() });
    const c = s.control(0, 4);
    const [result] = await s.committer.commitFinal([c], Date.now() + 5000);
    assert.equal(result?.status, 'committed');
    assert.equal(refusals.length, 0);
    assert.equal(commitsSent(s).length, 4);
    await s.stop();
  });

  it('reports an ownership-loss refusal as lost and does not retry it', async () => {
    const s = setup({ commitResult: () => E.ERR_UNKNOWN_MEMBER_ID });
    const c = s.control(0, 2);
    const [result] = await s.committer.commitFinal([c], Date.now() + 2000);
    assert.equal(result?.status, 'lost');
    assert.equal(commitsSent(s).length, 1);
    assert.equal(c.lastCommitted, undefined);
    await s.stop();
  });

  it('does not send a final commit that an earlier, unanswered commit of another offset could overtake', async () => {
    // The periodic commit of 2 is answered only after 10 000 polls: far past the deadline.
    const s = setup({ commitPolls: (o) => (o[0]?.offset === 2 ? 10_000 : undefined) }, 50);
    const c = s.control(0, 2);
    s.committer.maybeCommit([c], () => true);
    await new Promise((r) => setTimeout(r, 120)); // the periodic commit's wait times out
    for (let o = 2; o < 5; o++) {
      c.ledger.deliver(o);
      c.ledger.complete(o);
    }
    const [result] = await s.committer.commitFinal([c], Date.now() + 300);
    assert.equal(result?.status, 'failed', JSON.stringify(result));
    assert.match((result as { reason: string }).reason, /still unanswered/);
    assert.deepEqual(commitsSent(s), [`commit(${T}[0]@2)`], 'the final offset was never sent');
    await s.stop();
  });

  describe('a final commit librdkafka still holds at the deadline (the coordinator unreachable)', () => {
    const running: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const stop of running.splice(0)) await stop();
    });

    /** A member whose first commit librdkafka holds until the spec releases it. */
    function holding(plan: CommitPlan = { polls: 1, held: true }) {
      let first = true;
      const s = setup(
        {
          member: true,
          commitPlan: () => {
            const held = first;
            first = false;
            return held ? plan : { polls: 1 };
          },
        },
        50,
      );
      (s.fake() as unknown as { connected: boolean }).connected = true;
      running.push(s.stop);
      return s;
    }

    it('holds the partitions past the deadline until it is answered, and counts it applied late as committed', async () => {
      const s = holding();
      const c = s.control(0, 3);
      const deadline = Date.now() + 500; // room for several 50 ms attempts
      const holdBy = Date.now() + 10_000;
      let settled = false;
      const final = s.committer
        .commitFinal([c], deadline, () => holdBy)
        .finally(() => {
          settled = true;
        });
      // Past the deadline: the attempts timed out here, librdkafka still holds the first one (the
      // later ones wait behind it on the coordinator connection).
      await waitFor(() => Date.now() > deadline + 100, { what: 'the deadline to pass' });
      assert.equal(settled, false, 'released while librdkafka still held the commit');
      assert.equal(s.fake().commits.get(`${T}[0]`), undefined);
      // One request: librdkafka retries and defers it itself; another would queue a second copy
      // that could land after the partition changed hands.
      assert.equal(commitsSent(s).length, 1);
      s.fake().releaseHeld(); // the coordinator is back: the broker applies it
      const [result] = await final;
      assert.deepEqual(result, { topic: T, partition: 0, status: 'committed', offset: 3 });
      assert.equal(c.lastCommitted, 3);
      assert.equal(s.fake().commits.get(`${T}[0]`), 3, 'what Kafka holds');
      assert.ok(Date.now() < holdBy);
      await s.stop();
    });

    it('reports a held final commit refused late for ownership (the member was fenced meanwhile) as lost', async () => {
      const s = holding({
        polls: 1,
        held: true,
        error: Kafka.CODES.ERRORS.ERR_UNKNOWN_MEMBER_ID,
      });
      const c = s.control(0, 3);
      const deadline = Date.now() + 300;
      const final = s.committer.commitFinal([c], deadline, () => Date.now() + 10_000);
      await waitFor(() => Date.now() > deadline + 50, { what: 'the deadline to pass' });
      s.fake().releaseHeld(); // answered at last: refused
      const [result] = await final;
      assert.equal(result?.status, 'lost', JSON.stringify(result));
      // Reported, not applied: the partition lifecycle fences what the results say is lost.
      assert.equal(c.state, 'active');
      assert.equal(s.fake().commits.get(`${T}[0]`), undefined, 'nothing committed');
      assert.equal(
        commitsSent(s).length,
        1,
        'not sent again: the member no longer owns the partition',
      );
      await s.stop();
    });

    it('holds them while an earlier commit of the same offset is still held, even once the final one is confirmed', async () => {
      // The periodic commit of 3 waits in librdkafka (the final one, of the same offset, is sent
      // past it and confirmed): handed over now, the periodic copy could land after the next
      // owner's commits.
      const s = holding({ polls: 1, held: true, overtaken: true });
      const c = s.control(0, 3);
      s.committer.maybeCommit([c], () => true);
      await waitFor(() => !s.committer.periodicInFlight, { what: 'the periodic wait to time out' });
      const deadline = Date.now() + 150;
      let settled = false;
      const final = s.committer
        .commitFinal([c], deadline, () => Date.now() + 10_000)
        .finally(() => {
          settled = true;
        });
      await waitFor(() => Date.now() > deadline + 100, { what: 'the deadline to pass' });
      assert.equal(s.fake().commits.get(`${T}[0]`), 3, 'the final commit was applied');
      assert.equal(settled, false, 'released while the periodic copy was still held');
      s.fake().releaseHeld();
      const [result] = await final;
      assert.deepEqual(result, { topic: T, partition: 0, status: 'committed', offset: 3 });
      await s.stop();
    });

    it('sends no attempt past the hold bound when a close brings it before the deadline', async () => {
      let holdBy = Date.now() + 10_000;
      const sentAfterHold: number[] = [];
      const s = setup({
        member: true,
        commitPlan: () => {
          if (Date.now() > holdBy) {
            sentAfterHold.push(Date.now());
            return { polls: 1, held: true }; // the coordinator went away meanwhile
          }
          return { polls: 1, error: E.ERR_COORDINATOR_NOT_AVAILABLE };
        },
      });
      (s.fake() as unknown as { connected: boolean }).connected = true;
      running.push(s.stop);
      const c = s.control(0, 3);
      const startedAt = Date.now();
      const final = s.committer.commitFinal([c], Date.now() + 1500, () =>
        Math.max(Date.now(), holdBy),
      );
      await waitFor(() => Date.now() > startedAt + 200, { what: 'a few refused attempts' });
      holdBy = Date.now() + 50; // close(): the revoke must end by then
      s.conditions.changed();
      const [result] = await final;
      assert.equal(result?.status, 'failed');
      assert.deepEqual(sentAfterHold, [], 'an attempt was sent after the hold bound');
      assert.deepEqual(s.client.unanswered(T, 0), [], 'returned with a commit held');
      await s.stop();
    });

    it('releases them as failed at the hold deadline when it is never answered', async () => {
      const s = holding();
      const c = s.control(0, 3);
      const deadline = Date.now() + 100;
      const holdBy = Date.now() + 400;
      const [result] = await s.committer.commitFinal([c], deadline, () => holdBy);
      assert.equal(result?.status, 'failed', JSON.stringify(result));
      assert.ok(Date.now() >= holdBy - 5, 'held until the hold deadline');
      assert.equal(c.lastCommitted, undefined);
      await s.stop();
    });

    it('ends the hold when the hold deadline is brought forward (a close)', async () => {
      const s = holding();
      const c = s.control(0, 3);
      let holdBy = Date.now() + 30_000;
      const startedAt = Date.now();
      const final = s.committer.commitFinal([c], Date.now() + 100, () => holdBy);
      await waitFor(() => Date.now() > startedAt + 200, { what: 'the deadline to pass' });
      holdBy = Date.now() + 100;
      s.conditions.changed();
      const [result] = await final;
      assert.equal(result?.status, 'failed');
      assert.ok(Date.now() - startedAt < 5000, 'the first hold deadline was not waited for');
      await s.stop();
    });
  });

  it('skips streams that are no longer current or active when the periodic commit is sent', async () => {
    const s = setup();
    const current = s.control(0, 2);
    const replaced = s.control(1, 2);
    const ended = s.control(2, 2);
    ended.end();
    s.committer.maybeCommit([current, replaced, ended], (c) => c !== replaced);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(commitsSent(s), [`commit(${T}[0]@2)`]);
    assert.equal(current.lastCommitted, 2);
    await s.stop();
  });

  describe('commits of unknown outcome (answered with an error, applied or not)', () => {
    const TIMED_OUT = E.ERR__TIMED_OUT;

    /** Offsets 0..done-1 processed; the first commit (the periodic one) is answered `error`. */
    function periodicThenFinal(
      appliesLate: 'after-next' | 'manual' | undefined,
      error: number = TIMED_OUT,
      windowMs = 300,
    ) {
      let first = true;
      const s = setup(
        {
          commitResult: () => {
            const e = first ? error : undefined;
            first = false;
            return e;
          },
          commitAppliesLate: () => appliesLate,
        },
        2000,
        windowMs,
      );
      return s;
    }

    async function periodicCommitOf(s: ReturnType<typeof setup>, c: PartitionControl) {
      s.committer.maybeCommit([c], () => true);
      await waitFor(() => !s.committer.periodicInFlight, { what: 'the periodic commit to answer' });
    }

    const more = (c: PartitionControl, from: number, to: number): void => {
      for (let o = from; o < to; o++) {
        c.ledger.deliver(o);
        c.ledger.complete(o);
      }
    };

    it('commits the final offset again when a commit answered "timed out" lands after the final one', async () => {
      const s = periodicThenFinal('after-next');
      const c = s.control(0, 5);
      await periodicCommitOf(s, c); // answered TIMED_OUT; the broker still holds it
      assert.equal(s.fake().commits.get(`${T}[0]`), undefined);
      more(c, 5, 9);
      const [result] = await s.committer.commitFinal([c], Date.now() + 3000);
      assert.deepEqual(result, { topic: T, partition: 0, status: 'committed', offset: 9 });
      // What Kafka holds when the partition is released: the final offset, not the late 5.
      assert.equal(s.fake().commits.get(`${T}[0]`), 9);
      assert.equal(s.fake().lateAppliesPending, 0);
      assert.deepEqual(commitsSent(s), [
        `commit(${T}[0]@5)`,
        `commit(${T}[0]@9)`,
        `commit(${T}[0]@9)`,
      ]);
      assert.equal(s.client.doubts.size, 0, 'the doubt is settled once the window passed');
      await s.stop();
    });

    it('reads back a partition whose final offset is unchanged when an older commit of it lands after the last one', async () => {
      const s = periodicThenFinal('manual');
      const c = s.control(0, 3);
      await periodicCommitOf(s, c); // 3: answered TIMED_OUT, still held by the broker
      more(c, 3, 6);
      await new Promise((r) => setTimeout(r, 5)); // past commitIntervalMs (1 ms)
      await periodicCommitOf(s, c); // 6: confirmed
      assert.equal(c.lastCommitted, 6);
      assert.equal(s.fake().applyLate(), 1); // the timed-out 3 lands after the 6
      assert.equal(s.fake().commits.get(`${T}[0]`), 3);
      const [result] = await s.committer.commitFinal([c], Date.now() + 3000);
      assert.deepEqual(result, { topic: T, partition: 0, status: 'unchanged', offset: 6 });
      assert.equal(s.fake().commits.get(`${T}[0]`), 6, 'what Kafka holds at the release');
      await s.stop();
    });

    it('releases without sending again when the commit that timed out was never applied', async () => {
      const s = periodicThenFinal(undefined);
      const c = s.control(0, 5);
      await periodicCommitOf(s, c);
      more(c, 5, 9);
      const startedAt = Date.now();
      const [result] = await s.committer.commitFinal([c], Date.now() + 3000);
      assert.deepEqual(result, { topic: T, partition: 0, status: 'committed', offset: 9 });
      assert.equal(s.fake().commits.get(`${T}[0]`), 9);
      assert.equal(commitsSent(s).length, 2, 'no commit sent again');
      // The release waited out the window in which the timed-out commit could still land.
      assert.ok(Date.now() - startedAt < 3000);
      assert.equal(s.client.doubts.size, 0);
      await s.stop();
    });

    it('holds the release until the window passed, and commits again when the late commit lands within it', async () => {
      const s = periodicThenFinal('manual', TIMED_OUT, 600);
      const c = s.control(0, 5);
      await periodicCommitOf(s, c);
      more(c, 5, 9);
      let settled = false;
      const final = s.committer.commitFinal([c], Date.now() + 3000).finally(() => {
        settled = true;
      });
      await waitFor(() => s.fake().commits.get(`${T}[0]`) === 9, { what: 'the final commit' });
      assert.equal(settled, false, 'released while the timed-out commit could still land');
      assert.equal(s.fake().applyLate(), 1); // the broker applies the timed-out 5 after the 9
      assert.equal(s.fake().commits.get(`${T}[0]`), 5);
      const [result] = await final;
      assert.deepEqual(result, { topic: T, partition: 0, status: 'committed', offset: 9 });
      assert.equal(s.fake().commits.get(`${T}[0]`), 9, 'what Kafka holds at the release');
      await s.stop();
    });

    it('reports the partition failed, with the figures, when the group still holds less at the rebalance deadline', async () => {
      // Every commit after the first is answered, but the re-commit never is (held past the bound).
      let n = 0;
      const s = setup(
        {
          commitResult: () => (n === 0 ? TIMED_OUT : undefined),
          commitPolls: () => (n++ >= 2 ? 100_000 : undefined),
          commitAppliesLate: () => 'after-next',
        },
        200,
        100,
      );
      const c = s.control(0, 5);
      await periodicCommitOf(s, c);
      more(c, 5, 9);
      const holdBy = Date.now() + 1500;
      const [result] = await s.committer.commitFinal([c], Date.now() + 1000, () => holdBy);
      assert.equal(result?.status, 'failed');
      assert.match(
        result?.status === 'failed' ? result.reason : '',
        /group holds offset 5: a commit answered with an error was applied after the final one, and committing 9 again was not confirmed/,
      );
      assert.equal(s.fake().commits.get(`${T}[0]`), 5);
      assert.ok(Date.now() <= holdBy + 200, 'released at the hold bound');
      await s.stop();
    });

    for (const [name, code] of [
      ['a transport failure', E.ERR__TRANSPORT],
      [
        'COORDINATOR_NOT_AVAILABLE (the write waited too long for its replicas)',
        E.ERR_COORDINATOR_NOT_AVAILABLE,
      ],
      ['REQUEST_TIMED_OUT', E.ERR_REQUEST_TIMED_OUT],
    ] as const) {
      it(`treats ${name} as an unknown outcome too`, async () => {
        const s = periodicThenFinal('after-next', code);
        const c = s.control(0, 5);
        await periodicCommitOf(s, c);
        more(c, 5, 9);
        await s.committer.commitFinal([c], Date.now() + 3000);
        assert.equal(s.fake().commits.get(`${T}[0]`), 9);
        await s.stop();
      });
    }

    for (const [name, code] of [
      ['a request failed in the queue at a connection timeout (ERR__TIMED_OUT_QUEUE)', -166],
      ['a failed re-authentication purging queued retries (ERR__AUTHENTICATION)', -169],
      ['a decommissioned broker (ERR__DESTROY_BROKER)', -137],
    ] as const) {
      it(`treats ${name} as an unknown outcome (librdkafka reports only its last attempt)`, async () => {
        const s = periodicThenFinal('after-next', code, 100);
        const c = s.control(0, 5);
        await periodicCommitOf(s, c);
        more(c, 5, 9);
        await s.committer.commitFinal([c], Date.now() + 3000);
        assert.equal(s.fake().commits.get(`${T}[0]`), 9);
        await s.stop();
      });
    }

    it('ends the verification when a close brings the hold bound forward while it waits out the window', async () => {
      const s = periodicThenFinal(undefined, TIMED_OUT, 4000);
      const c = s.control(0, 5);
      await periodicCommitOf(s, c);
      more(c, 5, 9);
      let holdBy = Date.now() + 20_000;
      const final = s.committer.commitFinal([c], Date.now() + 10_000, () => holdBy);
      await waitFor(() => s.fake().committedReads >= 1, { what: 'the first read-back' });
      holdBy = Date.now() + 200; // close(): the revoke must end within 200 ms
      const movedAt = Date.now();
      s.conditions.changed();
      const [result] = await final;
      assert.ok(Date.now() - movedAt < 1000, `returned ${Date.now() - movedAt} ms after the bound`);
      assert.equal(result?.status, 'failed');
      assert.match(
        result?.status === 'failed' ? result.reason : '',
        /not confirmed that the group holds 9 by the rebalance deadline: a commit of unknown outcome could still be applied/,
      );
      await s.stop();
    });

    it('reports the partition failed when the group offsets cannot be read back, and a read that never answers does not hold it past the bound', async () => {
      for (const answer of ['error', 'never'] as const) {
        const s = periodicThenFinal(undefined, TIMED_OUT, 100);
        const c = s.control(0, 5);
        await periodicCommitOf(s, c);
        more(c, 5, 9);
        (s.fake() as unknown as { committed: unknown }).committed = (
          _tps: unknown,
          _t: number,
          cb: (e: Error) => void,
        ) => {
          if (answer === 'error')
            setImmediate(() => cb(Object.assign(new Error('Local: Timed out'), { code: -185 })));
        };
        const holdBy = Date.now() + 800;
        const [result] = await s.committer.commitFinal([c], Date.now() + 500, () => holdBy);
        assert.ok(Date.now() < holdBy + 300, `${answer}: released at the hold bound`);
        assert.equal(result?.status, 'failed', answer);
        assert.match(
          result?.status === 'failed' ? result.reason : '',
          /not confirmed that the group holds 9/,
        );
        await s.stop();
      }
    });

    it('reports the partition lost, without retrying, when committing the final offset again is refused for ownership', async () => {
      let n = 0;
      const s = setup(
        {
          commitResult: () => {
            const i = n++;
            return i === 0 ? TIMED_OUT : i >= 2 ? E.ERR_UNKNOWN_MEMBER_ID : undefined;
          },
          commitAppliesLate: () => 'after-next',
        },
        2000,
        300,
      );
      const c = s.control(0, 5);
      await periodicCommitOf(s, c);
      more(c, 5, 9);
      const startedAt = Date.now();
      const [result] = await s.committer.commitFinal(
        [c],
        Date.now() + 1000,
        () => startedAt + 5000,
      );
      assert.equal(result?.status, 'lost');
      // Reported, not applied: the partition lifecycle fences what the results say is lost.
      assert.equal(c.state, 'active');
      assert.ok(Date.now() - startedAt < 2000, 'not retried until the hold bound');
      assert.equal(commitsSent(s).length, 3);
      await s.stop();
    });

    it('stops committing for a partition a newer assignment took while its verification ran (a stale revoke)', async () => {
      const s = periodicThenFinal('manual', TIMED_OUT, 600);
      const c = s.control(0, 5);
      await periodicCommitOf(s, c);
      more(c, 5, 9);
      c.end();
      const final = s.committer.commitFinal([c], Date.now() + 3000);
      await waitFor(() => s.fake().committedReads >= 1, { what: 'the first read-back' });
      c.fence('reassigned in a newer generation'); // the newer stream owns the partition now
      assert.equal(s.fake().applyLate(), 1); // the late 5 lands
      await final;
      assert.deepEqual(
        commitsSent(s),
        [`commit(${T}[0]@5)`, `commit(${T}[0]@9)`],
        'nothing committed for the partition after the newer assignment took it',
      );
      await s.stop();
    });

    it('commits again when its own doubtful commit above the final offset lands late (after a seek back)', async () => {
      const s = periodicThenFinal('manual', TIMED_OUT, 600);
      const before = s.control(0, 100);
      await periodicCommitOf(s, before); // 100: answered TIMED_OUT, still held by the broker
      // seek(50): a fresh stream from 50 processes 50..69
      const after = new PartitionControl(T, 0, 1, tpKey(T, 0), () => undefined);
      after.startAt(50);
      more(after, 50, 70);
      const final = s.committer.commitFinal([after], Date.now() + 3000);
      await waitFor(() => s.fake().commits.get(`${T}[0]`) === 70, { what: 'the final commit' });
      assert.equal(s.fake().applyLate(), 1); // 100 lands after 70
      const [result] = await final;
      assert.deepEqual(result, { topic: T, partition: 0, status: 'committed', offset: 70 });
      assert.equal(
        s.fake().commits.get(`${T}[0]`),
        70,
        'the messages the seek asked for are not skipped',
      );
      await s.stop();
    });

    it('does not read back after a refusal that says the broker did not apply it', async () => {
      const s = periodicThenFinal(undefined, E.ERR_REBALANCE_IN_PROGRESS);
      const c = s.control(0, 5);
      await periodicCommitOf(s, c);
      more(c, 5, 9);
      await s.committer.commitFinal([c], Date.now() + 3000);
      assert.equal(s.client.doubts.size, 0);
      assert.equal(s.fake().committedReads, 0);
      await s.stop();
    });
  });
});
