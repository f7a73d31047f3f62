/**
 * Tracing around each handler call, in the two shapes tracing tools use:
 *
 * - **`diagnostics_channel.tracingChannel`** (`reactive-rdkafka:handler`, `reactive-rdkafka:batch`):
 *   `start` / `end` around the call, `asyncStart` / `asyncEnd` when a returned Promise settles,
 *   `error` on a failure — the events APM agents subscribe to, and whose `start` channel's stores
 *   (`bindStore`) are active inside the handler. Nothing is built while nobody subscribes.
 * - **A tracer hook** (`ReactiveConsumerOptions.tracing`): runs the handler inside a context of its
 *   choosing, so the handler's own spans (a database call, an HTTP request) become children of the
 *   message's span. {@link openTelemetryTracing} is one, for `@opentelemetry/api`.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { isObservable } from 'rxjs';
import { withEnd } from './internal/observe/observable-end';
import type { HandlerResult, KafkaMessage, MessageBatch } from './types';

/** The tracing channel names (stable; part of the public API). */
export const TracingChannel = {
  /** Each `process()` handler call: {@link HandlerTrace}. */
  handler: 'reactive-rdkafka:handler',
  /** Each `processBatch()` handler call: {@link HandlerTrace}. */
  batch: 'reactive-rdkafka:batch',
} as const;

/** The context object of one traced handler call (the same object on every event of the call). */
export interface HandlerTrace {
  /** The consumer's `group.id`. */
  readonly group: string;
  readonly topic: string;
  readonly partition: number;
  /** The message's offset (a batch: its first). */
  readonly offset: number;
  /** The message (`process()`; key and value decoded when deserializers are set), undefined for a batch. */
  readonly message: KafkaMessage | undefined;
  /** The batch (`processBatch()`), undefined for a single message. */
  readonly batch: MessageBatch<unknown, unknown> | undefined;
  /** What the handler returned (or its Promise resolved to), once known. */
  result?: unknown;
  /** Why it failed, if it did. */
  error?: unknown;
  /** The call is a `processTransactional()` handler's: its message's commit is a {@link TransactionTrace}. */
  readonly transactional?: boolean;
}

/** The commit of one `processTransactional()` transaction (sendOffsetsToTransaction → commit). */
export interface TransactionTrace {
  /** The consumer's `group.id`. */
  readonly group: string;
  readonly transactionalId: string;
  /** `periodic` (size, age, `commit()`) or `revoke` (a revoke's final commit). */
  readonly kind: 'periodic' | 'revoke';
  /** Input messages whose records are in it. */
  readonly messages: number;
  /** Output records in it. */
  readonly records: number;
  /** The input messages in it, in the order their records went in (the handler calls it links). */
  readonly inputs: readonly {
    readonly topic: string;
    readonly partition: number;
    readonly offset: number;
  }[];
  /** The input offsets it commits. */
  readonly offsets: readonly {
    readonly topic: string;
    readonly partition: number;
    readonly offset: number;
  }[];
}

/** A transaction commit being traced: ended once, with the failure when it was not committed. */
export interface TransactionSpanHandle {
  end(error?: unknown): void;
}

/**
 * Runs each handler call inside a tracing context (`ReactiveConsumerOptions.tracing`). `run` calls
 * the handler; return what it returns. A Promise result is the whole call: end the span when it
 * settles.
 */
export interface HandlerTracer {
  around<T>(trace: HandlerTrace, run: () => T): T;
  /**
   * A `processTransactional()` transaction starts committing (optional): return a handle ended
   * when the broker confirmed it (`end()`), or with the reason it was aborted or failed.
   */
  transaction?(trace: TransactionTrace): TransactionSpanHandle;
}

const channels = {
  handler: diagnosticsChannel.tracingChannel<object, HandlerTrace & object>(TracingChannel.handler),
  batch: diagnosticsChannel.tracingChannel<object, HandlerTrace & object>(TracingChannel.batch),
};

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as { then?: unknown }).then === 'function';

type Channel = (typeof channels)['handler'];

/** Calls `run` with the tracing channel's events around it (its start stores active inside). */
function traced<T>(channel: Channel, trace: HandlerTrace, run: () => T): T {
  return channel.start.runStores(trace, () => {
    let result: T;
    try {
      result = run();
    } catch (err) {
      trace.error = err;
      channel.error.publish(trace);
      channel.end.publish(trace);
      throw err;
    }
    channel.end.publish(trace);
    if (isObservable(result)) {
      // The work of an Observable handler happens while it runs: asyncStart / asyncEnd (and error)
      // when it completes, errors or is unsubscribed, with the start stores active in its
      // subscription.
      return withEnd(
        result,
        (subscribe) => channel.start.runStores(trace, subscribe),
        (failure) => {
          if (failure !== undefined) {
            trace.error = failure.error;
            channel.error.publish(trace);
          }
          channel.asyncStart.publish(trace);
          channel.asyncEnd.publish(trace);
        },
        (value) => (trace.result = value),
      ) as T;
    }
    if (!isPromiseLike(result)) {
      trace.result = result;
      return result;
    }
    return Promise.resolve(result).then(
      (value) => {
        trace.result = value;
        channel.asyncStart.publish(trace);
        channel.asyncEnd.publish(trace);
        return value;
      },
      (err: unknown) => {
        trace.error = err;
        channel.error.publish(trace);
        channel.asyncStart.publish(trace);
        channel.asyncEnd.publish(trace);
        throw err;
      },
    ) as T;
  });
}

/**
 * Wraps a `process()` handler so each call is traced: untouched (the same function) when no
 * tracer is configured, and only a `hasSubscribers` check per call while nobody subscribes.
 * @internal
 */
export function traceHandler<
  M extends { readonly topic: string; readonly partition: number; readonly offset: number },
  R,
>(
  handler: (message: M) => HandlerResult<R>,
  group: string,
  tracer: HandlerTracer | undefined,
  transactional = false,
): (message: M) => HandlerResult<R> {
  const channel = channels.handler;
  return (message: M): HandlerResult<R> => {
    const subscribed = channel.hasSubscribers;
    if (!subscribed && tracer === undefined) return handler(message);
    const trace: HandlerTrace = {
      group,
      topic: message.topic,
      partition: message.partition,
      offset: message.offset,
      message: message as unknown as KafkaMessage,
      batch: undefined,
      ...(transactional ? { transactional } : {}),
    };
    const run = (): HandlerResult<R> =>
      subscribed ? traced(channel, trace, () => handler(message)) : handler(message);
    return tracer ? tracer.around(trace, run) : run();
  };
}

/** {@link traceHandler} for `processBatch()` handlers. @internal */
export function traceBatchHandler<K, V, R>(
  handler: (batch: MessageBatch<K, V>) => HandlerResult<R>,
  group: string,
  tracer: HandlerTracer | undefined,
): (batch: MessageBatch<K, V>) => HandlerResult<R> {
  const channel = channels.batch;
  return (batch: MessageBatch<K, V>): HandlerResult<R> => {
    const subscribed = channel.hasSubscribers;
    if (!subscribed && tracer === undefined) return handler(batch);
    const trace: HandlerTrace = {
      group,
      topic: batch.topic,
      partition: batch.partition,
      offset: batch.offset,
      message: undefined,
      batch: batch as MessageBatch<unknown, unknown>,
    };
    const run = (): HandlerResult<R> =>
      subscribed ? traced(channel, trace, () => handler(batch)) : handler(batch);
    return tracer ? tracer.around(trace, run) : run();
  };
}
