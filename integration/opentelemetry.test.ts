import assert from 'node:assert/strict';
import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { openTelemetryTracing } from '../lib';
import { committedOffsets, createTopic, produce, uniqueName, waitFor } from './helpers/kafka';
import { useConsumers } from './helpers/consumers';
import { useTestOutput } from './helpers/output';

/**
 * OpenTelemetry against the real broker: a record produced with a W3C `traceparent` header is
 * consumed by `process()` with `openTelemetryTracing(api)`; the consume span continues the
 * producer's trace, and a span the handler starts is the consume span's child.
 */
describe('OpenTelemetry (real broker)', function () {
  this.timeout(60_000);
  const output = useTestOutput();
  const { consumer, subs } = useConsumers(output);
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
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

  it("continues the producer's trace; the handler's spans are children of the consume span", async () => {
    const topic = uniqueName('otel');
    const group = uniqueName('otel-group');
    await createTopic(topic, 1);
    const tracer = provider.getTracer('test');
    // The producer side: a span whose context travels in the record's headers.
    const sent = tracer.startSpan('send order');
    const carrier: Record<string, string> = {};
    api.propagation.inject(api.trace.setSpan(api.ROOT_CONTEXT, sent), carrier);
    sent.end();
    assert.ok(carrier.traceparent, 'the propagator wrote a traceparent');
    await produce(topic, [
      { key: 'order-1', value: 'traced', headers: [{ traceparent: carrier.traceparent }] },
      { key: 'order-2', value: 'untraced' },
    ]);
    const c = consumer('otel', {
      config: { 'group.id': group },
      topics: [topic],
      tracing: openTelemetryTracing(api, { tracer }),
    });
    subs.push(
      c
        .process(async (m) => {
          const child = tracer.startSpan(`db ${m.key?.toString() ?? ''}`);
          await new Promise((r) => setTimeout(r, 5));
          child.end();
        })
        .subscribe(),
    );
    await waitFor(async () => (await committedOffsets(group, topic, 1))[0] === 2, {
      timeoutMs: 30_000,
      what: 'both records committed',
    });
    const spans = exporter.getFinishedSpans();
    const consumeSpans = spans.filter((s) => s.name === `process ${topic}`);
    assert.equal(consumeSpans.length, 2);
    const traced = consumeSpans.find(
      (s) => s.attributes['messaging.kafka.message.key'] === 'order-1',
    );
    const untraced = consumeSpans.find(
      (s) => s.attributes['messaging.kafka.message.key'] === 'order-2',
    );
    assert.ok(traced && untraced);
    assert.equal(traced.kind, api.SpanKind.CONSUMER);
    assert.equal(
      traced.spanContext().traceId,
      sent.spanContext().traceId,
      "the producer's trace id flows",
    );
    assert.equal(traced.parentSpanContext?.spanId, sent.spanContext().spanId);
    assert.equal(traced.links[0]?.context.spanId, sent.spanContext().spanId);
    assert.equal(traced.attributes['messaging.destination.name'], topic);
    assert.equal(traced.attributes['messaging.consumer.group.name'], group);
    assert.equal(traced.attributes['messaging.kafka.offset'], 0);
    assert.notEqual(untraced.spanContext().traceId, sent.spanContext().traceId);
    for (const [key, parent] of [
      ['order-1', traced],
      ['order-2', untraced],
    ] as const) {
      const db = spans.find((s) => s.name === `db ${key}`);
      assert.ok(db, `db ${key}`);
      assert.equal(db.parentSpanContext?.spanId, parent.spanContext().spanId);
      assert.equal(db.spanContext().traceId, parent.spanContext().traceId);
    }
  });
});
