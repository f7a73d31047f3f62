import assert from 'node:assert/strict';
import { NotAssignedError } from '../../lib';
import type { KafkaMessage } from '../../lib';
import { PartitionControl } from '../../lib/internal/partition/partition-control';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import { Seeks } from '../../lib/internal/rebalance/seeks';
import { StartPositions } from '../../lib/internal/rebalance/start-positions';
import { rebalanceParts } from '../helpers/rebalance-parts';
import type { FakeOptions } from '../fakes/fake-consumer';
import { clientOverFake } from '../helpers/client';
import { until } from '../helpers/harness';

const T = 'orders';
const tp0 = { topic: T, partition: 0 };

/** Seeks over real assignments, start positions and flow control, on a ConsumerClient over the fake. */
function setup(fakeOptions: FakeOptions = {}) {
  const { client, fake, settings, logger } = clientOverFake(
    { maxBufferedMessages: 2, resumeThreshold: 0.5 },
    fakeOptions,
  );
  (fake() as unknown as { connected: boolean }).connected = true;
  const parts = rebalanceParts({ client, settings, logger });
  const { assignments, flow, started } = parts;
  const seeks = new Seeks({
    client,
    assignments,
    startPositions: new StartPositions(client, settings, logger, undefined),
    lifecycle: parts.lifecycle,
    shutdown: parts.shutdown,
    conditions: parts.conditions,
    loggers: parts.loggers,
  });
  /** A partition assigned in the fake and owned by a fresh stream of `generation`. */
  const own = (partition: number, generation = 1): PartitionControl => {
    const c = new PartitionControl(T, partition, generation, tpKey(T, partition), () => undefined);
    assignments.take(c);
    fake().assign([...fake().assignments(), { topic: T, partition }]);
    return c;
  };
  const message = (c: PartitionControl, offset: number): KafkaMessage =>
    ({
      topic: T,
      partition: c.partition,
      offset,
      generation: c.generation,
      size: 1,
      signal: c.signal,
    }) as unknown as KafkaMessage;
  const seekCalls = (): string[] =>
    fake()
      .ops()
      .filter((o) => o.startsWith('seek('));
  return {
    seeks,
    assignments,
    flow,
    fake,
    own,
    message,
    started,
    seekCalls,
    stop: () => parts.setStage('closing'),
  };
}

/** The rejection of `promise` (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  assert.fail('expected a rejection');
}

describe('Seeks', () => {
  it('rejects a seek of a partition this consumer does not own, and sends nothing', async () => {
    const s = setup();
    const err = await rejection(s.seeks.request(tp0, { offset: 3 }));
    assert.ok(err instanceof NotAssignedError, String(err));
    assert.deepEqual(err.coordinates, { topic: T, partition: 0 });
    assert.equal(s.seeks.waiting, false);
    await s.seeks.apply();
    assert.deepEqual(s.seekCalls(), []);
  });

  it('rejects a seek of a partition being revoked, and of any once the consumer stops running', async () => {
    const s = setup();
    const ending = s.own(0);
    ending.end();
    assert.ok((await rejection(s.seeks.request(tp0, { offset: 3 }))) instanceof NotAssignedError);
    s.own(1);
    s.stop();
    const err = await rejection(s.seeks.request({ topic: T, partition: 1 }, { offset: 3 }));
    assert.ok(err instanceof NotAssignedError);
    assert.equal(s.seeks.waiting, false);
  });

  it('rejects a seek whose partition is revoked while its position is looked up, and changes nothing', async () => {
    const s = setup();
    const old = s.own(0);
    const seek = s.seeks.request(tp0, 'latest'); // a watermark lookup, answered later
    old.end(); // the revoke arrives meanwhile
    const err = await rejection(seek);
    assert.ok(err instanceof NotAssignedError);
    assert.match(err.message, /revoked while its position was looked up/);
    assert.equal(s.seeks.waiting, false, 'nothing queued for the loop');
    await s.seeks.apply();
    assert.deepEqual(s.seekCalls(), []);
    assert.equal(s.assignments.get(old.key), old);
    assert.equal(old.state, 'ending', 'not fenced: it drains from where it was');
    assert.deepEqual(s.started, []);
  });

  it('rejects a seek whose partition is reassigned before the loop applies it, and never touches the newer stream', async () => {
    const s = setup();
    const old = s.own(0, 1);
    const seek = s.seeks.request(tp0, { offset: 5 });
    await until(() => s.seeks.waiting, 'the seek queued for the loop');
    old.end();
    const newer = new PartitionControl(T, 0, 2, old.key, () => undefined);
    s.assignments.take(newer);
    await s.seeks.apply();
    const err = await rejection(seek);
    assert.ok(err instanceof NotAssignedError);
    assert.match(err.message, /revoked before the seek could be applied/);
    assert.deepEqual(s.seekCalls(), [], 'no native seek: it would move the newer assignment');
    assert.equal(s.assignments.get(old.key), newer);
    assert.equal(newer.active, true);
    assert.equal(newer.ledger.committable(), undefined, 'the newer stream keeps its own start');
    assert.deepEqual(s.started, []);
  });

  it('rejects a seek whose partition is revoked during the native seek; the old stream drains from where it was', async () => {
    const s = setup();
    const old = s.own(0);
    const seek = s.seeks.request(tp0, { offset: 5 });
    await until(() => s.seeks.waiting, 'the seek queued for the loop');
    const applied = s.seeks.apply(); // the native seek is sent now and answered later
    assert.deepEqual(s.seekCalls(), [`seek(${T}[0]@5)`]);
    old.end(); // a close ends the streams meanwhile
    await applied;
    const err = await rejection(seek);
    assert.ok(err instanceof NotAssignedError);
    assert.match(err.message, /while the seek was applied/);
    assert.equal(s.assignments.get(old.key), old, 'no fresh stream took the partition');
    assert.equal(old.state, 'ending', 'not fenced');
    assert.equal(old.signal.aborted, false, 'its handlers are not aborted');
    assert.equal(s.assignments.retiredDrained, true);
    assert.deepEqual(s.started, []);
  });

  it('passes a failed native seek on and leaves the old stream running', async () => {
    const s = setup({ seekError: 'Local: Erroneous state' });
    const old = s.own(0);
    const seek = s.seeks.request(tp0, { offset: 5 });
    await until(() => s.seeks.waiting, 'the seek queued for the loop');
    await s.seeks.apply();
    const err = await rejection(seek);
    assert.match(err.message, /Erroneous state/);
    assert.equal(s.assignments.get(old.key), old);
    assert.equal(old.active, true);
    assert.deepEqual(s.started, []);
  });

  it('waits for the loop: a seek resolves only once apply() ran', async () => {
    const s = setup();
    s.own(0);
    let resolved = false;
    const seek = s.seeks.request(tp0, { offset: 5 }).then((o) => {
      resolved = true;
      return o;
    });
    await until(() => s.seeks.waiting, 'the seek queued for the loop');
    await new Promise((r) => setImmediate(r));
    assert.equal(resolved, false);
    assert.deepEqual(s.seekCalls(), []);
    await s.seeks.apply();
    assert.equal(await seek, 5);
  });

  it('fences the old stream, starts a new one at the offset, retires the old one and tells flow control', async () => {
    const s = setup();
    const old = s.own(0, 3);
    old.messages$.subscribe(); // its pipeline runs the two messages below
    for (const o of [0, 1]) {
      old.push(s.message(old, o));
      s.flow.afterPush(old);
    }
    assert.equal(s.fake().isPaused(T, 0), true, 'backpressure paused it (buffer of 2)');
    const seek = s.seeks.request(tp0, { offset: 42 });
    await until(() => s.seeks.waiting, 'the seek queued for the loop');
    await s.seeks.apply();
    assert.equal(await seek, 42);
    assert.deepEqual(s.seekCalls(), [`seek(${T}[0]@42)`]);
    assert.equal(old.state, 'fenced');
    assert.equal(old.signal.aborted, true, 'its in-flight handlers are aborted');
    const fresh = s.assignments.get(old.key);
    assert.ok(fresh !== undefined && fresh !== old);
    assert.equal(fresh.generation, 3, 'same assignment');
    assert.equal(fresh.active, true);
    assert.equal(fresh.ledger.committable(), 42, 'the new stream starts at the offset');
    assert.deepEqual(s.started, [fresh], 'handed to the application');
    assert.deepEqual(s.assignments.retiredOf([tp0]), [old], 'retired until its handlers return');
    assert.equal(s.fake().isPaused(T, 0), false, 'the new stream starts with an empty buffer');
    assert.equal(s.fake().ops().at(-1), `resume(${T}[0])`);
  });

  it('keeps a partition the application paused paused after a seek', async () => {
    const s = setup();
    const old = s.own(0);
    old.messages$.subscribe();
    for (const o of [0, 1]) {
      old.push(s.message(old, o));
      s.flow.afterPush(old);
    }
    s.flow.pause([tp0]);
    const seek = s.seeks.request(tp0, { offset: 9 });
    await until(() => s.seeks.waiting, 'the seek queued for the loop');
    await s.seeks.apply();
    assert.equal(await seek, 9);
    assert.equal(s.fake().isPaused(T, 0), true);
  });

  it('resolves the position before queueing the seek (earliest / latest through watermarks)', async () => {
    const s = setup();
    s.own(0);
    s.fake().watermarks.set(`${T}[0]`, 17);
    const seek = s.seeks.request(tp0, 'latest');
    await until(() => s.seeks.waiting, 'the seek queued for the loop');
    await s.seeks.apply();
    assert.equal(await seek, 17);
    assert.deepEqual(s.seekCalls(), [`seek(${T}[0]@17)`]);
  });

  it('rejectAll fails every seek still waiting and the loop applies none of them', async () => {
    const s = setup();
    const old0 = s.own(0);
    s.own(1);
    const seeks = [
      s.seeks.request(tp0, { offset: 1 }),
      s.seeks.request({ topic: T, partition: 1 }, { offset: 2 }),
    ];
    await until(() => s.seeks.waiting, 'the seeks queued for the loop');
    await new Promise((r) => setImmediate(r)); // both are queued
    s.seeks.rejectAll();
    for (const seek of seeks) {
      const err = await rejection(seek);
      assert.ok(err instanceof NotAssignedError);
      assert.match(err.message, /closed before the seek could be applied/);
    }
    assert.equal(s.seeks.waiting, false);
    await s.seeks.apply();
    assert.deepEqual(s.seekCalls(), []);
    assert.equal(s.assignments.get(old0.key), old0);
  });
});
