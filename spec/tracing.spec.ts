/**
 * Tracing: the `reactive-rdkafka:handler` / `:batch` tracing channels around each handler call
 * (stores bound to `start` are active inside the handler), and the OpenTelemetry tracer hook: a
 * CONSUMER span per call, child of the producer's span from `traceparent`, the active span inside
 * the handler so the handler's own spans are its children.
 */
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import diagnosticsChannel from 'node:diagnostics_channel';
import { Observable } from 'rxjs';
import type { Subscription } from 'rxjs';
import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { TracingChannel, openTelemetryTracing } from '../lib';
import type { HandlerTrace, KafkaMessage } from '../lib';
import { T, committed, harness, tp, until } from './helpers/harness';
import type { Harness } from './helpers/harness';
import { transactionalHarness } from './helpers/transactional';

const PRODUCER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PRODUCER_SPAN = '00f067aa0ba902b7';

/** Puts W3C trace context on the first `n` messages of partition 0. */
function traceparents(h: Harness, n: number): void {
  const log = (h.fake() as unknown as { logs: Map<string, { headers: unknown }[]> }).logs.get(
    `${T}[0]`,
  );
  for (const m of (log ?? []).slice(0, n)) {
    m.headers = [{ traceparent: Buffer.from(`00-${PRODUCER_TRACE}-${PRODUCER_SPAN}-01`) }];
  }
}

describe('tracing', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('publishes start/end/asyncStart/asyncEnd/error on the tracing channel, with start stores active inside the handler', async () => {
    const channel = diagnosticsChannel.tracingChannel<object, HandlerTrace & object>(
      TracingChannel.handler,
    );
    const events: string[] = [];
    const store = new AsyncLocalStorage<{ label: string }>();
    channel.start.bindStore(store, (trace) => ({ label: `offset ${trace.offset}` }));
    const handlers = {
      start: (t: HandlerTrace) => events.push(`start ${t.offset}`),
      end: (t: HandlerTrace) => events.push(`end ${t.offset}`),
      asyncStart: (t: HandlerTrace) => events.push(`asyncStart ${t.offset}`),
      asyncEnd: (t: HandlerTrace) => events.push(`asyncEnd ${t.offset} ${String(t.result)}`),
      error: (t: HandlerTrace) => events.push(`error ${t.offset} ${(t.error as Error).message}`),
    };
    channel.subscribe(handlers as never);
    try {
      const h = harness();
      const inside: (string | undefined)[] = [];
      let failedOnce = false;
      subs.push(
        h.consumer
          .process(
            async (m: { offset: number }) => {
              await new Promise((r) => setImmediate(r));
              inside.push(store.getStore()?.label);
              if (m.offset === 1 && !failedOnce) {
                failedOnce = true;
                throw new Error('boom');
              }
              return `r${m.offset}`;
            },
            { retry: { count: 1, initialDelayMs: 1, maxDelayMs: 1 } },
          )
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 2);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(h) === 2, 'committed');
      assert.deepEqual(
        inside,
        ['offset 0', 'offset 1', 'offset 1'],
        'the store is active in the handler',
      );
      assert.deepEqual(events, [
        'start 0',
        'end 0',
        'asyncStart 0',
        'asyncEnd 0 r0',
        'start 1',
        'end 1',
        'error 1 boom',
        'asyncStart 1',
        'asyncEnd 1 undefined',
        'start 1',
        'end 1',
        'asyncStart 1',
        'asyncEnd 1 r1',
      ]);
      await h.consumer.close();
    } finally {
      channel.unsubscribe(handlers as never);
      channel.start.unbindStore(store);
    }
  });

  describe('OpenTelemetry', () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    const contextManager = new AsyncLocalStorageContextManager();
    before(() => {
      contextManager.enable();
      api.context.setGlobalContextManager(contextManager);
      api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    });
    after(() => {
      api.context.disable();
      api.propagation.disable();
    });
    beforeEach(() => exporter.reset());

    it("makes each call a CONSUMER span, child of the producer's span; the handler's spans are its children", async () => {
      const tracer = provider.getTracer('test');
      const h = harness({ tracing: openTelemetryTracing(api, { tracer }) });
      subs.push(
        h.consumer
          .process(async (m: { offset: number }) => {
            const child = tracer.startSpan(`db query ${m.offset}`);
            await new Promise((r) => setImmediate(r));
            child.end();
          })
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 2);
      traceparents(h, 1);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(h) === 2, 'committed');
      await h.consumer.close();
      const spans = exporter.getFinishedSpans();
      const consume = spans.filter((s) => s.name === `process ${T}`);
      assert.equal(consume.length, 2);
      const [first, second] = consume;
      assert.ok(first && second);
      assert.equal(first.kind, api.SpanKind.CONSUMER);
      assert.equal(first.spanContext().traceId, PRODUCER_TRACE, "the producer's trace id flows");
      assert.equal(first.parentSpanContext?.spanId, PRODUCER_SPAN);
      assert.equal(first.links[0]?.context.spanId, PRODUCER_SPAN, 'linked to the producer');
      assert.deepEqual(
        {
          system: first.attributes['messaging.system'],
          destination: first.attributes['messaging.destination.name'],
          partition: first.attributes['messaging.destination.partition.id'],
          offset: first.attributes['messaging.kafka.offset'],
          group: first.attributes['messaging.consumer.group.name'],
          key: first.attributes['messaging.kafka.message.key'],
        },
        { system: 'kafka', destination: T, partition: '0', offset: 0, group: 'g', key: 'k0' },
      );
      assert.notEqual(second.spanContext().traceId, PRODUCER_TRACE, 'no traceparent: a new trace');
      assert.equal(second.links.length, 0);
      for (const [i, parent] of [first, second].entries()) {
        const db = spans.find((s) => s.name === `db query ${i}`);
        assert.ok(db, `db query ${i}`);
        assert.equal(
          db.parentSpanContext?.spanId,
          parent.spanContext().spanId,
          'child of the consume span',
        );
        assert.equal(db.spanContext().traceId, parent.spanContext().traceId);
      }
    });

    it('records a failure on the span; a batch span links every producer', async () => {
      const tracer = provider.getTracer('test');
      const h = harness({ tracing: openTelemetryTracing(api, { tracer }) });
      let error: unknown;
      subs.push(
        h.consumer
          .processBatch(
            (batch) => {
              if (batch.offset === 0) throw new Error('bad batch');
            },
            { maxSize: 3, maxWaitMs: 5, retry: 0, onFailure: 'stop' },
          )
          .subscribe({ error: (e: unknown) => (error = e) }),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 3);
      traceparents(h, 3);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => error !== undefined, 'stopped');
      const [span] = exporter.getFinishedSpans().filter((s) => s.name === `process ${T}`);
      assert.ok(span);
      assert.equal(span.status.code, api.SpanStatusCode.ERROR);
      assert.equal(span.status.message, 'bad batch');
      assert.equal(span.attributes['messaging.batch.message_count'], 3);
      assert.equal(span.links.length, 3);
      assert.ok(span.events.some((e) => e.name === 'exception'));
    });

    it("an Observable handler's span lasts until it completes, and its subscription runs in the span", async () => {
      const tracer = provider.getTracer('test');
      const h = harness({ tracing: openTelemetryTracing(api, { tracer }) });
      const activeInside: (string | undefined)[] = [];
      const completedAt: number[] = [];
      const subscribedAt: number[] = [];
      subs.push(
        h.consumer
          .process(
            () =>
              new Observable<string>((subscriber) => {
                activeInside.push(api.trace.getActiveSpan()?.spanContext().spanId);
                subscribedAt.push(performance.now());
                const timer = setTimeout(() => {
                  tracer.startSpan('inside the observable').end();
                  completedAt.push(performance.now());
                  subscriber.next('done');
                  subscriber.complete();
                }, 30);
                return () => clearTimeout(timer);
              }),
          )
          .subscribe(),
      );
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 1);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(h) === 1, 'committed');
      await h.consumer.close();
      const spans = exporter.getFinishedSpans();
      const [span] = spans.filter((x) => x.name === `process ${T}`);
      assert.ok(span);
      // Monotonic time on both sides (a span's end is its start plus performance.now() elapsed; its
      // start is Date.now(), whole milliseconds, which may differ from any other clock read): the
      // span, started before the subscription, lasts at least from the subscription to completion.
      const lasted = span.duration[0] * 1000 + span.duration[1] / 1e6;
      const ran = (completedAt[0] ?? Infinity) - (subscribedAt[0] ?? 0);
      assert.ok(lasted >= ran, `ended once the Observable completed (${lasted} ms ≥ ${ran} ms)`);
      assert.deepEqual(activeInside, [span.spanContext().spanId], 'subscribed inside the span');
      const inner = spans.find((x) => x.name === 'inside the observable');
      assert.equal(inner?.parentSpanContext?.spanId, span.spanContext().spanId);
    });

    it('traces processTransactional() handlers too', async () => {
      const tracer = provider.getTracer('test');
      const s = transactionalHarness({}, { tracing: openTelemetryTracing(api, { tracer }) });
      subs.push(
        s.consumer
          .processTransactional((m: KafkaMessage) => [{ topic: 'out', value: `${m.offset}` }], {
            transactionalId: 'tx-traced',
          })
          .subscribe(),
      );
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 2);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(s) === 2, 'committed');
      await s.consumer.close();
      const spans = exporter.getFinishedSpans().filter((x) => x.name === `process ${T}`);
      assert.deepEqual(
        spans.map((x) => x.attributes['messaging.kafka.offset']),
        [0, 1],
      );
    });

    it("a commit span is no handler span's child, and a tracer shared by two groups links each commit to its own messages", async () => {
      const tracer = provider.getTracer('test');
      const tracing = openTelemetryTracing(api, { tracer });
      const groups = ['ga', 'gb'].map((g) =>
        transactionalHarness({}, { tracing, config: { 'group.id': g } as never }),
      );
      for (const [i, s] of groups.entries()) {
        subs.push(
          s.consumer
            .processTransactional(
              // An Observable handler: its settle (and a full transaction's commit) runs inside
              // the handler span's context.
              (m: KafkaMessage) =>
                new Observable<{ topic: string; value: string }[]>((o) => {
                  setTimeout(() => {
                    o.next([{ topic: 'out', value: `${m.offset}` }]);
                    o.complete();
                  }, 1);
                }),
              { transactionalId: `tx-${i}`, maxMessages: 2 },
            )
            .subscribe(),
        );
      }
      for (const s of groups) {
        await until(() => s.fake().isConnected(), 'connect');
        s.fake().produce(T, 0, 4);
        s.fake().rebalanceAssign([tp(0)]);
      }
      for (const s of groups) await until(() => committed(s) === 4, 'committed');
      for (const s of groups) await s.consumer.close();
      const finished = exporter.getFinishedSpans();
      const handlers = new Map(
        finished
          .filter((x) => x.name === `process ${T}`)
          .map((x) => [x.spanContext().spanId, x.attributes['messaging.consumer.group.name']]),
      );
      const commits = finished.filter((x) => x.name === 'commit transaction');
      assert.ok(commits.length >= 4, `${commits.length} commit spans`);
      for (const c of commits) {
        assert.equal(c.parentSpanContext, undefined, 'a commit span is a root');
        for (const l of c.links) {
          assert.equal(
            handlers.get(l.context.spanId),
            c.attributes['messaging.consumer.group.name'],
          );
        }
      }
      assert.equal(
        commits.reduce((n, c) => n + c.links.length, 0),
        8,
        'every handler span linked once',
      );
    });

    it("makes each transaction's commit a span linked to the handler spans of its messages", async () => {
      const tracer = provider.getTracer('test');
      const s = transactionalHarness({}, { tracing: openTelemetryTracing(api, { tracer }) });
      subs.push(
        s.consumer
          .processTransactional((m: KafkaMessage) => [{ topic: 'out', value: `${m.offset}` }], {
            transactionalId: 'tx-commit-span',
          })
          .subscribe(),
      );
      await until(() => s.fake().isConnected(), 'connect');
      s.fake().produce(T, 0, 3);
      s.fake().rebalanceAssign([tp(0)]);
      await until(() => committed(s) === 3, 'committed');
      await s.consumer.close();
      const finished = exporter.getFinishedSpans();
      const handlers = finished.filter((x) => x.name === `process ${T}`);
      const commits = finished.filter((x) => x.name === 'commit transaction');
      assert.ok(commits.length >= 1, `commit spans: ${finished.map((x) => x.name).join(', ')}`);
      // Every handler span is linked from exactly one commit span, and only committed ones exist.
      const linked = commits.flatMap((c) => c.links.map((l) => l.context.spanId));
      assert.deepEqual(
        [...linked].sort(),
        handlers.map((x) => x.spanContext().spanId).sort(),
        'each message in a committed transaction is linked from its commit',
      );
      for (const c of commits) {
        assert.equal(c.attributes['messaging.kafka.transactional_id'], 'tx-commit-span');
        assert.equal(c.attributes['messaging.operation.type'], 'settle');
        assert.equal(c.status.code, api.SpanStatusCode.UNSET);
      }
      assert.equal(
        commits.reduce((n, c) => n + Number(c.attributes['messaging.batch.message_count']), 0),
        3,
      );
    });
  });
});
