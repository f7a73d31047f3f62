import assert from 'node:assert/strict';
import pino from 'pino';
import type { ConsumerSettings } from '../../lib/config';
import { Conditions } from '../../lib/internal/loop/wait-conditions';
import { leaveGroup, settleCommits } from '../../lib/internal/rebalance/leave-group';
import type { LeavingParts } from '../../lib/internal/rebalance/leave-group';

/** A closing consumer's parts, as stubs that record what leaving does with them. */
function world(opts: { staticId?: string; revokesInFlight?: number; owned?: number[] } = {}) {
  const calls: string[] = [];
  const conditions = new Conditions();
  const owned = new Map<
    number,
    { partition: number; topic: string; state: string; active: boolean }
  >();
  for (const p of opts.owned ?? [])
    owned.set(p, { topic: 't', partition: p, state: 'running', active: true });
  const rebalance = {
    revokesInFlight: opts.revokesInFlight ?? 0,
    busy: false,
    answerPending: (why: string) => void calls.push(`answerPending(${why})`),
    onRevoke: (tps: { partition: number }[]) => {
      calls.push(`onRevoke(${tps.map((t) => t.partition).join(',')})`);
      owned.clear();
      conditions.changed();
    },
  };
  const controls = () =>
    [...owned.values()].map((c) => ({
      ...c,
      end: () => void calls.push(`end(${c.partition})`),
    }));
  const assignments = {
    values: () => controls().values(),
    controls,
    get size() {
      return owned.size;
    },
    retiredDrained: true,
  };
  const client = {
    unansweredCount: 0,
    raw: {
      unsubscribe: () => {
        calls.push('unsubscribe');
        owned.clear();
        conditions.changed();
      },
      assignments: () => [...owned.values()],
    },
  };
  const committer = { periodicInFlight: false };
  const host = {
    rebalance,
    assignments,
    commits: committer,
    lifecycle: {
      stopIntake: (cs: Iterable<{ end(): void }>) => {
        for (const c of cs) c.end();
      },
    },
    client,
    conditions,
    logger: pino({ level: 'silent' }),
    settings: { groupProtocol: 'classic' } as ConsumerSettings,
    staticInstanceId: opts.staticId,
  } as unknown as LeavingParts;
  return { host, calls, rebalance, client, committer, conditions };
}

describe('leaveGroup / settleCommits (how a closing consumer leaves)', () => {
  it('ends every stream, then unsubscribes and waits until nothing is assigned', async () => {
    const w = world({ owned: [0, 1] });
    await leaveGroup(w.host, () => Date.now() + 5000);
    assert.deepEqual(w.calls, [
      'answerPending(the consumer is closing)',
      'end(0)',
      'end(1)',
      'unsubscribe',
    ]);
  });

  it('leaves only after the revoke in flight finished', async () => {
    const w = world({ owned: [0], revokesInFlight: 1 });
    const leaving = leaveGroup(w.host, () => Date.now() + 5000);
    await new Promise((r) => setImmediate(r));
    assert.ok(!w.calls.includes('unsubscribe'), 'not while the revoke is in flight');
    w.rebalance.revokesInFlight = 0;
    w.conditions.changed();
    await leaving;
    assert.equal(w.calls[w.calls.length - 1], 'unsubscribe');
  });

  it('a static classic member releases its partitions locally and never unsubscribes', async () => {
    const w = world({ owned: [3], staticId: 'worker-1' });
    await leaveGroup(w.host, () => Date.now() + 5000);
    assert.ok(w.calls.includes('onRevoke(3)'));
    assert.ok(!w.calls.includes('unsubscribe'));
  });

  it('gives up at the release deadline when partitions are never released', async () => {
    const w = world({ owned: [0] });
    w.client.raw.unsubscribe = () => void w.calls.push('unsubscribe'); // librdkafka never revokes
    const started = Date.now();
    await leaveGroup(w.host, () => started + 100);
    assert.ok(Date.now() - started >= 90);
  });

  it('waits for a periodic commit in flight and for unanswered commits, within the deadline', async () => {
    const w = world();
    w.committer.periodicInFlight = true;
    w.client.unansweredCount = 1;
    let done = false;
    const settling = settleCommits(w.host, () => Date.now() + 5000).then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    w.committer.periodicInFlight = false;
    w.conditions.changed();
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false, 'still waiting for the unanswered commit');
    w.client.unansweredCount = 0;
    w.conditions.changed();
    await settling;
    assert.equal(done, true);
  });
});
