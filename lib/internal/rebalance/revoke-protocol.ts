/**
 * The revoke protocol, top to bottom: a revoked partition's stream ends (no new messages; what
 * has not started is dropped); its in-flight handlers drain; its final offset is committed and
 * confirmed by the broker; only then is it unassigned — within the drain deadline, which a
 * close() in progress brings forward. A commit librdkafka still holds at that deadline (the
 * coordinator unreachable) keeps the partitions until it is answered, up to the broker's
 * rebalance timeout: handed over, it could land after the next owner's commits.
 *
 * Lost is decided here and only here. A revoke is a loss (handlers aborted, nothing committed,
 * released at once: others may own the partitions already) when librdkafka announced it before
 * the revoke arrived (max.poll exceeded, session timed out), when librdkafka reports the
 * assignment lost (the probe), or when the broker refuses the final commit for ownership reasons.
 */
import type { Logger } from 'pino';
import type { ConsumerSettings } from '../../config';
import type { RebalanceEvent, RebalanceProtocol, TopicPartition } from '../../types';
import type { Committer } from '../commit/committer';
import { settlesWithin } from '../loop/wait-conditions';
import type { FlowControl } from '../loop/flow-control';
import type { PartitionControl } from '../partition/partition-control';
import { list } from '../binding/rdkafka';

/** One revoke: what librdkafka revoked and what this member held of it. */
export interface RevokeContext {
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
  /** Why librdkafka said, before this revoke, that the member was dropped (undefined: it did not). */
  readonly announcedLost: string | undefined;
  /** librdkafka's answer: is the assignment lost? (see ConsumerClient.probeAssignmentLost) */
  readonly lostProbe: Promise<boolean | undefined>;
}

/** What the protocol needs around it (the rebalance coordinator provides it). */
export interface RevokeHost {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly committer: Committer;
  readonly flow: FlowControl;
  /** When a revoke must end because the consumer closes (+Infinity while not closing). */
  closingBy(): number;
  until(condition: () => boolean, deadline: number): Promise<boolean>;
  changed(): void;
  /** Streams a seek of these partitions replaced whose aborted handlers still run. */
  retiredOf(partitions: readonly TopicPartition[]): PartitionControl[];
  /** Whether the stream still owns its partition (no newer assignment took it). */
  stillOwned(control: PartitionControl): boolean;
  emit(event: RebalanceEvent): void;
  unassign(partitions: TopicPartition[], protocol: RebalanceProtocol, generation: number): void;
  forget(controls: PartitionControl[]): void;
}

/** drain → commit (confirmed) → unassign, within the drain deadline; or lost. */
export async function revoke(ctx: RevokeContext, host: RevokeHost): Promise<void> {
  const { partitions, controls, protocol, generation, startedAt, handedOver } = ctx;
  const { settings, logger, committer } = host;
  if (ctx.announcedLost !== undefined) {
    releaseLost(ctx, host, ctx.announcedLost);
    return;
  }
  const inFlight = controls.reduce((n, c) => n + c.inFlight, 0);
  for (const c of controls) c.end();
  logger.info({ generation, protocol, partitions, inFlight }, 'revoking');
  host.emit({ type: 'revoking', generation, protocol, partitions, at: startedAt });
  let lostByProbe = false;
  void ctx.lostProbe.then((answer) => {
    if (answer !== true) return;
    lostByProbe = true;
    // Abort the handlers now: their work no longer counts, and nothing will be committed.
    for (const c of controls) c.fence('partition lost: librdkafka reports the assignment lost');
    host.changed();
  });
  const total = settings.drainTimeoutMs;
  const commitReserve = Math.min(settings.commitTimeoutMs, Math.floor(total / 4));
  // The revoke deadline is tied to max.poll.interval.ms; a close() that has to finish sooner
  // (closeTimeoutMs, a SIGTERM grace period) brings it forward, so the final commit still
  // happens before the consumer disconnects.
  let deadline = startedAt + total;
  // Streams replaced by a seek of these partitions still running aborted handlers count too.
  const isDrained = (): boolean =>
    controls.every((c) => c.isDrained) && host.retiredOf(partitions).length === 0;
  let drained = false;
  for (;;) {
    deadline = Math.min(startedAt + total, host.closingBy());
    const commitShare = Math.min(commitReserve, Math.floor((deadline - startedAt) / 4));
    const closingBy = host.closingBy();
    drained = await host.until(
      () => isDrained() || lostByProbe || host.closingBy() !== closingBy,
      deadline - commitShare,
    );
    drained = isDrained();
    if (drained || lostByProbe || host.closingBy() === closingBy) break;
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
    releaseLost(
      ctx,
      host,
      'assignment lost (fenced by the group coordinator, or the session expired)',
    );
    return;
  }
  const stragglers = controls.filter((c) => !c.isDrained);
  const stragglerCount = stragglers.reduce((n, c) => n + c.inFlight, 0);
  const stuck = stragglers.map((c) => c.describe());
  for (const c of stragglers) c.fence('drain deadline passed');
  const drainedAt = Date.now();
  if (!drained) {
    logger.warn(
      {
        generation,
        partitions: list(stragglers),
        stragglers: stragglerCount,
        stuck,
        drainTimeoutMs: total,
      },
      'drain deadline passed: committing what is contiguous and releasing the partitions; the next owner may process the unfinished messages again (duplicates)',
    );
  }
  logger.info(
    { generation, partitions, inFlight, durationMs: drainedAt - startedAt, timedOut: !drained },
    'drained',
  );
  host.emit({
    type: 'drained',
    generation,
    protocol,
    partitions,
    inFlight,
    stragglers: stragglerCount,
    timedOut: !drained,
    durationMs: drainedAt - startedAt,
    at: drainedAt,
  });

  // A periodic commit sent earlier must settle first so it cannot land after the final one;
  // it may take at most half of the commit reserve.
  if (committer.periodicInFlight) {
    await host.until(() => !committer.periodicInFlight, deadline - Math.floor(commitReserve / 2));
  }
  // Never commit for a partition a newer assignment owns (a stale revoke, Backbeat BB-835): the
  // broker would take it under the current generation and could move the offset backwards.
  const stillOurs = controls.filter((c) => host.stillOwned(c));
  // A commit librdkafka still holds at the deadline (the coordinator unreachable) could land after
  // the next owner's: the partitions are held for its answer until shortly before the broker's
  // rebalance timeout (max.poll.interval.ms, counted from before this callback), or the close's.
  const rebalanceBy =
    startedAt + settings.maxPollIntervalMs - Math.min(5000, settings.maxPollIntervalMs / 10);
  const holdBy = (): number => Math.max(Date.now(), Math.min(rebalanceBy, host.closingBy()));
  const results = await committer.commitFinal(stillOurs, deadline, holdBy);
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
  const committedAt = Date.now();
  const lost = results.filter(
    (r) =>
      r.status === 'lost' &&
      stillOurs.some((c) => c.partition === r.partition && c.topic === r.topic),
  );
  logger.info(
    { generation, results, durationMs: committedAt - drainedAt },
    lost.length > 0 ? 'final commit refused: partitions lost' : 'committed',
  );
  const transaction = committer.lastFinal;
  host.emit({
    type: 'committed',
    generation,
    protocol,
    partitions,
    results,
    durationMs: committedAt - drainedAt,
    at: committedAt,
    ...(transaction === undefined ? {} : { transaction }),
  });

  host.flow.releasing(stillOurs);
  host.unassign(partitions, protocol, generation);
  for (const c of controls) c.release();
  host.forget(controls);
  const revokedAt = Date.now();
  // Each stream ends once (a close or a rebalance error may have ended it meanwhile): in `lost`
  // when the broker refused the final commit for ownership, or when another path released it
  // before its commit and left work to redo; else in `revoked`.
  const ending = controls.filter((c) => c.claimEnding());
  const refused = lost.length > 0;
  // What the results decided (a stream released by another path is `lost` there only with work
  // to redo), not decided again after the release.
  const lostResult = (c: PartitionControl): boolean =>
    results.some((r) => r.status === 'lost' && r.topic === c.topic && r.partition === c.partition);
  const lostEnding = ending.filter((c) => refused || lostResult(c));
  const revokedEnding = ending.filter((c) => !lostEnding.includes(c));
  // `revoked` first: the metrics close the revoke's record (its phases) on it.
  if (revokedEnding.length > 0) {
    const revokedPartitions = list(revokedEnding);
    logger.info(
      {
        generation,
        partitions: revokedPartitions,
        durationMs: revokedAt - committedAt,
        totalMs: revokedAt - startedAt,
        handedOver,
        ...(handedOver ? {} : { groupInstanceId: ctx.groupInstanceId }),
      },
      handedOver
        ? 'revoked'
        : 'revoked locally, not handed over: the group keeps these partitions for this group.instance.id until its session times out (a restart within it resumes them without a rebalance)',
    );
    host.emit({
      type: 'revoked',
      generation,
      protocol,
      partitions: revokedPartitions,
      durationMs: revokedAt - committedAt,
      totalMs: revokedAt - startedAt,
      handedOver,
      at: revokedAt,
    });
  }
  if (lostEnding.length > 0) {
    const first = lost[0] ?? results.find((r) => r.status === 'lost');
    const reason = first?.status === 'lost' ? first.reason : 'commit refused';
    const lostPartitions = list(lostEnding);
    logger.warn(
      { generation, partitions: lostPartitions, reason },
      refused
        ? 'partitions lost: the final commit was refused; work since the last confirmed commit will be redone by the next owner (duplicates)'
        : 'partitions lost: released by a newer rebalance before the final commit; work since the last confirmed commit will be redone (duplicates)',
    );
    host.emit({
      type: 'lost',
      generation,
      protocol,
      partitions: lostPartitions,
      reason,
      at: revokedAt,
    });
  }
}

/** Partitions taken away without a chance to commit: handlers aborted, nothing committed. */
function releaseLost(ctx: RevokeContext, host: RevokeHost, reason: string): void {
  const { partitions, controls, protocol, generation } = ctx;
  for (const c of controls) c.fence(`partition lost: ${reason}`);
  // Transactions abort the open one if it holds work of these partitions.
  host.committer.lost(controls);
  host.flow.releasing(controls);
  host.unassign(partitions, protocol, generation);
  host.forget(controls);
  host.logger.warn(
    { generation, partitions, reason },
    'partitions lost: nothing committed; their unfinished work will be redone by the next owner',
  );
  // Each stream ends once (a close may have ended it meanwhile).
  const ending = list(controls.filter((c) => c.claimEnding()));
  if (ending.length > 0)
    host.emit({ type: 'lost', generation, protocol, partitions: ending, reason, at: Date.now() });
}
