/**
 * OpenTelemetry for handlers: `tracing: openTelemetryTracing(api)` makes each handler call a
 * CONSUMER span — a child of the producer's span when the message carries W3C `traceparent` /
 * `tracestate` headers (the producer's trace id flows on), linked to it too — and runs the handler
 * inside that span's context, so the handler's own spans (database, HTTP) are its children.
 *
 * `@opentelemetry/api` is an optional peer dependency: pass the module you use
 * (`import * as api from '@opentelemetry/api'`), so the library never imports it itself.
 */
import { isObservable } from 'rxjs';
import { withEnd } from './internal/observe/observable-end';
import type {
  HandlerTrace,
  HandlerTracer,
  TransactionSpanHandle,
  TransactionTrace,
} from './tracing';

// The parts of `@opentelemetry/api` this integration uses, structurally: the package's types stay
// optional for users who do not use OpenTelemetry (the module itself satisfies them).
/** An OpenTelemetry context (opaque here). */
export type OtelContext = object;
/** The fields of a span context this integration reads. */
export interface OtelSpanContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
}
/** The span methods this integration calls. */
export interface OtelSpan {
  end(): void;
  /** Its context (the links of a transaction's commit span point at handler spans). */
  spanContext?(): OtelSpanContext;
  recordException(exception: Error | string): void;
  setStatus(status: { code: number; message?: string }): unknown;
}
/** The tracer method this integration calls. */
export interface OtelTracer {
  startSpan(
    name: string,
    options?: {
      kind?: number;
      attributes?: Record<string, string | number | boolean>;
      links?: { context: OtelSpanContext }[];
    },
    context?: OtelContext,
  ): OtelSpan;
}
interface OtelTextMapGetter<C> {
  keys(carrier: C): string[];
  get(carrier: C, key: string): undefined | string | string[];
}
/** What `openTelemetryTracing` needs of `@opentelemetry/api` (pass the module itself). */
export interface OpenTelemetryApi {
  readonly trace: {
    getTracer(name: string, version?: string): OtelTracer;
    getSpanContext(context: OtelContext): OtelSpanContext | undefined;
    isSpanContextValid(spanContext: OtelSpanContext): boolean;
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
  };
  readonly propagation: {
    extract<C>(context: OtelContext, carrier: C, getter?: OtelTextMapGetter<C>): OtelContext;
  };
  readonly context: {
    active(): OtelContext;
    with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
      context: OtelContext,
      fn: F,
      thisArg?: ThisParameterType<F>,
      ...args: A
    ): ReturnType<F>;
  };
  readonly ROOT_CONTEXT: OtelContext;
  readonly SpanKind: { readonly CONSUMER: number; readonly CLIENT?: number };
  readonly SpanStatusCode: { readonly ERROR: number };
}

export interface OpenTelemetryTracingOptions {
  /** The tracer to start spans with. @default `api.trace.getTracer('reactive-rdkafka')` */
  tracer?: OtelTracer;
  /** Record the message key as `messaging.kafka.message.key` (UTF-8). @default true */
  recordKey?: boolean;
}

type Headers = ReadonlyArray<readonly [string, Buffer]>;

/** Reads W3C trace context from Kafka headers (names compared case-insensitively). */
const headerGetter: OtelTextMapGetter<Headers> = {
  keys: (carrier) => carrier.map(([k]) => k),
  get: (carrier, key) => {
    const wanted = key.toLowerCase();
    const found = carrier.find(([k]) => k.toLowerCase() === wanted);
    return found ? found[1].toString('utf8') : undefined;
  },
};

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as { then?: unknown }).then === 'function';

/** Handler spans remembered for the commit span of their transaction, at most. */
const MAX_REMEMBERED_SPANS = 100_000;
/** `SpanKind.CLIENT` of `@opentelemetry/api`, for an api object that does not spell it. */
const SPAN_KIND_CLIENT = 2;

/**
 * A {@link HandlerTracer} that makes each handler call an OpenTelemetry CONSUMER span, and each
 * `processTransactional()` commit a `commit transaction` span linked to the handler spans of the
 * messages in it.
 */
export function openTelemetryTracing(
  api: OpenTelemetryApi,
  options: OpenTelemetryTracingOptions = {},
): HandlerTracer {
  const tracer = options.tracer ?? api.trace.getTracer('reactive-rdkafka');
  const recordKey = options.recordKey ?? true;
  /**
   * The span of each `processTransactional()` handler call whose transaction has not committed
   * yet, by input: its commit span links them. Bounded: the oldest are dropped past the limit (a
   * transaction that never commits leaves nothing behind for long).
   */
  const inTransaction = new Map<string, OtelSpanContext>();
  const inputKey = (group: string, topic: string, partition: number, offset: number): string =>
    `${group}\u0000${topic}\u0000${partition}\u0000${offset}`;
  const remember = (trace: HandlerTrace, span: OtelSpan): void => {
    const sc = span.spanContext?.();
    if (sc === undefined) return;
    const key = inputKey(trace.group, trace.topic, trace.partition, trace.offset);
    inTransaction.delete(key); // a redone input: the newest call counts
    inTransaction.set(key, sc);
    if (inTransaction.size > MAX_REMEMBERED_SPANS) {
      inTransaction.delete(inTransaction.keys().next().value as string);
    }
  };
  const fail = (span: OtelSpan, err: unknown): void => {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({
      code: api.SpanStatusCode.ERROR,
      message: err instanceof Error ? err.message : String(err),
    });
  };
  return {
    around<T>(trace: HandlerTrace, run: () => T): T {
      const messages = trace.message ? [trace.message] : (trace.batch?.messages ?? []);
      const links: { context: OtelSpanContext }[] = [];
      let producer: OtelContext | undefined;
      for (const m of messages) {
        const extracted = api.propagation.extract(api.ROOT_CONTEXT, m.headers, headerGetter);
        const sc = api.trace.getSpanContext(extracted);
        if (sc === undefined || !api.trace.isSpanContextValid(sc)) continue;
        links.push({ context: sc });
        producer ??= extracted;
      }
      // One message: its producer's context is the parent (the trace id flows on). A batch keeps
      // the caller's context and links every message's producer.
      const parent = (trace.message ? producer : undefined) ?? api.context.active();
      const attributes: Record<string, string | number | boolean> = {
        'messaging.system': 'kafka',
        'messaging.operation.type': 'process',
        'messaging.operation.name': 'process',
        'messaging.destination.name': trace.topic,
        'messaging.destination.partition.id': String(trace.partition),
        'messaging.consumer.group.name': trace.group,
        'messaging.kafka.offset': trace.offset,
      };
      if (trace.batch) attributes['messaging.batch.message_count'] = messages.length;
      const key: unknown = trace.message?.key;
      if (recordKey && (Buffer.isBuffer(key) || typeof key === 'string')) {
        attributes['messaging.kafka.message.key'] = key.toString('utf8');
      }
      const span = tracer.startSpan(
        `process ${trace.topic}`,
        { kind: api.SpanKind.CONSUMER, attributes, links },
        parent,
      );
      if (trace.transactional) remember(trace, span);
      const inSpan = api.trace.setSpan(parent, span);
      let result: T;
      try {
        result = api.context.with(inSpan, run);
      } catch (err) {
        fail(span, err);
        span.end();
        throw err;
      }
      if (isObservable(result)) {
        // An Observable handler's work happens when it is subscribed: the span lasts until it
        // completes (or errors, or is unsubscribed), and its subscription runs in the span.
        return withEnd(
          result,
          (subscribe) => api.context.with(inSpan, subscribe),
          (failure) => {
            if (failure !== undefined) fail(span, failure.error);
            span.end();
          },
        ) as T;
      }
      if (!isPromiseLike(result)) {
        span.end();
        return result;
      }
      return Promise.resolve(result).then(
        (value) => {
          span.end();
          return value;
        },
        (err: unknown) => {
          fail(span, err);
          span.end();
          throw err;
        },
      ) as T;
    },
    transaction(trace: TransactionTrace): TransactionSpanHandle {
      const links: { context: OtelSpanContext }[] = [];
      for (const input of trace.inputs) {
        const key = inputKey(trace.group, input.topic, input.partition, input.offset);
        const sc = inTransaction.get(key);
        if (sc === undefined) continue;
        inTransaction.delete(key);
        links.push({ context: sc });
      }
      const topics = [...new Set(trace.offsets.map((o) => o.topic))];
      const attributes: Record<string, string | number | boolean> = {
        'messaging.system': 'kafka',
        'messaging.operation.type': 'settle',
        'messaging.operation.name': 'commit',
        'messaging.consumer.group.name': trace.group,
        'messaging.kafka.transactional_id': trace.transactionalId,
        'messaging.kafka.transaction.kind': trace.kind,
        'messaging.batch.message_count': trace.messages,
        'messaging.kafka.transaction.records': trace.records,
      };
      if (topics.length === 1) attributes['messaging.destination.name'] = topics[0]!;
      const span = tracer.startSpan(
        'commit transaction',
        { kind: api.SpanKind.CLIENT ?? SPAN_KIND_CLIENT, attributes, links },
        // A commit is no message's child (it may run inside a handler's context): a root, with links.
        api.ROOT_CONTEXT,
      );
      let ended = false;
      return {
        end(error?: unknown): void {
          if (ended) return;
          ended = true;
          if (error !== undefined) fail(span, error);
          span.end();
        },
      };
    },
  };
}
