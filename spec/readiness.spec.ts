/**
 * What a service sees before any message: `ready()` at the first assignment (also an empty one),
 * rejected when the consumer ends first; and a warning when a pipeline is never subscribed.
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import { Writable } from 'node:stream';
import type { Subscription } from 'rxjs';
import { ClosedError, StartPositionError } from '../lib';
import { harness, tp, until } from './helpers/harness';

/** A pino logger whose lines the test reads. */
function recordingLogger() {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean))
        lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

describe('ready() and a pipeline never subscribed', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('resolves at the first assignment, and at once when asked later', async () => {
    const h = harness();
    let ready = false;
    void h.consumer.ready().then(() => (ready = true));
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await new Promise((r) => setImmediate(r));
    assert.equal(ready, false, 'not before the group assigned anything');
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => ready, 'ready() to resolve');
    await h.consumer.ready(); // resolved already
    await h.consumer.close();
    await h.consumer.ready(); // stays resolved after the close
  });

  it('resolves at an empty first assignment (more members than partitions)', async () => {
    const h = harness();
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([]);
    await h.consumer.ready();
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned'],
    );
    await h.consumer.close();
  });

  it('rejects with a ClosedError when the consumer closes before any assignment', async () => {
    const h = harness();
    const ready = h.consumer.ready();
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await h.consumer.close();
    await assert.rejects(ready, (e: unknown) => e instanceof ClosedError);
    await assert.rejects(h.consumer.ready(), (e: unknown) => e instanceof ClosedError);
  });

  it('rejects when the onAssign hook fails on the first assignment (the consumer ends)', async () => {
    const h = harness({
      onAssign: async () => {
        throw new Error('onAssign boom');
      },
    });
    const ready = h.consumer.ready();
    subs.push(h.consumer.process(() => undefined).subscribe({ error: () => undefined }));
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0)]);
    await assert.rejects(ready, (e: unknown) => e instanceof StartPositionError);
  });

  it('warns once when process() is called and its Observable never subscribed', async () => {
    const { logger, lines } = recordingLogger();
    const h = harness({ logger }, {}, { notSubscribedWarnMs: 30 });
    void h.consumer.process(() => undefined); // the subscribe() is forgotten
    await until(
      () => lines.some((l) => l.level === 40 && /never subscribed/.test(l.msg)),
      'the warning',
    );
    assert.equal(lines.filter((l) => /never subscribed/.test(l.msg)).length, 1);
    await h.consumer.close();
  });

  it('warns once when processTransactional() is called and its Observable never subscribed', async () => {
    const { logger, lines } = recordingLogger();
    const h = harness({ logger }, {}, { notSubscribedWarnMs: 30 });
    void h.consumer.processTransactional(() => []); // the subscribe() is forgotten
    await until(
      () =>
        lines.some(
          (l) =>
            l.level === 40 && /processTransactional\(\) was called .* never subscribed/.test(l.msg),
        ),
      'the warning',
    );
    assert.equal(lines.filter((l) => /never subscribed/.test(l.msg)).length, 1);
    await h.consumer.close();
  });

  it('does not warn about a pipeline subscribed in time', async () => {
    const { logger, lines } = recordingLogger();
    const h = harness({ logger }, {}, { notSubscribedWarnMs: 30 });
    const pipeline = h.consumer.process(() => undefined);
    subs.push(pipeline.subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    // Past the warning's time: a timer that was not cleared would have fired by now.
    const since = Date.now();
    await until(() => Date.now() - since > 100, 'the warning time to pass', 1000);
    assert.deepEqual(
      lines.filter((l) => /never subscribed/.test(l.msg)),
      [],
    );
    await h.consumer.close();
  });
});
