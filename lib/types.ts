import type { Observable, ObservableInput, OperatorFunction } from 'rxjs';

/** A topic and partition. */
export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

/** A Kafka record as handed to handlers and partition pipelines. */
export interface KafkaMessage {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Ordered `[key, value]` pairs; duplicate keys are kept. */
  readonly headers: ReadonlyArray<readonly [string, Buffer]>;
  /** Record timestamp in ms since the epoch, when the record has one. */
  readonly timestamp: number | undefined;
  /** Payload size in bytes. */
  readonly size: number;
  /** The assignment generation this message was delivered in. */
  readonly generation: number;
  /**
   * Aborted when the partition is lost or its drain deadline passes. One signal per partition
   * assignment: pass it to the I/O your handler does so it stops when the work no longer counts.
   */
  readonly signal: AbortSignal;
}

/** The rebalance protocol in use, as librdkafka reports it. */
export type RebalanceProtocol = 'EAGER' | 'COOPERATIVE' | 'NONE';

/** How each revoked partition's final commit ended. */
export type PartitionCommitResult =
  | (TopicPartition & { readonly status: 'committed'; readonly offset: number })
  | (TopicPartition & { readonly status: 'unchanged'; readonly offset: number | undefined })
  | (TopicPartition & {
      readonly status: 'failed';
      readonly offset: number;
      readonly reason: string;
    })
  | (TopicPartition & { readonly status: 'lost'; readonly reason: string });

/** Fields every {@link RebalanceEvent} has. */
export interface RebalanceEventBase {
  /** Increases with every assignment change. */
  readonly generation: number;
  readonly partitions: readonly TopicPartition[];
  readonly protocol: RebalanceProtocol;
  /** When the event was emitted (ms since the epoch). */
  readonly at: number;
}

/**
 * One phase of a rebalance. A revoke emits `revoking → drained → committed → revoked` in that order;
 * an assignment emits `assigned`; partitions taken away without a chance to commit emit `lost`.
 */
export type RebalanceEvent =
  | (RebalanceEventBase & { readonly type: 'assigned' })
  | (RebalanceEventBase & { readonly type: 'revoking' })
  | (RebalanceEventBase & {
      readonly type: 'drained';
      /** Handlers in flight on these partitions when the revoke arrived. */
      readonly inFlight: number;
      /** Handlers still running when the drain ended (non-zero only on timeout). */
      readonly stragglers: number;
      readonly timedOut: boolean;
      /** revoking → drained, in ms. */
      readonly durationMs: number;
    })
  | (RebalanceEventBase & {
      readonly type: 'committed';
      readonly results: readonly PartitionCommitResult[];
      /** drained → committed, in ms. */
      readonly durationMs: number;
    })
  | (RebalanceEventBase & {
      readonly type: 'revoked';
      /** committed → revoked, in ms. */
      readonly durationMs: number;
      /** revoking → revoked, in ms. */
      readonly totalMs: number;
    })
  | (RebalanceEventBase & { readonly type: 'lost'; readonly reason: string });

/** The phase names of {@link RebalanceEvent}: `assigned | revoking | drained | committed | revoked | lost`. */
export type RebalanceEventType = RebalanceEvent['type'];

/** What `process()` emits for each message whose handler succeeded. */
export interface Processed<R = unknown> {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly generation: number;
  /** The handler's result (last value for an Observable handler). */
  readonly result: R | undefined;
}

/** A handler's return: a plain value, a Promise, or an Observable (processed when it completes). */
export type HandlerResult<R> = R | Promise<R> | Observable<R>;

/**
 * A message handler for `process()`: the message counts as processed when the returned Promise
 * resolves, the Observable completes, or a plain value is returned; a throw, rejection or error is a
 * failure.
 */
export type MessageHandler<R = unknown> = (message: KafkaMessage) => HandlerResult<R>;

/** Options of `process()`. */
export interface ProcessOptions {
  /** Most handlers in flight across all partitions; a fair pool. @default 64 */
  concurrency?: number;
  /** Most handlers in flight within one partition; 1 keeps offset order. @default 1 */
  partitionConcurrency?: number;
}

/**
 * One partition of one assignment, as a stream. Its `messages$` completes when the partition is
 * revoked (or lost, or the consumer closes). Mark each message finished with `ack()` (or the
 * `acknowledge()` operator); the library commits up to the contiguous finished prefix, and on a
 * revoke waits until the pipeline is drained before committing and releasing the partition.
 *
 * The pipeline is drained when the Observable returned by `acknowledge()` finalizes (completes,
 * errors or is unsubscribed), or when `messages$` completed and every delivered message was acked.
 */
export interface PartitionStream extends TopicPartition {
  readonly generation: number;
  /** Aborted when the partition is lost or its drain deadline passes. */
  readonly signal: AbortSignal;
  /** The partition's messages, in offset order. Single subscriber. */
  readonly messages$: Observable<KafkaMessage>;
  /** False once the partition is being revoked: skip starting work on buffered messages. */
  readonly active: boolean;
  /**
   * Like `mergeMap(project, concurrency)` over this partition's messages (or batches of them),
   * except that values still waiting for a slot when the partition is revoked are dropped (never started, never
   * committed; the next owner gets them). Use it instead of `mergeMap`/`concatMap`, whose buffers
   * would otherwise run every buffered message before the partition can be released.
   */
  run<T, R>(
    project: (value: T) => ObservableInput<R>,
    concurrency?: number,
  ): OperatorFunction<T, R>;
  /** Marks a message finished (its offset may be committed once everything before it is). */
  ack(message: KafkaMessage): void;
  /**
   * An operator that acks every message it sees and, when it finalizes, tells the library this
   * partition's pipeline is drained. Put it last in the partition's pipeline.
   */
  acknowledge<T extends KafkaMessage>(): OperatorFunction<T, T>;
}
