/**
 * What each step of a partition's life announces: its log line and its rebalance event. The
 * partition lifecycle (lifecycle.ts) decides the steps and calls these in order; nothing here
 * changes a stream.
 */
import type { Logger } from '../../logger';
import type {
  PartitionCommitResult,
  RebalanceEvent,
  RebalanceProtocol,
  RevokeTransaction,
  TopicPartition,
} from '../../types';
import { list } from '../binding/rdkafka';
import type { PartitionControl } from './partition-control';

/** One revoke: what librdkafka revoked and what this member held of it. */
export interface RevokeScope {
  /** The partitions to release (those of this callback not already being revoked). */
  readonly partitions: TopicPartition[];
  /** Their streams. */
  readonly controls: PartitionControl[];
  readonly protocol: RebalanceProtocol;
  readonly generation: number;
  readonly startedAt: number;
  /** False for a static member's local revoke at close: the group keeps the partitions. */
  readonly handedOver: boolean;
  readonly groupInstanceId: string | undefined;
}

/** What a revoke came to (revoke-protocol.ts decides it; the lifecycle applies it). */
export type RevokeOutcome =
  | {
      /** Taken away without a chance to commit: handlers aborted, nothing committed. */
      readonly kind: 'lost';
      readonly reason: string;
    }
  | {
      /** Drained (or its deadline passed) and the final commit answered. */
      readonly kind: 'committed';
      /** One per stream of the revoke. */
      readonly results: PartitionCommitResult[];
      /** The results the broker refused for ownership (the partitions are lost). */
      readonly refused: PartitionCommitResult[];
      /** The streams that still owned their partition at the final commit. */
      readonly stillOurs: PartitionControl[];
      readonly drainedAt: number;
      readonly committedAt: number;
      /** Transactions only: what the final commit did with the open transaction. */
      readonly transaction: RevokeTransaction | undefined;
    };

export type Committed = RevokeOutcome & { kind: 'committed' };

export class LifecycleEvents {
  constructor(
    private readonly logger: Logger,
    private readonly events: { next(event: RebalanceEvent): void },
  ) {}

  assigned(
    generation: number,
    protocol: RebalanceProtocol,
    partitions: TopicPartition[],
    starts: ReadonlyMap<string, number>,
  ): void {
    this.logger.info(
      { generation, protocol, partitions, starts: Object.fromEntries(starts) },
      'assigned',
    );
    this.events.next({ type: 'assigned', generation, protocol, partitions, at: Date.now() });
  }

  revoking({ partitions, protocol, generation, startedAt }: RevokeScope, inFlight: number): void {
    this.logger.info({ generation, protocol, partitions, inFlight }, 'revoking');
    this.events.next({ type: 'revoking', generation, protocol, partitions, at: startedAt });
  }

  /** Returns when the drain ended. */
  drained(
    { partitions, protocol, generation, startedAt }: RevokeScope,
    inFlight: number,
    stragglers: readonly PartitionControl[],
    stuck: Record<string, unknown>[],
    timedOut: boolean,
    drainTimeoutMs: number,
  ): number {
    const stragglerCount = stragglers.reduce((n, c) => n + c.inFlight, 0);
    const drainedAt = Date.now();
    if (timedOut) {
      this.logger.warn(
        {
          generation,
          partitions: list(stragglers),
          stragglers: stragglerCount,
          stuck,
          drainTimeoutMs,
        },
        'drain deadline passed: committing what is contiguous and releasing the partitions; the next owner may process the unfinished messages again (duplicates)',
      );
    }
    this.logger.info(
      { generation, partitions, inFlight, durationMs: drainedAt - startedAt, timedOut },
      'drained',
    );
    this.events.next({
      type: 'drained',
      generation,
      protocol,
      partitions,
      inFlight,
      stragglers: stragglerCount,
      timedOut,
      durationMs: drainedAt - startedAt,
      at: drainedAt,
    });
    return drainedAt;
  }

  committed({ partitions, protocol, generation }: RevokeScope, outcome: Committed): void {
    const { results, refused, drainedAt, committedAt, transaction } = outcome;
    this.logger.info(
      { generation, results, durationMs: committedAt - drainedAt },
      refused.length > 0 ? 'final commit refused: partitions lost' : 'committed',
    );
    this.events.next({
      type: 'committed',
      generation,
      protocol,
      partitions,
      results,
      durationMs: committedAt - drainedAt,
      at: committedAt,
      ...(transaction === undefined ? {} : { transaction }),
    });
  }

  /** A committed revoke's streams end: `revoked` first (the metrics close the revoke's record on it), then `lost`. */
  ended(
    scope: RevokeScope,
    outcome: Committed,
    revokedEnding: readonly PartitionControl[],
    lostEnding: readonly PartitionControl[],
    revokedAt: number,
  ): void {
    const { protocol, generation, startedAt, handedOver } = scope;
    const { results, refused, committedAt } = outcome;
    if (revokedEnding.length > 0) {
      const partitions = list(revokedEnding);
      this.logger.info(
        {
          generation,
          partitions,
          durationMs: revokedAt - committedAt,
          totalMs: revokedAt - startedAt,
          handedOver,
          ...(handedOver ? {} : { groupInstanceId: scope.groupInstanceId }),
        },
        handedOver
          ? 'revoked'
          : 'revoked locally, not handed over: the group keeps these partitions for this group.instance.id until its session times out (a restart within it resumes them without a rebalance)',
      );
      this.events.next({
        type: 'revoked',
        generation,
        protocol,
        partitions,
        durationMs: revokedAt - committedAt,
        totalMs: revokedAt - startedAt,
        handedOver,
        at: revokedAt,
      });
    }
    if (lostEnding.length > 0) {
      const first = refused[0] ?? results.find((r) => r.status === 'lost');
      const reason = first?.status === 'lost' ? first.reason : 'commit refused';
      const partitions = list(lostEnding);
      this.logger.warn(
        { generation, partitions, reason },
        refused.length > 0
          ? 'partitions lost: the final commit was refused; work since the last confirmed commit will be redone by the next owner (duplicates)'
          : 'partitions lost: released by a newer rebalance before the final commit; work since the last confirmed commit will be redone (duplicates)',
      );
      this.events.next({ type: 'lost', generation, protocol, partitions, reason, at: revokedAt });
    }
  }

  /** Released as lost by a revoke: nothing committed. */
  lost(
    { partitions, protocol, generation }: RevokeScope,
    ending: readonly PartitionControl[],
    reason: string,
  ): void {
    this.logger.warn(
      { generation, partitions, reason },
      'partitions lost: nothing committed; their unfinished work will be redone by the next owner',
    );
    if (ending.length > 0)
      this.events.next({
        type: 'lost',
        generation,
        protocol,
        partitions: list(ending),
        reason,
        at: Date.now(),
      });
  }

  /**
   * Streams released without the revoke protocol: `clean` ones (nothing to redo) go through the
   * whole sequence at once, `lost` ones end in `lost`.
   */
  releasedAtOnce(
    generation: number,
    protocol: RebalanceProtocol,
    clean: readonly PartitionControl[],
    lostOnes: readonly PartitionControl[],
    reason: string,
    handedOver: boolean,
  ): void {
    const at = Date.now();
    const revoked = list(clean);
    const lost = list(lostOnes);
    if (revoked.length > 0) {
      // The whole sequence, at once: nothing in flight to drain, nothing new to commit.
      this.logger.info({ generation, partitions: revoked, reason }, 'revoked (nothing to commit)');
      const base = { generation, protocol, partitions: revoked, at };
      this.events.next({ type: 'revoking', ...base });
      this.events.next({
        type: 'drained',
        ...base,
        inFlight: 0,
        stragglers: 0,
        timedOut: false,
        durationMs: 0,
      });
      this.events.next({
        type: 'committed',
        ...base,
        results: clean.map((c) => ({
          topic: c.topic,
          partition: c.partition,
          status: 'unchanged' as const,
          offset: c.lastCommitted,
        })),
        durationMs: 0,
      });
      this.events.next({ type: 'revoked', ...base, durationMs: 0, totalMs: 0, handedOver });
    }
    if (lost.length > 0) {
      this.logger.warn(
        { generation, partitions: lost, reason },
        'partitions lost: released without a final commit; their work since the last confirmed commit will be redone by the next owner (duplicates)',
      );
      this.events.next({ type: 'lost', generation, protocol, partitions: lost, reason, at });
    }
  }
}
