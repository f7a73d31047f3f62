/**
 * Diagnostics events on `node:diagnostics_channel`, for tracing and APM integrations. Subscribe with
 * `diagnostics_channel.subscribe(DiagnosticsChannel.commit, (payload) => …)`.
 *
 * Subscribers run synchronously, inside the consumer's own code path (the consume loop, a handler's
 * start and end, a commit's completion): a slow subscriber slows the consumer down, and one that
 * throws is reported by Node as an uncaught exception on the next tick. Keep subscribers cheap and
 * hand real work to a queue. The library publishes only while a channel has subscribers and builds
 * payloads only then.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { CommitKind } from './internal/observe/engine-observer';
import type { KafkaMessage, RebalanceEvent, TopicPartition } from './types';

export type { CommitKind };

/** The channel names (stable; part of the public API). */
export const DiagnosticsChannel = {
  /** Every rebalance phase: {@link RebalanceDiagnostics}. */
  rebalance: 'reactive-rdkafka:rebalance',
  /** Every commit request's outcome: {@link CommitDiagnostics}. */
  commit: 'reactive-rdkafka:commit',
  /** A handler starts (`process()`): {@link HandlerDiagnostics}. */
  handlerStart: 'reactive-rdkafka:handler:start',
  /** The same handler ends; the same object as its start, completed: {@link HandlerDiagnostics}. */
  handlerEnd: 'reactive-rdkafka:handler:end',
  /** A handler passed `stallThresholdMs`, and again when it ends: {@link StallDiagnostics}. */
  handlerStall: 'reactive-rdkafka:handler:stall',
  /** Every librdkafka statistics report, parsed: {@link StatsDiagnostics}. */
  stats: 'reactive-rdkafka:stats',
} as const;

/** One of the channel names in {@link DiagnosticsChannel}. */
export type DiagnosticsChannelName = (typeof DiagnosticsChannel)[keyof typeof DiagnosticsChannel];

/** Fields every payload has. */
export interface DiagnosticsBase {
  /** The consumer's `group.id`. */
  readonly group: string;
  /** The consumer's `client.id`, if configured. */
  readonly clientId: string | undefined;
}

/** Payload of `reactive-rdkafka:rebalance`. */
export interface RebalanceDiagnostics extends DiagnosticsBase {
  readonly event: RebalanceEvent;
}

/** Payload of `reactive-rdkafka:commit`. */
export interface CommitDiagnostics extends DiagnosticsBase {
  /** `periodic` (every `commitIntervalMs`) or `revoke` (a revoke's final commit, or a retry). */
  readonly kind: CommitKind;
  /** The offsets sent (each the next offset to read). */
  readonly offsets: readonly (TopicPartition & { readonly offset: number })[];
  /** True when the broker confirmed the commit. */
  readonly ok: boolean;
  /** Request sent → confirmation or failure, in ms. */
  readonly durationMs: number;
  /** The failure, when `ok` is false. */
  readonly error: unknown;
}

/**
 * Payload of `reactive-rdkafka:handler:start` and `reactive-rdkafka:handler:end`: one object per
 * handler invocation, published at the start and again (same object, `outcome` and `durationMs`
 * filled in) at the end, so a tracer can keep its span on it (for example in a `WeakMap`).
 */
export interface HandlerDiagnostics extends DiagnosticsBase {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  /** The assignment generation the message was delivered in. */
  readonly generation: number | undefined;
  /** The message (headers carry trace context). */
  readonly message: KafkaMessage;
  /** When the handler started (ms since the epoch). */
  readonly startedAt: number;
  /** Set at the end: `ok`, `failed`, or `cancelled` (an Observable handler unsubscribed early). */
  outcome: 'ok' | 'failed' | 'cancelled' | undefined;
  /** Set at the end, in ms. */
  durationMs: number | undefined;
  /** Set at the end when `outcome` is `failed`. */
  error: unknown;
}

/** Payload of `reactive-rdkafka:handler:stall`. */
export interface StallDiagnostics extends DiagnosticsBase {
  /** `stalled` when the threshold passes; `completed` when the stalled handler finally ends. */
  readonly phase: 'stalled' | 'completed';
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly generation: number | undefined;
  /** Running time so far (`stalled`) or in total (`completed`), in ms. */
  readonly elapsedMs: number;
  readonly thresholdMs: number;
}

/** Payload of `reactive-rdkafka:stats`. */
export interface StatsDiagnostics extends DiagnosticsBase {
  /** librdkafka's statistics object (STATISTICS.md), parsed from its JSON. */
  readonly stats: unknown;
}

/** The channels, created once. @internal */
export const channels = {
  rebalance: diagnosticsChannel.channel(DiagnosticsChannel.rebalance),
  commit: diagnosticsChannel.channel(DiagnosticsChannel.commit),
  handlerStart: diagnosticsChannel.channel(DiagnosticsChannel.handlerStart),
  handlerEnd: diagnosticsChannel.channel(DiagnosticsChannel.handlerEnd),
  handlerStall: diagnosticsChannel.channel(DiagnosticsChannel.handlerStall),
  stats: diagnosticsChannel.channel(DiagnosticsChannel.stats),
} as const;

/** Publishes on a channel only when it has subscribers; `build` runs only then. @internal */
export function publish<T>(channel: diagnosticsChannel.Channel, build: () => T): void {
  if (channel.hasSubscribers) channel.publish(build());
}
