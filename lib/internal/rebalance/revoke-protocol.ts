/**
 * The revoke protocol, top to bottom: a revoked partition's stream ends (no new messages; what
 * has not started is dropped); its in-flight handlers drain; its final offset is committed and
 * confirmed by the broker; only then is it unassigned — within the drain deadline, which a
 * close() in progress brings forward. A commit librdkafka still holds at that deadline (the
 * coordinator unreachable) keeps the partitions until it is answered, up to the broker's
 * rebalance timeout: handed over, it could land after the next owner's commits.
 *
 * It decides and returns what the revoke came to; the partition lifecycle (partition/lifecycle.ts)
 * applies it — the release, the unassign and the last events — so the walk never calls back into
 * the coordinator that started it.
 *
 * Lost is decided here for a revoke (the coordinator applies {@link lostOnArrival} at once, in
 * librdkafka's callback). A revoke is a loss (handlers aborted, nothing committed,
 * released at once: others may own the partitions already) when librdkafka announced it before
 * the revoke arrived (max.poll exceeded, session timed out), when librdkafka reports the
 * assignment lost (the probe), or when the broker refuses the final commit for ownership reasons.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { PartitionCommitResult } from '../../types';
import type { OffsetCommits } from '../commit/committer';
import type { Shutdown } from '../loop/shutdown';
import type { Conditions } from '../loop/wait-conditions';
import { settlesWithin } from '../loop/wait-conditions';
import type { PartitionLifecycle, RevokeOutcome, RevokeScope } from '../partition/lifecycle';
import type { RevokeHook } from './revoke-hook';

/** One revoke: its scope, and what librdkafka said about losing it. */
export interface RevokeContext extends RevokeScope {
  /** Why librdkafka said, before this revoke, that the member was dropped (undefined: it did not). */
  readonly announcedLost: string | undefined;
  /** librdkafka's answer: is the assignment lost? (see ConsumerClient.probeAssignmentLost) */
  readonly lostProbe: Promise<boolean | undefined>;
}

/** The parts the protocol works with (none of them is the coordinator that runs it). */
export interface RevokeParts {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly commits: OffsetCommits;
  readonly lifecycle: PartitionLifecycle;
  readonly conditions: Conditions;
  /** When a revoke must end because the consumer closes (`revokeBy()`). */
  readonly shutdown: Shutdown;
  /** The user's `onRevoke`, run after the drain and before the final commit. */
  readonly hook: RevokeHook;
}

/**
 * A revoke librdkafka announced as a loss before it arrived (max.poll exceeded, session timed
 * out): lost at once, decided synchronously in the rebalance callback (undefined: it was not).
 */
export function lostOnArrival(ctx: RevokeContext): RevokeOutcome | undefined {
  return ctx.announcedLost === undefined ? undefined : { kind: 'lost', reason: ctx.announcedLost };
}

/**
 * drain → commit (confirmed), within the drain deadline; or lost. Returns the outcome to apply.
 * Call it only when {@link lostOnArrival} said the revoke was not lost on arrival.
 */
export async function revoke(ctx: RevokeContext, parts: RevokeParts): Promise<RevokeOutcome> {
  const { partitions, controls, generation, startedAt } = ctx;
  const { settings, logger, commits, lifecycle, conditions, shutdown, hook } = parts;
  const inFlight = controls.reduce((n, c) => n + c.inFlight, 0);
  lifecycle.revoking(ctx);
  let lostByProbe = false;
  void ctx.lostProbe.then((answer) => {
    if (answer !== true) return;
    lostByProbe = true;
    // Abort the handlers now: their work no longer counts, and nothing will be committed.
    lifecycle.fence(controls, 'partition lost: librdkafka reports the assignment lost');
    conditions.changed();
  });
  const total = settings.drainTimeoutMs;
  const commitReserve = Math.min(settings.commitTimeoutMs, Math.floor(total / 4));
  // The revoke deadline is tied to max.poll.interval.ms; a close() that has to finish sooner
  // (closeTimeoutMs, a SIGTERM grace period) brings it forward, so the final commit still
  // happens before the consumer disconnects.
  let deadline = startedAt + total;
  // Streams replaced by a seek of these partitions still running aborted handlers count too.
  const isDrained = (): boolean =>
    controls.every((c) => c.isDrained) && lifecycle.retiredOf(partitions).length === 0;
  let drained = false;
  for (;;) {
    deadline = Math.min(startedAt + total, shutdown.revokeBy());
    const commitShare = Math.min(commitReserve, Math.floor((deadline - startedAt) / 4));
    const closingBy = shutdown.revokeBy();
    drained = await conditions.until(
      () => isDrained() || lostByProbe || shutdown.revokeBy() !== closingBy,
      deadline - commitShare,
    );
    drained = isDrained();
    if (drained || lostByProbe || shutdown.revokeBy() === closingBy) break;
  }
  // The answer normally came long before the drain ended; wait for it a little if not (it is
  // served by the next consume call).
  if (!lostByProbe)
    await settlesWithin(
      ctx.lostProbe.then(() => undefined),
      Math.min(200, deadline - Date.now()),
    );
  if (lostByProbe) {
    logger.warn(
      { generation, partitions, inFlight, waitedMs: Date.now() - startedAt },
      'librdkafka reports the assignment lost (this member was fenced or its session expired): handlers aborted, nothing committed',
    );
    return {
      kind: 'lost',
      reason: 'assignment lost (fenced by the group coordinator, or the session expired)',
    };
  }
  const drainedAt = lifecycle.drained(ctx, inFlight, !drained, total);
  // The user's onRevoke (flush a sink of these partitions) before the final commit, which keeps
  // its share of the deadline.
  if (hook.present) {
    // Its bound follows a close() that brings the revoke's deadline forward meanwhile. The
    // strategy commits nothing of these partitions while it runs (the transactions' periodic
    // commit would carry their offsets).
    const hookBy = (): number => {
      const by = Math.min(startedAt + total, shutdown.revokeBy());
      return by - Math.min(commitReserve, Math.floor((by - startedAt) / 4));
    };
    const resume = commits.holdPeriodic();
    try {
      await hook.run(partitions, hookBy, conditions);
    } finally {
      resume();
    }
  }

  // A periodic commit sent earlier must settle first so it cannot land after the final one;
  // it may take at most half of the commit reserve.
  if (commits.periodicInFlight) {
    await conditions.until(
      () => !commits.periodicInFlight,
      deadline - Math.floor(commitReserve / 2),
    );
  }
  // Never commit for a partition a newer assignment owns (a stale revoke, Backbeat BB-835): the
  // broker would take it under the current generation and could move the offset backwards.
  const stillOurs = controls.filter((c) => lifecycle.stillOwned(c));
  // A commit librdkafka still holds at the deadline (the coordinator unreachable) could land after
  // the next owner's: the partitions are held for its answer until shortly before the broker's
  // rebalance timeout (max.poll.interval.ms, counted from before this callback), or the close's.
  const rebalanceBy =
    startedAt + settings.maxPollIntervalMs - Math.min(5000, settings.maxPollIntervalMs / 10);
  const holdBy = (): number => Math.max(Date.now(), Math.min(rebalanceBy, shutdown.revokeBy()));
  const results: PartitionCommitResult[] = await commits.commitFinal(stillOurs, deadline, holdBy);
  for (const c of controls) {
    if (!stillOurs.includes(c)) {
      // Released by another path meanwhile (a newer assignment, librdkafka's final revoke at a
      // disconnect, a rebalance error): nothing committed for it; lost if that leaves work to redo.
      results.push(
        c.workSinceCommit
          ? {
              topic: c.topic,
              partition: c.partition,
              status: 'lost',
              reason: 'released by a newer rebalance before the final commit',
            }
          : {
              topic: c.topic,
              partition: c.partition,
              status: 'unchanged',
              offset: c.lastCommitted,
            },
      );
    }
  }
  // Refused for ownership by the broker: the partitions are lost.
  const refused = results.filter(
    (r) =>
      r.status === 'lost' &&
      stillOurs.some((c) => c.partition === r.partition && c.topic === r.topic),
  );
  return {
    kind: 'committed',
    results,
    refused,
    stillOurs,
    drainedAt,
    committedAt: Date.now(),
    transaction: commits.lastFinal,
  };
}
