import assert from 'node:assert/strict';
import diagnosticsChannel from 'node:diagnostics_channel';
import type { Subscription } from 'rxjs';
import { DiagnosticsChannel } from '../lib';
import type { StallDiagnostics } from '../lib';
import { T, harness, tp, until } from './helpers/harness';
import { captureLogger } from './helpers/observability';

describe('stalled-handler detection', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('reports a handler running past stallThresholdMs (log, metric, event) and again when it completes', async () => {
    const { logger, lines } = captureLogger();
    const events: StallDiagnostics[] = [];
    const onStall = (m: unknown) => void events.push(m as StallDiagnostics);
    diagnosticsChannel.subscribe(DiagnosticsChannel.handlerStall, onStall);
    try {
      const h = harness({ stallThresholdMs: 40, logger });
      let release!: () => void;
      subs.push(
        h.consumer
          .process((m) => (m.offset === 2 ? new Promise<void>((r) => (release = r)) : undefined))
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 4);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => h.consumer.metrics().stalledHandlers.length === 1, 'a stalled handler');
      const m = h.consumer.metrics();
      assert.equal(m.stalls, 1);
      const s = m.stalledHandlers[0]!;
      assert.deepEqual([s.topic, s.partition, s.offset, s.generation], [T, 0, 2, 1]);
      assert.ok(s.elapsedMs >= 40);
      const warn = lines.find((l) => String(l.msg).startsWith('handler stalled'));
      assert.ok(warn, 'a warning');
      assert.equal(warn.level, 40);
      assert.deepEqual(
        [warn.topic, warn.partition, warn.generation, warn.offset, warn.stallThresholdMs],
        [T, 0, 1, 2, 40],
      );
      assert.ok((warn.elapsedMs as number) >= 40);
      assert.match(String(warn.msg), /duplicates/);
      assert.equal(events.length, 1);
      assert.equal(events[0]?.phase, 'stalled');

      release();
      await until(() => h.consumer.metrics().stalledHandlers.length === 0, 'completed');
      const done = lines.find((l) => l.msg === 'stalled handler completed');
      assert.ok(done);
      assert.equal(done.level, 30);
      assert.deepEqual([done.topic, done.partition, done.offset], [T, 0, 2]);
      assert.deepEqual(
        events.map((e) => [e.phase, e.topic, e.partition, e.offset, e.thresholdMs, e.group]),
        [
          ['stalled', T, 0, 2, 40, 'g'],
          ['completed', T, 0, 2, 40, 'g'],
        ],
      );
      assert.ok(events[1]!.elapsedMs >= events[0]!.elapsedMs);
      assert.equal(h.consumer.metrics().stalls, 1, 'cumulative');
      await h.consumer.close();
    } finally {
      diagnosticsChannel.unsubscribe(DiagnosticsChannel.handlerStall, onStall);
    }
  });

  it('reports nothing with stallThresholdMs 0', async () => {
    const { logger, lines } = captureLogger();
    const h = harness({ stallThresholdMs: 0, logger });
    let release!: () => void;
    subs.push(
      h.consumer
        .process((m) => (m.offset === 0 ? new Promise<void>((r) => (release = r)) : undefined))
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 1);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.consumer.metrics().inFlight === 1, 'running');
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(h.consumer.metrics().stalls, 0);
    assert.equal(h.consumer.health().checks.noStalledPartitions, true);
    assert.ok(!lines.some((l) => String(l.msg).startsWith('handler stalled')));
    release();
  });
});
