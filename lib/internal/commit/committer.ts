/**
 * The committer: periodic commits while running and the final commit of a revoke, each resolved
 * only when the broker confirmed it. One rule for what counts as committed (the broker confirmed
 * that exact offset), none for a partition while an earlier commit of another offset is unanswered
 * (it could land later and move the offset back), none for a partition after its revoke began,
 * retriable codes retried until the revoke's deadline, and the completed-offset memory written
 * (confirmed) before the commit it belongs to.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { PartitionCommitResult, RevokeTransaction, TopicPartition } from '../../types';
import type { CompletedStore } from './completed-store';
import { commitFinal } from './final-commit';
import type { FinalCommitParts } from './final-commit';
import type { ConsumerClient } from '../binding/consumer-client';
import type { EngineObserver } from '../observe/engine-observer';
import type { PartitionLoggers } from '../observe/partition-loggers';
import type { Conditions } from '../loop/wait-conditions';
import type { PartitionControl } from '../partition/partition-control';
import type { TopicPartitionOffset } from '../binding/rdkafka';
import { list } from '../binding/rdkafka';

/** What the committer needs from its owner (the engine). */
export interface CommitterHost {
  /** Waiting on state changes: a settled commit calls `changed()`, retries wait in `until()`. */
  readonly conditions: Conditions;
  readonly loggers: PartitionLoggers;
  /** A commit was confirmed: the consumer made progress. */
  progressed(): void;
  /** Commits cannot succeed before the deadline (refused credentials): try once, then give up. */
  hopeless(): boolean;
  observer(): EngineObserver;
}

/**
 * Where a consumer's offsets go: the commit strategy, chosen once when the consumer starts. The
 * {@link Committer} commits them to the group; `processTransactional()`'s transactions commit them
 * with their output records instead.
 */
export interface OffsetCommits {
  /** Whether a commit that is not a revoke's is in flight. */
  readonly periodicInFlight: boolean;
  maybeCommit(
    controls: Iterable<PartitionControl>,
    isCurrent: (control: PartitionControl) => boolean,
  ): void;
  /**
   * The final commit of revoked partitions, retried until `deadline`; a commit librdkafka still
   * holds then (it cannot be cancelled, and could land after the next owner's) is waited for until
   * `holdBy`.
   */
  commitFinal(
    controls: PartitionControl[],
    deadline: number,
    holdBy?: () => number,
  ): Promise<PartitionCommitResult[]>;
  /** Partitions released as lost (nothing committed for them; open work of theirs is undone). */
  lost(controls: readonly PartitionControl[]): void;
  /** `consumer.commit()`: the next `maybeCommit` commits whatever its interval says. */
  commitSoon(): void;
  /**
   * Holds the periodic commits until the returned function is called (a revoke's `onRevoke` hook
   * runs: nothing of its partitions may be committed before it returns).
   */
  holdPeriodic(): () => void;
  /** Transactions only: what the last final commit did with the open transaction. */
  readonly lastFinal: RevokeTransaction | undefined;
  /**
   * Resolves once no call in flight holds the raw consumer (a sendOffsetsToTransaction whose
   * worker reads its group metadata): the consumer is disconnected only then.
   */
  clientIdle(): Promise<void>;
}

/** Commits to the consumer group (the strategy unless `processTransactional()` runs). */
export class Committer implements OffsetCommits {
  /** The periodic commit in flight (its memory write included). */
  private commitInFlight: Promise<void> | undefined;
  private lastCommitAt = 0;
  /** What the last completed-offset memory written for each stream said. */
  private readonly memoriesWritten = new WeakMap<
    PartitionControl,
    { readonly nonEmpty: boolean; readonly signature: string }
  >();

  /** What each final commit works with. */
  private readonly finalParts: FinalCommitParts;

  constructor(
    private readonly client: ConsumerClient,
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    private readonly store: CompletedStore | undefined,
    private readonly host: CommitterHost,
  ) {
    this.finalParts = {
      client,
      settings,
      logger,
      host,
      saveMemories: (entries) => this.saveMemories(entries),
    };
  }

  /** Whether a periodic commit is in flight. */
  get periodicInFlight(): boolean {
    return this.commitInFlight !== undefined;
  }

  /** No transaction here. */
  readonly lastFinal: RevokeTransaction | undefined = undefined;

  /** Group commits hold the raw consumer only inside the binding's own calls. */
  clientIdle(): Promise<void> {
    return Promise.resolve();
  }

  /** Partitions released as lost: nothing is committed for them, and no open work to undo. */
  lost(): void {}

  /** Group commits skip streams being revoked already: nothing to hold. */
  holdPeriodic(): () => void {
    return () => undefined;
  }

  /** The next `maybeCommit` (after the commit in flight, if any) ignores `commitIntervalMs`. */
  commitSoon(): void {
    this.lastCommitAt = Number.NEGATIVE_INFINITY;
  }

  /**
   * Commits, at most every `commitIntervalMs`, what the active streams have processed
   * contiguously. `controls` are the streams owned now; `isCurrent` tells whether a stream still
   * owns its partition when the commit is sent (a revoke may have started meanwhile).
   */
  maybeCommit(
    controls: Iterable<PartitionControl>,
    isCurrent: (control: PartitionControl) => boolean,
  ): void {
    if (this.commitInFlight) return;
    const now = Date.now();
    if (now - this.lastCommitAt < this.settings.commitIntervalMs) return;
    this.lastCommitAt = now;
    const batch: { control: PartitionControl; offset: number }[] = [];
    /** Streams whose completed-offset memory is to be written (with the offset it belongs to). */
    const remembered: { control: PartitionControl; offset: number }[] = [];
    for (const control of controls) {
      // Partitions being revoked get their final commit from the revoke protocol. A partition
      // that delivered nothing yet commits its chosen start (onAssign, seek, reset to latest).
      if (!control.active) continue;
      const offset = control.ledger.committable();
      if (offset === undefined) continue;
      if (offset === control.lastCommitted) {
        if (this.store && control.lastCommitted !== undefined) remembered.push({ control, offset });
        continue;
      }
      if (!this.client.canCommit(control.topic, control.partition, offset)) {
        // An earlier commit of this partition is unanswered (it timed out here): librdkafka may
        // still send it, and if it landed after this one the offset would move backwards.
        this.host.loggers
          .of(control)
          .debug(
            { offset, unanswered: this.client.unanswered(control.topic, control.partition) },
            'periodic commit held back until an earlier commit of the partition is answered',
          );
        continue;
      }
      batch.push({ control, offset });
    }
    if (batch.length === 0 && remembered.length === 0) return;
    let offsets: TopicPartitionOffset[] = [];
    let sent: { control: PartitionControl; offset: number }[] = [];
    const sentAt = Date.now();
    this.commitInFlight = this.saveMemories([...batch, ...remembered])
      .then(() => {
        // Decided again now that the memory is written: a partition revoked meanwhile gets its
        // final commit from the revoke protocol, and nothing may be committed for it after that.
        sent = batch.filter(
          ({ control, offset }) =>
            control.active &&
            isCurrent(control) &&
            this.client.canCommit(control.topic, control.partition, offset),
        );
        offsets = sent.map(({ control, offset }) => ({
          topic: control.topic,
          partition: control.partition,
          offset,
        }));
        return this.client.commit(offsets);
      })
      .then(() => {
        if (offsets.length === 0) return; // only a memory was written
        this.host.progressed();
        this.host.observer().commit('periodic', offsets, Date.now() - sentAt);
        for (const { control, offset } of sent) {
          control.confirmCommitted(offset);
        }
        this.logger.debug({ offsets }, 'committed');
      })
      .catch((err: unknown) => {
        this.host.observer().commit('periodic', offsets, Date.now() - sentAt, err);
        // Not a sign of a lost assignment by itself: a cooperative rebalance bumps the generation
        // and refuses commits (ILLEGAL_GENERATION) while the partitions are still ours. Only the
        // revoke-time commit decides "lost".
        this.logger.warn(
          { err, offsets },
          'periodic commit failed; it is retried at the next interval (a crash before then may cause duplicate processing)',
        );
      })
      .finally(() => {
        this.commitInFlight = undefined;
        this.host.conditions.changed();
      });
  }

  /**
   * Writes the completed-offset memory of streams about to be committed, and waits for the
   * broker's confirmation: a memory must never be newer than nothing, nor a commit run ahead of
   * its memory. A failed write is logged; the commit goes ahead (the memory then no longer
   * matches the committed offset and is ignored: duplicates, never a skip).
   */
  private async saveMemories(
    batch: { control: PartitionControl; offset: number }[],
  ): Promise<void> {
    const store = this.store;
    if (!store) return;
    const entries: (TopicPartition & { base: number; completed: number[] })[] = [];
    const written: PartitionControl[] = [];
    const signatures: string[] = [];
    for (const { control, offset } of batch) {
      const completed = control.ledger.completedAbove(Number.MAX_SAFE_INTEGER);
      const last = this.memoriesWritten.get(control);
      // An empty memory is written only to replace a non-empty one (or one from before a seek).
      if (completed.length === 0 && !(last?.nonEmpty ?? control.replacesMemory)) continue;
      const signature = `${offset}:${completed.length}:${completed[completed.length - 1] ?? -1}`;
      if (signature === last?.signature) continue; // unchanged since the last write
      entries.push({ topic: control.topic, partition: control.partition, base: offset, completed });
      written.push(control);
      signatures.push(signature);
    }
    if (entries.length === 0) return;
    try {
      await store.save(entries);
      written.forEach((c, i) => {
        this.memoriesWritten.set(c, {
          nonEmpty: (entries[i]?.completed.length ?? 0) > 0,
          signature: signatures[i] ?? '',
        });
      });
    } catch (err) {
      this.logger.warn(
        { err, partitions: list(written) },
        'could not write the completed-offset memory: the next owner will redo work finished out of order (duplicates)',
      );
    }
  }

  /**
   * The final commit of revoked partitions, confirmed by the broker, retried until `deadline` and
   * held until `holdBy()` while librdkafka still holds a commit of them (see final-commit.ts).
   */
  commitFinal(
    controls: PartitionControl[],
    deadline: number,
    holdBy: () => number = () => deadline,
  ): Promise<PartitionCommitResult[]> {
    return commitFinal(this.finalParts, controls, deadline, holdBy);
  }
}
