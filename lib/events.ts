/**
 * The events a consumer emits: the rebalance phases of `rebalances$` and the operational events of
 * `events$` (re-exported by types.ts).
 */
import type { TopicPartition } from './types';

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
 * Every partition an `assigned` event names is named by a later `revoked` or `lost` event before
 * `rebalances$` completes (a partition released without a revoke, as at a close's disconnect, goes
 * through `revoking → drained → committed → revoked` at once when nothing was processed since its
 * last confirmed commit, else ends in `lost`).
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
      /**
       * `processTransactional()` only: what the revoke's commit did with the open transaction
       * (the results' offsets went into it, with the outputs of the messages they cover).
       */
      readonly transaction?: RevokeTransaction;
      /** drained → committed, in ms. */
      readonly durationMs: number;
    })
  | (RebalanceEventBase & {
      readonly type: 'revoked';
      /** committed → revoked, in ms. */
      readonly durationMs: number;
      /** revoking → revoked, in ms. */
      readonly totalMs: number;
      /**
       * False when the group does not hand the partitions to another member: a static member
       * (`group.instance.id`) that closes releases them locally, but the broker keeps them
       * assigned to its instance id until its session times out (nobody consumes them meanwhile),
       * so a restart within that time resumes them without a rebalance.
       */
      readonly handedOver: boolean;
    })
  | (RebalanceEventBase & { readonly type: 'lost'; readonly reason: string });

/** What a revoke's commit did with the open transaction (`processTransactional()`). */
export interface RevokeTransaction {
  /** `none`: nothing was open and no offset had moved. */
  readonly outcome: 'committed' | 'aborted' | 'failed' | 'none';
  /** Input messages and output records the transaction held. */
  readonly messages: number;
  readonly records: number;
  readonly reason?: string;
}

/** The phase names of {@link RebalanceEvent}: `assigned | revoking | drained | committed | revoked | lost`. */
export type RebalanceEventType = RebalanceEvent['type'];

/** Fields every {@link ConsumerEvent} has. */
export interface ConsumerEventBase {
  /** When the event was emitted (ms since the epoch). */
  readonly at: number;
}

/**
 * Things an operator should know about that are not rebalances: failure-policy outcomes, offset
 * resets (records skipped), unavailable topics and transient client errors.
 */
export type ConsumerEvent =
  | (ConsumerEventBase & {
      readonly type: 'handler-retry';
      readonly topic: string;
      readonly partition: number;
      readonly offset: number;
      /** The attempt that failed (1 = the first call). */
      readonly attempt: number;
      readonly delayMs: number;
      readonly error: unknown;
    })
  | (ConsumerEventBase & {
      readonly type: 'message-skipped' | 'dead-lettered' | 'message-failed';
      readonly topic: string;
      readonly partition: number;
      readonly offset: number;
      readonly attempts: number;
      readonly error: unknown;
      /** The dead-letter topic (`dead-lettered` only). */
      readonly deadLetterTopic?: string;
    })
  | (ConsumerEventBase & {
      readonly type: 'offset-reset';
      readonly topic: string;
      readonly partition: number;
      /** The offset the consumer tried to fetch (usually the committed one). */
      readonly from: number | undefined;
      /** Where fetching resumed; `from → to` are the offsets jumped. */
      readonly to: number | undefined;
      /** `earliest` or `latest` (auto.offset.reset), or an explicit offset. */
      readonly resetTo: string;
      readonly reason: string;
    })
  | (ConsumerEventBase & {
      readonly type: 'topic-unavailable';
      readonly topic: string | undefined;
      /** `unknown`: the topic does not exist (yet); `not-authorized`: the ACLs forbid reading it. */
      readonly reason: 'unknown' | 'not-authorized';
      readonly kafkaCode: number;
      readonly message: string;
    })
  | (ConsumerEventBase & {
      /** The `onRevoke` hook threw, rejected, or was still running at its deadline. */
      readonly type: 'revoke-hook-failed';
      readonly partitions: readonly { readonly topic: string; readonly partition: number }[];
      /** What it threw, or a `TimeoutError` when it ran past its deadline. */
      readonly error: unknown;
    })
  | (ConsumerEventBase & {
      readonly type: 'client-error';
      readonly kafkaCode: number;
      readonly message: string;
      /** Client errors seen so far by this consumer. */
      readonly count: number;
    });

/** The type names of {@link ConsumerEvent}. */
export type ConsumerEventType = ConsumerEvent['type'];
