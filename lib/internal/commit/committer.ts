/**
 * The committer: periodic commits while running and the final commit of a revoke, each resolved
 * only when the broker confirmed it. One rule for what counts as committed (the broker confirmed
 * that exact offset), none for a partition while an earlier commit of another offset is unanswered
 * (it could land later and move the offset back), none for a partition after its revoke began,
 * retriable codes retried until the revoke's deadline, and the completed-offset memory written
 * (confirmed) before the commit it belongs to.
 */
import type { Logger } from 'pino';
import type { ConsumerSettings } from '../../config';
import type { PartitionCommitResult, RevokeTransaction, TopicPartition } from '../../types';
import type { CompletedStore } from './completed-store';
import { verifyFinalOffsets } from './commit-verification';
import type { FinalOffset } from './commit-verification';
import { settlesWithin, untilMoving } from '../loop/wait-conditions';
import type { ConsumerClient } from '../binding/consumer-client';
import type { EngineObserver } from '../observe/engine-observer';
import type { PartitionControl } from '../partition/partition-control';
import type { TopicPartitionOffset } from '../binding/rdkafka';
import { TimeoutError } from '../../errors';
import { Code, OWNERSHIP_LOST_CODES, errorMessage, kafkaCodeOf, list } from '../binding/rdkafka';

/** Commit errors worth retrying while the revoke deadline allows. */
const RETRIABLE_COMMIT_CODES: ReadonlySet<number> = new Set([
  Code.COORDINATOR_NOT_AVAILABLE,
  Code.NOT_COORDINATOR,
  Code.TIMED_OUT,
  Code.TIMED_OUT_QUEUE, // failed in the queue when a connection timed out
  Code.TRANSPORT,
  Code.ALL_BROKERS_DOWN,
  Code.STALE_MEMBER_EPOCH, // KIP-848: the heartbeat librdkafka expedites refreshes the epoch
  Code.WAIT_COORD, // no coordinator for session.timeout.ms (a coordinator failover)
  14, // COORDINATOR_LOAD_IN_PROGRESS
  7, // REQUEST_TIMED_OUT
]);

/** A final commit that was not confirmed: the next owner redoes the work since the last one. */
const failed = (
  control: PartitionControl,
  offset: number,
  reason: string,
): PartitionCommitResult => ({
  topic: control.topic,
  partition: control.partition,
  status: 'failed',
  offset,
  reason,
});

/** What the committer needs from its owner (the engine). */
export interface CommitterHost {
  /** A commit was confirmed: the consumer made progress. */
  progressed(): void;
  /** State changed: re-check what waits on it. */
  changed(): void;
  /** Waits for a condition with a deadline. */
  until(condition: () => boolean, deadline: number): Promise<boolean>;
  /** Commits cannot succeed before the deadline (refused credentials): try once, then give up. */
  hopeless(): boolean;
  observer(): EngineObserver;
  partitionLogger(control: PartitionControl): Logger;
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

  constructor(
    private readonly client: ConsumerClient,
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    private readonly store: CompletedStore | undefined,
    private readonly host: CommitterHost,
  ) {}

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
        this.host
          .partitionLogger(control)
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
        this.host.changed();
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
   * Commits the final offsets of revoked partitions and waits for the broker's answer, retrying
   * until `deadline`. The partitions must not be handed over while librdkafka still holds a commit
   * of them (one whose wait timed out here: the coordinator unreachable): it could be applied after
   * the next owner's commits and move the group's offset back. Such a commit is waited for until
   * `holdBy()` (the revoke's last moment before the broker's rebalance timeout, or sooner when the
   * consumer closes meanwhile); applied late, it counts as committed.
   */
  async commitFinal(
    controls: PartitionControl[],
    deadline: number,
    holdBy: () => number = () => deadline,
  ): Promise<PartitionCommitResult[]> {
    const results = new Map<PartitionControl, PartitionCommitResult>();
    const toCommit: { control: PartitionControl; offset: number }[] = [];
    const unchanged: { control: PartitionControl; offset: number }[] = [];
    for (const c of controls) {
      const offset = c.ledger.committable();
      if (offset !== undefined && offset === c.lastCommitted)
        unchanged.push({ control: c, offset });
      if (offset === undefined || offset === c.lastCommitted) {
        results.set(c, {
          topic: c.topic,
          partition: c.partition,
          status: 'unchanged',
          offset: c.lastCommitted,
        });
      } else {
        toCommit.push({ control: c, offset });
      }
    }
    // The memory of work finished out of order goes first (confirmed), then the commit. Its write
    // may take at most half of what is left: a memory landing after the commit is still true (the
    // next owner applies it only while the committed offset equals its base).
    const memoryWritten = await settlesWithin(
      this.saveMemories([...toCommit, ...unchanged]),
      Math.floor((deadline - Date.now()) / 2),
    );
    if (!memoryWritten) {
      this.logger.warn(
        { partitions: list(controls) },
        'the completed-offset memory write did not finish in time: committing without waiting for it (if it is lost, the next owner redoes work finished out of order: duplicates)',
      );
    }
    // An earlier commit of a partition that librdkafka has not answered (one that timed out here)
    // could land after this one and move the offset backwards: wait for its answer first.
    const overtakable = (): { control: PartitionControl; offset: number }[] =>
      toCommit.filter(
        ({ control, offset }) => !this.client.canCommit(control.topic, control.partition, offset),
      );
    if (overtakable().length > 0) {
      // Handing the partition over now would let that commit land after the next owner's: wait
      // for its answer as long as the partition may be held.
      await this.untilHeld(
        () => overtakable().length === 0,
        () => holdBy() - 100,
      );
      for (const entry of overtakable()) {
        const { control, offset } = entry;
        const earlier = this.client.unanswered(control.topic, control.partition);
        const reason = `an earlier commit of offset ${earlier.join(', ')} is still unanswered; committing ${offset} now could be overtaken by it`;
        this.host
          .partitionLogger(control)
          .warn(
            { offset, unanswered: earlier },
            'final commit not sent: an earlier commit of the partition is still unanswered by librdkafka; the next owner may process these messages again (duplicates)',
          );
        results.set(control, failed(control, offset, reason));
        toCommit.splice(toCommit.indexOf(entry), 1);
      }
    }
    // Waiting for an earlier commit may have used the deadline: one attempt then, within holdBy.
    const retryBy = Math.max(
      deadline,
      Math.min(holdBy(), Date.now() + this.settings.commitTimeoutMs),
    );
    /** The late answer to an attempt whose wait timed out here (undefined: none yet). */
    let lateAnswer: 'applied' | 'refused' | undefined;
    /** librdkafka's code for a late refusal (undefined: none, or dropped at disconnect). */
    let lateCode: number | undefined;
    /** Whether this call still waits for late answers (it stops when it returns). */
    let awaiting = true;
    const late = (applied: boolean, code?: number): boolean => {
      if (!awaiting) return false;
      if (applied || lateAnswer === undefined) {
        lateAnswer = applied ? 'applied' : 'refused';
        lateCode = applied ? undefined : code;
      }
      this.host.changed();
      return true;
    };
    const markLost = (reason: string): void => {
      for (const { control } of toCommit) {
        results.set(control, {
          topic: control.topic,
          partition: control.partition,
          status: 'lost',
          reason,
        });
      }
    };
    const confirm = (): void => {
      for (const { control, offset } of toCommit) {
        control.confirmCommitted(offset);
        results.set(control, {
          topic: control.topic,
          partition: control.partition,
          status: 'committed',
          offset,
        });
      }
    };
    const fail = (reason: string): void => {
      for (const { control, offset } of toCommit) {
        results.set(control, failed(control, offset, reason));
      }
    };
    const heldOf = (controls: readonly PartitionControl[]) => (): PartitionControl[] =>
      controls.filter((c) => this.client.unanswered(c.topic, c.partition).length > 0);
    // Nothing is sent past the hold bound (a close may bring it before the deadline).
    const sendBy = (): number => Math.min(retryBy, holdBy());
    let attempt = 0;
    /** Why the last attempt failed (a retry is due). */
    let retrying: string | undefined;
    while (toCommit.length > 0) {
      if (retrying !== undefined && Date.now() >= sendBy()) {
        // The bound moved while the retry waited (a close): no more attempts.
        this.logger.warn(
          { offsets: toCommit.map(({ control, offset }) => `${control.partition}@${offset}`) },
          'final commit failed: not committed; the next owner will process these messages again (duplicates)',
        );
        fail(retrying);
        break;
      }
      attempt += 1;
      const offsets = toCommit.map(({ control, offset }) => ({
        topic: control.topic,
        partition: control.partition,
        offset,
      }));
      const remaining = sendBy() - Date.now();
      const sentAt = Date.now();
      let err: unknown;
      try {
        await this.client.commit(
          offsets,
          Math.max(1, Math.min(this.settings.commitTimeoutMs, remaining)),
          late,
        );
        this.host.observer().commit('revoke', offsets, Date.now() - sentAt);
        confirm();
        break;
      } catch (e) {
        err = e;
      }
      this.host.observer().commit('revoke', offsets, Date.now() - sentAt, err);
      const reason = errorMessage(err);
      // Refused credentials will not heal within the deadline: one attempt, then release.
      const hopeless = this.host.hopeless();
      if (err instanceof TimeoutError) {
        // librdkafka still holds this attempt: it cannot be cancelled, and librdkafka retries and
        // defers it itself (until the coordinator is back). Another one would only queue a copy
        // behind it: wait for its answer instead, past the deadline if need be (see holdFor).
        lateAnswer = undefined;
        lateCode = undefined;
        const answered = await this.holdFor(
          heldOf(toCommit.map(({ control }) => control)),
          () => lateAnswer !== undefined,
          deadline,
          holdBy,
        );
        if (lateAnswer === 'applied') {
          confirm();
          break;
        }
        if (lateCode !== undefined && OWNERSHIP_LOST_CODES.has(lateCode)) {
          // Refused late because the member no longer owns the partitions (fenced meanwhile).
          markLost(`${reason}; then refused: ${String(lateCode)}`);
          break;
        }
        if (answered && !hopeless && Date.now() + 100 < sendBy()) {
          // Refused when it was answered at last (its code is not known here): send it again.
          this.logger.warn({ err, attempt, offsets }, 'final commit failed; retrying');
          retrying = reason;
          continue;
        }
        this.logger.warn(
          { err, offsets },
          'final commit failed: not committed; the next owner will process these messages again (duplicates)',
        );
        fail(answered ? reason : `${reason}; still held by librdkafka at the rebalance deadline`);
        break;
      }
      const code = kafkaCodeOf(err);
      if (code !== undefined && OWNERSHIP_LOST_CODES.has(code)) {
        markLost(reason);
        break;
      }
      const retriable = code !== undefined && RETRIABLE_COMMIT_CODES.has(code);
      if (retriable && !hopeless && Date.now() + 100 < sendBy()) {
        this.logger.warn({ err, attempt, offsets }, 'final commit failed; retrying');
        retrying = reason;
        await this.host.until(
          () => Date.now() >= sendBy(),
          Math.min(Date.now() + Math.min(100 * attempt, 1000), sendBy()),
        );
        continue;
      }
      const topics = [...new Set(toCommit.map(({ control }) => control.topic))];
      if (code === Code.UNKNOWN_TOPIC_OR_PART && topics.length > 1) {
        // A deleted topic fails the whole commit (node-rdkafka drops the per-partition errors):
        // commit topic by topic so the live ones are confirmed.
        for (const topic of topics) {
          const own = toCommit.filter(({ control }) => control.topic === topic);
          const split = await this.commitFinal(
            own.map(({ control }) => control),
            deadline,
            holdBy,
          );
          own.forEach(({ control }, i) => results.set(control, split[i]!));
        }
        break;
      }
      this.logger.warn(
        { err, offsets, code },
        code === Code.REBALANCE_IN_PROGRESS
          ? 'final commit rejected (rebalance in progress): not committed; the next owner will process these messages again (duplicates)'
          : code === Code.UNKNOWN_TOPIC_OR_PART
            ? 'final commit refused: unknown topic or partition (the topic was deleted, or the coordinator does not know it yet); if it still exists, the next owner will process these messages again (duplicates)'
            : 'final commit failed: not committed; the next owner will process these messages again (duplicates)',
      );
      fail(reason);
      break;
    }
    awaiting = false;
    // Whatever the outcome: no handover while librdkafka still holds a commit of these partitions
    // (an earlier copy, a periodic one): it could land after the next owner's commits.
    await this.holdFor(heldOf(controls), () => false, deadline, holdBy);
    await this.verify(controls, results, holdBy);
    return controls.map((c) => results.get(c)!);
  }

  /**
   * A commit of these partitions that librdkafka answered with an error of unknown outcome (timed
   * out, transport failure, coordinator moved) may have been applied after the final one: the
   * group's offsets are read back, and the final ones committed again where the group holds
   * another, before the release (see commit-verification.ts).
   */
  private async verify(
    controls: readonly PartitionControl[],
    results: Map<PartitionControl, PartitionCommitResult>,
    holdBy: () => number,
  ): Promise<void> {
    const finals: FinalOffset[] = [];
    for (const control of controls) {
      const r = results.get(control);
      if ((r?.status === 'committed' || r?.status === 'unchanged') && r.offset !== undefined)
        finals.push({ control, offset: r.offset });
    }
    const { unverified } = await verifyFinalOffsets(
      this.client,
      this.settings,
      this.logger,
      { until: (c, d) => this.host.until(c, d), changed: () => this.host.changed() },
      finals,
      () => holdBy() - 100,
    );
    for (const u of unverified) {
      const { control, offset } = u;
      if (u.kind === 'lost') {
        results.set(control, {
          topic: control.topic,
          partition: control.partition,
          status: 'lost',
          reason: u.reason,
        });
        continue;
      }
      results.set(
        control,
        failed(
          control,
          offset,
          u.kind === 'behind'
            ? `the group holds offset ${u.held === undefined ? 'none' : String(u.held)}: a commit answered with an error was applied after the final one, and committing ${offset} again was not confirmed by the rebalance deadline`
            : `not confirmed that the group holds ${offset} by the rebalance deadline: ${u.why}`,
        ),
      );
    }
  }

  /**
   * Waits until librdkafka holds no commit of `held()`'s partitions any more, or `done()`: silently
   * until `deadline`, then (warning that the partitions are held) until `holdBy()`. False if they
   * are still held then (warned: the partitions are released anyway).
   */
  private async holdFor(
    held: () => PartitionControl[],
    done: () => boolean,
    deadline: number,
    holdBy: () => number,
  ): Promise<boolean> {
    const settled = (): boolean => done() || held().length === 0;
    if (settled()) return true;
    // Past the bound already (an earlier hold ran to it and said so, or a close forced it).
    if (Date.now() >= holdBy()) return false;
    if (await this.untilHeld(settled, () => Math.min(deadline, holdBy()))) return true;
    this.logger.warn(
      { partitions: list(held()), holdForMs: Math.max(0, holdBy() - Date.now()) },
      'final commit not confirmed, and librdkafka still holds it (the coordinator is unreachable): holding the partitions until it answers, so that it cannot land after the next owner has committed',
    );
    if (await this.untilHeld(settled, holdBy)) return true;
    this.logger.warn(
      { partitions: list(held()) },
      "librdkafka still holds the final commit at the rebalance deadline: releasing the partitions; if the broker applies it after the next owner committed, that owner's offset moves back (duplicates)",
    );
    return false;
  }

  /** Waits for `condition` until `by()`, which may move meanwhile (a close brings it forward). */
  private untilHeld(condition: () => boolean, by: () => number): Promise<boolean> {
    return untilMoving((c, d) => this.host.until(c, d), condition, by);
  }
}
