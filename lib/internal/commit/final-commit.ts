/**
 * The final commit of a revoke, in steps: sort the streams (what is unchanged, what to commit) →
 * write the completed-offset memory first → wait for an earlier commit librdkafka still holds →
 * send, retrying retriable codes until the deadline → hold the partitions while librdkafka still
 * holds a commit of them → read the group's offsets back where a commit's outcome is unknown.
 * One instance per call; each step reads and writes the call's results.
 *
 * The partitions must not be handed over while librdkafka still holds a commit of them (one whose
 * wait timed out here: the coordinator unreachable): it could be applied after the next owner's
 * commits and move the group's offset back. Such a commit is waited for until `holdBy()` (the
 * revoke's last moment before the broker's rebalance timeout, or sooner when the consumer closes
 * meanwhile); applied late, it counts as committed.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { TimeoutError } from '../../errors';
import type { PartitionCommitResult } from '../../types';
import type { ConsumerClient } from '../binding/consumer-client';
import { Code, OWNERSHIP_LOST_CODES, errorMessage, kafkaCodeOf, list } from '../binding/rdkafka';
import { settlesWithin, untilMoving } from '../loop/wait-conditions';
import type { PartitionControl } from '../partition/partition-control';
import { verifyResults } from './commit-verification';
import type { CommitterHost } from './committer';

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

interface Entry {
  readonly control: PartitionControl;
  readonly offset: number;
}

/** What a final commit works with (the committer's parts). */
export interface FinalCommitParts {
  readonly client: ConsumerClient;
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly host: CommitterHost;
  /** Writes the completed-offset memory of these streams (confirmed); never rejects. */
  saveMemories(entries: Entry[]): Promise<void>;
}

/** The final commit of `controls`, retried until `deadline`, held until `holdBy()` (see the header). */
export function commitFinal(
  parts: FinalCommitParts,
  controls: PartitionControl[],
  deadline: number,
  holdBy: () => number,
): Promise<PartitionCommitResult[]> {
  return new FinalCommit(parts, controls, deadline, holdBy).run();
}

class FinalCommit {
  private readonly results = new Map<PartitionControl, PartitionCommitResult>();
  private readonly toCommit: Entry[] = [];
  private readonly unchanged: Entry[] = [];
  /** The late answer to an attempt whose wait timed out here (undefined: none yet). */
  private lateAnswer: 'applied' | 'refused' | undefined;
  /** librdkafka's code for a late refusal (undefined: none, or dropped at disconnect). */
  private lateCode: number | undefined;
  /** Whether this call still waits for late answers (it stops when it returns). */
  private awaiting = true;

  constructor(
    private readonly parts: FinalCommitParts,
    private readonly controls: PartitionControl[],
    private readonly deadline: number,
    private readonly holdBy: () => number,
  ) {}

  async run(): Promise<PartitionCommitResult[]> {
    this.sortOut();
    await this.writeMemories();
    await this.waitForEarlierCommits();
    await this.send();
    this.awaiting = false;
    // Whatever the outcome: no handover while librdkafka still holds a commit of these partitions
    // (an earlier copy, a periodic one): it could land after the next owner's commits.
    await this.holdFor(this.heldOf(this.controls), () => false);
    await this.verify();
    return this.controls.map((c) => this.results.get(c)!);
  }

  /** What is unchanged since the last confirmed commit (reported so), and what to commit. */
  private sortOut(): void {
    for (const c of this.controls) {
      const offset = c.ledger.committable();
      if (offset !== undefined && offset === c.lastCommitted)
        this.unchanged.push({ control: c, offset });
      if (offset === undefined || offset === c.lastCommitted) {
        this.results.set(c, {
          topic: c.topic,
          partition: c.partition,
          status: 'unchanged',
          offset: c.lastCommitted,
        });
      } else {
        this.toCommit.push({ control: c, offset });
      }
    }
  }

  /**
   * The memory of work finished out of order goes first (confirmed), then the commit. Its write
   * may take at most half of what is left: a memory landing after the commit is still true (the
   * next owner applies it only while the committed offset equals its base).
   */
  private async writeMemories(): Promise<void> {
    const written = await settlesWithin(
      this.parts.saveMemories([...this.toCommit, ...this.unchanged]),
      Math.floor((this.deadline - Date.now()) / 2),
    );
    if (!written) {
      this.parts.logger.warn(
        { partitions: list(this.controls) },
        'the completed-offset memory write did not finish in time: committing without waiting for it (if it is lost, the next owner redoes work finished out of order: duplicates)',
      );
    }
  }

  /**
   * An earlier commit of a partition that librdkafka has not answered (one that timed out here)
   * could land after this one and move the offset backwards: wait for its answer first, as long as
   * the partition may be held; a partition still waiting then is not committed.
   */
  private async waitForEarlierCommits(): Promise<void> {
    const { client, host } = this.parts;
    const overtakable = (): Entry[] =>
      this.toCommit.filter(
        ({ control, offset }) => !client.canCommit(control.topic, control.partition, offset),
      );
    if (overtakable().length === 0) return;
    await this.untilHeld(
      () => overtakable().length === 0,
      () => this.holdBy() - 100,
    );
    for (const entry of overtakable()) {
      const { control, offset } = entry;
      const earlier = client.unanswered(control.topic, control.partition);
      const reason = `an earlier commit of offset ${earlier.join(', ')} is still unanswered; committing ${offset} now could be overtaken by it`;
      host.loggers
        .of(control)
        .warn(
          { offset, unanswered: earlier },
          'final commit not sent: an earlier commit of the partition is still unanswered by librdkafka; the next owner may process these messages again (duplicates)',
        );
      this.results.set(control, failed(control, offset, reason));
      this.toCommit.splice(this.toCommit.indexOf(entry), 1);
    }
  }

  /** librdkafka answered an attempt whose wait timed out here (see ConsumerClient.commit). */
  private readonly late = (applied: boolean, code?: number): boolean => {
    if (!this.awaiting) return false;
    if (applied || this.lateAnswer === undefined) {
      this.lateAnswer = applied ? 'applied' : 'refused';
      this.lateCode = applied ? undefined : code;
    }
    this.parts.host.conditions.changed();
    return true;
  };

  private markLost(reason: string): void {
    for (const { control } of this.toCommit) {
      this.results.set(control, {
        topic: control.topic,
        partition: control.partition,
        status: 'lost',
        reason,
      });
    }
  }

  private confirm(): void {
    for (const { control, offset } of this.toCommit) {
      control.confirmCommitted(offset);
      this.results.set(control, {
        topic: control.topic,
        partition: control.partition,
        status: 'committed',
        offset,
      });
    }
  }

  private fail(reason: string): void {
    for (const { control, offset } of this.toCommit) {
      this.results.set(control, failed(control, offset, reason));
    }
  }

  private heldOf(controls: readonly PartitionControl[]): () => PartitionControl[] {
    return () =>
      controls.filter((c) => this.parts.client.unanswered(c.topic, c.partition).length > 0);
  }

  /** Sends the commit, retrying retriable codes until the deadline (see the header). */
  private async send(): Promise<void> {
    const { client, settings, logger, host } = this.parts;
    const { deadline, holdBy, toCommit } = this;
    // Waiting for an earlier commit may have used the deadline: one attempt then, within holdBy.
    const retryBy = Math.max(deadline, Math.min(holdBy(), Date.now() + settings.commitTimeoutMs));
    // Nothing is sent past the hold bound (a close may bring it before the deadline).
    const sendBy = (): number => Math.min(retryBy, holdBy());
    let attempt = 0;
    /** Why the last attempt failed (a retry is due). */
    let retrying: string | undefined;
    while (toCommit.length > 0) {
      if (retrying !== undefined && Date.now() >= sendBy()) {
        // The bound moved while the retry waited (a close): no more attempts.
        logger.warn(
          { offsets: toCommit.map(({ control, offset }) => `${control.partition}@${offset}`) },
          'final commit failed: not committed; the next owner will process these messages again (duplicates)',
        );
        this.fail(retrying);
        return;
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
        await client.commit(
          offsets,
          Math.max(1, Math.min(settings.commitTimeoutMs, remaining)),
          this.late,
        );
        host.observer().commit('revoke', offsets, Date.now() - sentAt);
        this.confirm();
        return;
      } catch (e) {
        err = e;
      }
      host.observer().commit('revoke', offsets, Date.now() - sentAt, err);
      const reason = errorMessage(err);
      // Refused credentials will not heal within the deadline: one attempt, then release.
      const hopeless = host.hopeless();
      if (err instanceof TimeoutError) {
        // librdkafka still holds this attempt: it cannot be cancelled, and librdkafka retries and
        // defers it itself (until the coordinator is back). Another one would only queue a copy
        // behind it: wait for its answer instead, past the deadline if need be (see holdFor).
        this.lateAnswer = undefined;
        this.lateCode = undefined;
        const answered = await this.holdFor(
          this.heldOf(toCommit.map(({ control }) => control)),
          () => this.lateAnswer !== undefined,
        );
        if (this.lateAnswer === 'applied') {
          this.confirm();
          return;
        }
        const lateCode = this.lateCode;
        if (lateCode !== undefined && OWNERSHIP_LOST_CODES.has(lateCode)) {
          // Refused late because the member no longer owns the partitions (fenced meanwhile).
          this.markLost(`${reason}; then refused: ${String(lateCode)}`);
          return;
        }
        if (answered && !hopeless && Date.now() + 100 < sendBy()) {
          // Refused when it was answered at last (its code is not known here): send it again.
          logger.warn({ err, attempt, offsets }, 'final commit failed; retrying');
          retrying = reason;
          continue;
        }
        logger.warn(
          { err, offsets },
          'final commit failed: not committed; the next owner will process these messages again (duplicates)',
        );
        this.fail(
          answered ? reason : `${reason}; still held by librdkafka at the rebalance deadline`,
        );
        return;
      }
      const code = kafkaCodeOf(err);
      if (code !== undefined && OWNERSHIP_LOST_CODES.has(code)) {
        this.markLost(reason);
        return;
      }
      const retriable = code !== undefined && RETRIABLE_COMMIT_CODES.has(code);
      if (retriable && !hopeless && Date.now() + 100 < sendBy()) {
        logger.warn({ err, attempt, offsets }, 'final commit failed; retrying');
        retrying = reason;
        await host.conditions.until(
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
          const split = await commitFinal(
            this.parts,
            own.map(({ control }) => control),
            deadline,
            holdBy,
          );
          own.forEach(({ control }, i) => this.results.set(control, split[i]!));
        }
        return;
      }
      logger.warn(
        { err, offsets, code },
        code === Code.REBALANCE_IN_PROGRESS
          ? 'final commit rejected (rebalance in progress): not committed; the next owner will process these messages again (duplicates)'
          : code === Code.UNKNOWN_TOPIC_OR_PART
            ? 'final commit refused: unknown topic or partition (the topic was deleted, or the coordinator does not know it yet); if it still exists, the next owner will process these messages again (duplicates)'
            : 'final commit failed: not committed; the next owner will process these messages again (duplicates)',
      );
      this.fail(reason);
      return;
    }
  }

  /** Where a commit's outcome is unknown, the group's offsets read back (commit-verification.ts). */
  private async verify(): Promise<void> {
    const { client, settings, logger, host } = this.parts;
    await verifyResults(
      client,
      settings,
      logger,
      host.conditions,
      this.controls,
      this.results,
      () => this.holdBy(),
    );
  }

  /**
   * Waits until librdkafka holds no commit of `held()`'s partitions any more, or `done()`: silently
   * until the deadline, then (warning that the partitions are held) until `holdBy()`. False if
   * they are still held then (warned: the partitions are released anyway).
   */
  private async holdFor(held: () => PartitionControl[], done: () => boolean): Promise<boolean> {
    const { logger } = this.parts;
    const { deadline, holdBy } = this;
    const settled = (): boolean => done() || held().length === 0;
    if (settled()) return true;
    // Past the bound already (an earlier hold ran to it and said so, or a close forced it).
    if (Date.now() >= holdBy()) return false;
    if (await this.untilHeld(settled, () => Math.min(deadline, holdBy()))) return true;
    logger.warn(
      { partitions: list(held()), holdForMs: Math.max(0, holdBy() - Date.now()) },
      'final commit not confirmed, and librdkafka still holds it (the coordinator is unreachable): holding the partitions until it answers, so that it cannot land after the next owner has committed',
    );
    if (await this.untilHeld(settled, holdBy)) return true;
    logger.warn(
      { partitions: list(held()) },
      "librdkafka still holds the final commit at the rebalance deadline: releasing the partitions; if the broker applies it after the next owner committed, that owner's offset moves back (duplicates)",
    );
    return false;
  }

  /** Waits for `condition` until `by()`, which may move meanwhile (a close brings it forward). */
  private untilHeld(condition: () => boolean, by: () => number): Promise<boolean> {
    return untilMoving((c, d) => this.parts.host.conditions.until(c, d), condition, by);
  }
}
