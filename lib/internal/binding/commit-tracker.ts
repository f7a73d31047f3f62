/**
 * Commits matched to their librdkafka answers, and the assignment-lost probe. librdkafka answers
 * both through one `offset.commit` event, served only from consume(): each answer is matched here
 * to what it answers, including commits whose wait already timed out (librdkafka cannot cancel
 * them, so they may still be applied), and commits of unknown outcome are noted as doubts.
 * consumer-client.ts hands its commits and probes to this unit.
 */
import type { Logger } from '../../logger';
import { CommitError, TimeoutError } from '../../errors';
import type { LibrdKafkaError, RdKafkaConsumer, TopicPartitionOffset } from './rdkafka';
import { Code, FENCING_REFUSAL_CODES, errorMessage, kafkaCodeOf, tpKey } from './rdkafka';
import { timerDelay } from '../loop/timers';
import type { CommitDoubts } from '../commit/commit-doubts';

interface PendingCommit {
  /** Set when the wait timed out; the entry stays so its late result is not taken for a newer one. */
  timedOut?: boolean;
  readonly offsets: readonly TopicPartitionOffset[];
  /** When it was handed to librdkafka. */
  readonly sentAt: number;
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
  /**
   * Told librdkafka's answer to a commit whose wait timed out here (false: refused or dropped);
   * returns whether someone still awaited it (then it is not reported as applied behind its back).
   */
  readonly late: ((applied: boolean, code?: number) => boolean) | undefined;
}

interface PendingProbe {
  readonly resolve: (lost: boolean | undefined) => void;
  readonly timer: NodeJS.Timeout;
}

export class CommitTracker {
  private readonly pendingCommits: PendingCommit[] = [];
  /** Assignment-lost probes waiting for their answer, oldest first (librdkafka answers in order). */
  private readonly pendingProbes: PendingProbe[] = [];

  constructor(
    private readonly raw: RdKafkaConsumer,
    private readonly doubts: CommitDoubts,
    private readonly logger: Logger,
    /** Called whenever librdkafka answers a commit. */
    private readonly onAnswered: () => void,
  ) {}

  /** Sends a commit and waits for its answer (the contract: `ConsumerClient.commit()`). */
  commit(
    offsets: readonly TopicPartitionOffset[],
    timeoutMs: number,
    late: ((applied: boolean, code?: number) => boolean) | undefined,
  ): Promise<void> {
    if (offsets.length === 0) return Promise.resolve();
    for (const o of offsets) {
      if (!Number.isInteger(o.offset) || o.offset < 0) {
        // An entry without a valid offset would commit offset 0 or a logical offset.
        return Promise.reject(
          new CommitError(`Refusing to commit invalid offset ${String(o.offset)}`, undefined, [o]),
        );
      }
    }
    return new Promise((resolve, reject) => {
      const copy = offsets.map((o) => ({
        topic: o.topic,
        partition: o.partition,
        offset: o.offset,
      }));
      const timer = setTimeout(() => {
        pending.timedOut = true;
        this.trimTimedOut();
        reject(
          new TimeoutError(
            `Commit of ${describe(copy)} was not confirmed within ${timeoutMs} ms`,
            'commit',
            timeoutMs,
          ),
        );
      }, timerDelay(timeoutMs));
      const pending: PendingCommit = {
        offsets: copy,
        sentAt: Date.now(),
        resolve,
        reject,
        timer,
        late,
      };
      this.pendingCommits.push(pending);
      try {
        this.raw.commit(copy);
      } catch (err) {
        this.removePending(pending);
        clearTimeout(timer);
        reject(
          new CommitError(
            `Commit of ${describe(copy)} failed: ${errorMessage(err)}`,
            kafkaCodeOf(err),
            copy,
            {
              cause: err,
            },
          ),
        );
      }
    });
  }

  /** Offsets of this partition's commits librdkafka has not answered (`ConsumerClient.unanswered()`). */
  unanswered(topic: string, partition: number): number[] {
    const out: number[] = [];
    for (const p of this.pendingCommits) {
      for (const o of p.offsets) {
        if (o.partition === partition && o.topic === topic) out.push(o.offset);
      }
    }
    return out;
  }

  /** `ConsumerClient.probeAssignmentLost()`: a commit of the current assignment, answered locally. */
  probeAssignmentLost(timeoutMs: number): Promise<boolean | undefined> {
    return new Promise((resolve) => {
      const probe: PendingProbe = {
        resolve,
        timer: setTimeout(() => {
          this.removeProbe(probe);
          resolve(undefined);
        }, timerDelay(timeoutMs)),
      };
      this.pendingProbes.push(probe);
      try {
        this.raw.commit();
      } catch (err) {
        this.removeProbe(probe);
        clearTimeout(probe.timer);
        this.logger.debug({ err }, 'could not ask librdkafka whether the assignment is lost');
        resolve(undefined);
      }
    });
  }

  private removeProbe(probe: PendingProbe): void {
    const i = this.pendingProbes.indexOf(probe);
    if (i >= 0) this.pendingProbes.splice(i, 1);
  }

  /** Whether a commit result or a probe's answer is awaited (only consume() delivers them). */
  get awaitingPoll(): boolean {
    return this.pendingCommits.length > 0 || this.pendingProbes.length > 0;
  }

  /** Commits librdkafka has not answered yet, including ones whose wait timed out here. */
  get unansweredCount(): number {
    return this.pendingCommits.length;
  }

  /** Number of commits sent and not yet confirmed or failed. */
  get pendingCommitCount(): number {
    return this.pendingCommits.filter((p) => !p.timedOut).length;
  }

  /** librdkafka's answer to a commit or a probe (the `offset.commit` event). */
  onCommitResult(err: LibrdKafkaError | undefined, offsets: TopicPartitionOffset[]): void {
    // The answer to an assignment-lost probe carries no offset (a commit of the current
    // assignment with nothing stored); every commit the library sends has valid offsets.
    if (
      this.pendingProbes.length > 0 &&
      (err?.code === Code.ASSIGNMENT_LOST || err?.code === Code.NO_OFFSET) &&
      offsets.every((o) => !(typeof o.offset === 'number' && o.offset >= 0))
    ) {
      const probe = this.pendingProbes.shift() as PendingProbe;
      clearTimeout(probe.timer);
      const code = err?.code;
      probe.resolve(code === Code.ASSIGNMENT_LOST);
      return;
    }
    const got = new Map<string, number>();
    for (const o of offsets) got.set(tpKey(o.topic, o.partition), o.offset);
    // The same commit sent again (a retry) matches exactly; a commit of a subset only when no
    // exact one is pending.
    const matches = (p: PendingCommit): boolean =>
      p.offsets.every((o) => got.get(tpKey(o.topic, o.partition)) === o.offset);
    let index = this.pendingCommits.findIndex((p) => p.offsets.length === got.size && matches(p));
    if (index < 0) index = this.pendingCommits.findIndex(matches);
    if (index < 0) {
      this.logger.debug({ err, offsets }, 'commit result matches no pending commit');
      return;
    }
    const [pending] = this.pendingCommits.splice(index, 1);
    if (!pending) return;
    clearTimeout(pending.timer);
    const applied = !err || err.code === Code.NO_OFFSET;
    if (applied) {
      for (const o of pending.offsets) this.doubts.settle(o.topic, o.partition, pending.sentAt);
    } else if (!FENCING_REFUSAL_CODES.has(err.code)) {
      this.doubts.add(pending.offsets, Date.now());
    }
    if (pending.timedOut) {
      const awaited = pending.late?.(applied, applied ? undefined : err?.code) ?? false;
      if (!applied) {
        this.logger.info({ err, offsets }, 'late answer to a commit that had timed out: refused');
      } else if (awaited) {
        this.logger.info(
          { offsets: pending.offsets },
          'late answer to a commit that had timed out: applied',
        );
      } else {
        // librdkafka cannot cancel a commit: one that timed out here was applied after all. If
        // the partition changed hands meanwhile and its new owner committed further, the group's
        // offset just moved back to this one until that owner commits again.
        this.logger.warn(
          { offsets: pending.offsets },
          'a commit that had timed out was applied late by the broker (it was not counted as committed); if the partition has a new owner that committed further, the group offset moved back until its next commit (duplicates if it stops before then)',
        );
      }
      this.onAnswered();
      return;
    }
    if (applied) {
      pending.resolve();
    } else {
      pending.reject(
        new CommitError(
          `Commit of ${describe(pending.offsets)} failed: ${err.message}`,
          err.code,
          pending.offsets,
          {
            cause: err,
            retriable: err.isRetriable === true,
          },
        ),
      );
    }
    this.onAnswered();
  }

  private trimTimedOut(): void {
    const timedOut = this.pendingCommits.filter((p) => p.timedOut);
    if (timedOut.length > 64) {
      this.doubts.add(timedOut[0]!.offsets, Date.now());
      this.removePending(timedOut[0]!);
      timedOut[0]!.late?.(false);
    }
  }

  private removePending(pending: PendingCommit): void {
    const i = this.pendingCommits.indexOf(pending);
    if (i >= 0) this.pendingCommits.splice(i, 1);
  }

  /** Rejects every commit and probe still waiting (the client is disconnecting). */
  failPendingCommits(reason: string): void {
    for (const probe of this.pendingProbes.splice(0)) {
      clearTimeout(probe.timer);
      probe.resolve(undefined);
    }
    for (const p of this.pendingCommits.splice(0)) {
      this.doubts.add(p.offsets, Date.now());
      clearTimeout(p.timer);
      if (p.timedOut) p.late?.(false);
      p.reject(
        new CommitError(
          `Commit of ${describe(p.offsets)} abandoned: ${reason}`,
          undefined,
          p.offsets,
        ),
      );
    }
  }
}

function describe(offsets: readonly TopicPartitionOffset[]): string {
  return offsets.map((o) => `${o.topic}[${o.partition}]@${o.offset}`).join(', ');
}
