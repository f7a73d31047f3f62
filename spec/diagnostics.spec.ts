import assert from 'node:assert/strict';
import diagnosticsChannel from 'node:diagnostics_channel';
import { lastValueFrom, of } from 'rxjs';
import type { Subscription } from 'rxjs';
import { DiagnosticsChannel } from '../lib';
import { channels, publish } from '../lib/diagnostics';
import type {
  CommitDiagnostics,
  HandlerDiagnostics,
  KafkaMessage,
  RebalanceDiagnostics,
  StatsDiagnostics,
} from '../lib';
import { T, harness, tp, until } from './helpers/harness';
import { statsEvent } from './helpers/observability';

/** Subscribes to every channel for the duration of one test. */
function record() {
  const got = {
    rebalance: [] as RebalanceDiagnostics[],
    commit: [] as CommitDiagnostics[],
    start: [] as HandlerDiagnostics[],
    end: [] as { payload: HandlerDiagnostics; outcome: unknown; durationMs: unknown }[],
    stats: [] as StatsDiagnostics[],
  };
  const handlers: [string, (m: unknown) => void][] = [
    [DiagnosticsChannel.rebalance, (m) => void got.rebalance.push(m as RebalanceDiagnostics)],
    [DiagnosticsChannel.commit, (m) => void got.commit.push(m as CommitDiagnostics)],
    [DiagnosticsChannel.handlerStart, (m) => void got.start.push(m as HandlerDiagnostics)],
    [
      DiagnosticsChannel.handlerEnd,
      (m) => {
        const payload = m as HandlerDiagnostics;
        got.end.push({ payload, outcome: payload.outcome, durationMs: payload.durationMs });
      },
    ],
    [DiagnosticsChannel.stats, (m) => void got.stats.push(m as StatsDiagnostics)],
  ];
  for (const [name, fn] of handlers) diagnosticsChannel.subscribe(name, fn);
  const stop = () => {
    for (const [name, fn] of handlers) diagnosticsChannel.unsubscribe(name, fn);
  };
  return { got, stop };
}

describe('diagnostics channels', () => {
  let subs: Subscription[] = [];
  let stop: () => void = () => undefined;
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
    stop();
  });

  it('names every channel under the reactive-rdkafka: namespace', () => {
    for (const name of Object.values(DiagnosticsChannel)) {
      assert.match(name, /^reactive-rdkafka:[a-z:]+$/);
    }
  });

  it('publishes every rebalance phase and every commit with its outcome and duration', async () => {
    const r = record();
    stop = r.stop;
    // The channels are process-wide: consumers of earlier tests that are still closing publish
    // on them too, so only this consumer's messages (its client.id) count here.
    const clientId = 'diagnostics-phases';
    const h = harness({ config: { 'client.id': clientId } });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.fake().commits.get(`${T}[0]`) === 5, 'periodic commit');
    await h.consumer.close();
    const ours = r.got.rebalance.filter((p) => p.clientId === clientId);
    assert.deepEqual(
      ours.map((p) => p.event.type),
      ['assigned', 'revoking', 'drained', 'committed', 'revoked'],
    );
    assert.ok(ours.every((p) => p.group === 'g'));
    // A periodic commit may land while only part of the five is processed; the last one
    // carries all five.
    const periodic = r.got.commit
      .filter((c) => c.clientId === clientId && c.kind === 'periodic' && c.ok)
      .at(-1);
    assert.ok(periodic);
    assert.deepEqual(periodic.offsets, [{ topic: T, partition: 0, offset: 5 }]);
    assert.equal(typeof periodic.durationMs, 'number');
    assert.equal(periodic.error, undefined);
  });

  it('publishes a failed commit with its error', async () => {
    const r = record();
    stop = r.stop;
    let calls = 0;
    const h = harness({}, { commitResult: () => (++calls === 1 ? 7 : undefined) });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => r.got.commit.some((c) => !c.ok), 'a failed commit');
    const failed = r.got.commit.find((c) => !c.ok)!;
    assert.equal(failed.kind, 'periodic');
    assert.ok(failed.error instanceof Error);
  });

  it('publishes the same object at a handler start and end, with outcome and duration at the end', async () => {
    const r = record();
    stop = r.stop;
    const h = harness();
    const handler = (m: KafkaMessage) => {
      if (m.offset === 1) return Promise.reject(new Error('boom'));
      if (m.offset === 2) return of('observable');
      return Promise.resolve('promise');
    };
    const done = lastValueFrom(h.consumer.process(handler, { retry: 0 })).catch((e: unknown) => e);
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await done;
    assert.deepEqual(
      r.got.start.map((p) => p.offset),
      [0, 1],
    );
    const first = r.got.start[0]!;
    assert.equal(first.topic, T);
    assert.equal(first.partition, 0);
    assert.equal(first.generation, 1);
    assert.equal(first.message.offset, 0);
    assert.equal(r.got.end[0]!.payload, first, 'the same object');
    assert.deepEqual(
      r.got.end.map((e) => e.outcome),
      ['ok', 'failed'],
    );
    assert.ok(r.got.end.every((e) => typeof e.durationMs === 'number'));
    assert.match(String((r.got.end[1]!.payload.error as Error).message), /boom/);
  });

  it('reports an Observable handler as ended when it completes', async () => {
    const r = record();
    stop = r.stop;
    const h = harness();
    subs.push(h.consumer.process(() => of(1, 2, 3)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 2);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => r.got.end.length === 2, 'two handlers ended');
    assert.deepEqual(
      r.got.end.map((e) => e.outcome),
      ['ok', 'ok'],
    );
  });

  it('publishes each librdkafka statistics report, parsed', async () => {
    const r = record();
    stop = r.stop;
    const h = harness();
    h.fake().emit('event.stats', statsEvent(T, [{ partition: 0, lag: 3 }]));
    assert.equal(r.got.stats.length, 1);
    const stats = r.got.stats[0]!.stats as { topics: Record<string, unknown> };
    assert.ok(stats.topics[T]);
  });

  it('builds a payload only while the channel has subscribers', () => {
    let built = 0;
    const build = () => ({ n: ++built });
    publish(channels.stats, build);
    assert.equal(built, 0);
    const fn = () => undefined;
    diagnosticsChannel.subscribe(DiagnosticsChannel.stats, fn);
    try {
      publish(channels.stats, build);
      assert.equal(built, 1);
    } finally {
      diagnosticsChannel.unsubscribe(DiagnosticsChannel.stats, fn);
    }
    publish(channels.stats, build);
    assert.equal(built, 1);
  });
});
