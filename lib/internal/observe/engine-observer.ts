/**
 * The hooks the consumer engine calls for observability. The engine knows nothing about metrics,
 * Prometheus or diagnostics channels; it reports what happened through this interface, one call per
 * fact, with primitive arguments so that an unobserved engine pays almost nothing.
 */
import type { TopicPartitionOffset } from '../binding/rdkafka';

/** Which commit: the periodic one, or the final commit of a revoke. */
export type CommitKind = 'periodic' | 'revoke';

/** @internal */
export interface EngineObserver {
  /** A message was handed to its partition's pipeline. */
  received(topic: string, partition: number): void;
  /** A commit request ended: confirmed by the broker (`err` undefined) or failed. */
  commit(
    kind: CommitKind,
    offsets: readonly TopicPartitionOffset[],
    durationMs: number,
    err?: unknown,
  ): void;
}

/** The observer of an engine nobody observes. @internal */
export const NO_OBSERVER: EngineObserver = {
  received: () => undefined,
  commit: () => undefined,
};
