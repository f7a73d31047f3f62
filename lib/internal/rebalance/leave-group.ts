/**
 * How a closing consumer leaves its group: release every partition through the revoke protocol
 * (never leaving before a revoke in flight drained, committed and unassigned), then leave — or,
 * for a static classic member, release locally and keep the membership — and let every commit be
 * answered before disconnecting.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { Assignments } from './assignments';
import type { OffsetCommits } from '../commit/committer';
import type { Conditions } from '../loop/wait-conditions';
import { untilMoving } from '../loop/wait-conditions';
import type { ConsumerClient } from '../binding/consumer-client';
import { list } from '../binding/rdkafka';
import type { PartitionLifecycle } from '../partition/lifecycle';
import type { RebalanceCoordinator } from './rebalance-coordinator';

/** The consumer's parts leaving works with. */
export interface LeavingParts {
  readonly rebalance: RebalanceCoordinator;
  readonly assignments: Assignments;
  readonly lifecycle: PartitionLifecycle;
  readonly commits: OffsetCommits;
  readonly client: ConsumerClient;
  readonly conditions: Conditions;
  readonly logger: Logger;
  readonly settings: ConsumerSettings;
  readonly staticInstanceId: string | undefined;
}

/**
 * Releases every partition through the revoke protocol, then leaves the group — never before a
 * revoke in flight has drained, committed (confirmed) and unassigned: a member that leaves first
 * has its final commits refused (UNKNOWN_MEMBER_ID under KIP-848) and the next owners redo that
 * work. The consume loop keeps polling meanwhile.
 */
export async function leaveGroup(host: LeavingParts, releaseBy: () => number): Promise<void> {
  const { rebalance, assignments, logger, settings, client } = host;
  // An assignment still waiting for its start offsets is answered now (then revoked below).
  rebalance.answerPending('the consumer is closing');
  // Stop intake: no new messages reach the pipelines; the revoke below drains and commits.
  host.lifecycle.stopIntake(assignments.values());
  if (rebalance.revokesInFlight > 0) {
    logger.info(
      { revokes: rebalance.revokesInFlight },
      'closing: waiting for the revoke in flight to finish before leaving the group',
    );
    const settled = await untilBeforeClose(host, () => rebalance.revokesInFlight === 0, releaseBy);
    if (!settled) {
      logger.warn(
        'close deadline passed while a rebalance was still in flight; leaving the group anyway (its unfinished work may be processed again: duplicates)',
      );
    }
    // An assignment that arrived meanwhile ended at once (closing); answer a pending one now.
    rebalance.answerPending('the consumer is closing');
  }
  const active = assignments.controls().filter((c) => c.state === 'ending' || c.active);
  if (host.staticInstanceId !== undefined && settings.groupProtocol === 'classic') {
    // librdkafka sends a LeaveGroup on unsubscribe() even for a static member (it skips it only
    // inside its own close), and the group would rebalance. Revoke locally instead, through
    // the same protocol (drain → commit → unassign); disconnect() then ends the session without
    // leaving, and the broker keeps the assignment for a restart within session.timeout.ms.
    logger.info(
      { groupInstanceId: host.staticInstanceId, partitions: list(active) },
      'static member closing: releasing the partitions locally without leaving the group',
    );
    if (active.length > 0) rebalance.onRevoke(list(active));
  } else {
    try {
      client.raw.unsubscribe();
    } catch (err) {
      logger.warn({ err }, 'unsubscribe failed');
    }
  }
  // Keep polling until librdkafka has nothing assigned and no rebalance is being handled
  // (a pending assign is answered, then revoked), so its close never waits on us.
  const released = await untilBeforeClose(
    host,
    () =>
      assignments.size === 0 &&
      !rebalance.busy &&
      assignmentEmpty(client) &&
      assignments.retiredDrained,
    releaseBy,
    50,
  );
  if (!released) {
    logger.warn(
      { partitions: list(assignments.controls()) },
      'close deadline passed before every partition was released; unfinished work may be processed again (duplicates)',
    );
  }
}

/**
 * A periodic commit in flight, or one librdkafka has not answered yet (one that timed out here),
 * could still be applied after this member is gone and move the group's offset back: keep
 * polling, within the deadline, until every commit is answered.
 */
export async function settleCommits(host: LeavingParts, deadline: () => number): Promise<void> {
  const { commits, client, logger } = host;
  if (commits.periodicInFlight)
    await untilBeforeClose(host, () => !commits.periodicInFlight, deadline);
  if (client.unansweredCount === 0) return;
  const answered = await untilBeforeClose(host, () => client.unansweredCount === 0, deadline);
  if (!answered) {
    logger.warn(
      { unanswered: client.unansweredCount },
      'closing with commits librdkafka has not answered: if the broker applies one later it may move the group offset back (the next owner would redo work: duplicates)',
    );
  }
}

/**
 * Waits for `condition` until `by()` — a time derived from the close deadline, which a later
 * close() may bring forward (then the wait starts over with the new time).
 */
function untilBeforeClose(
  host: LeavingParts,
  condition: () => boolean,
  by: () => number,
  pollMs?: number,
): Promise<boolean> {
  return untilMoving((c, d) => host.conditions.until(c, d, pollMs), condition, by);
}

function assignmentEmpty(client: ConsumerClient): boolean {
  try {
    return client.raw.assignments().length === 0;
  } catch {
    return true;
  }
}
