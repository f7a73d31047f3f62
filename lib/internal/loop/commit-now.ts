/**
 * `consumer.commit()`: commit what has been processed now, and answer once the broker confirmed it.
 * The commit strategy is asked to commit at its next turn (the loop's, between two consume calls:
 * the periodic commit, or the open transaction's) regardless of its interval; the call then waits
 * until each partition owned at the call — one being revoked included, whose final commit answers
 * it — has that offset confirmed (`lastCommitted` moves only on the broker's confirmation), was
 * released, or the wait ran out.
 */
import { ClosedError, CommitError } from '../../errors';
import type { PartitionCommitResult } from '../../types';
import type { OffsetCommits } from '../commit/committer';
import type { PartitionControl } from '../partition/partition-control';
import type { Assignments } from '../rebalance/assignments';
import type { Conditions } from './wait-conditions';

interface Target {
  readonly control: PartitionControl;
  readonly offset: number;
  readonly before: number | undefined;
}

const confirmed = (t: Target): boolean =>
  t.control.lastCommitted !== undefined && t.control.lastCommitted >= t.offset;
const isReleased = (control: PartitionControl): boolean =>
  control.state === 'released' || control.state === 'fenced';
const released = (t: Target): boolean => isReleased(t.control);

export async function commitNow(
  stateKind: string,
  commits: OffsetCommits | undefined,
  assignments: Assignments,
  conditions: Conditions,
  timeoutMs: number,
): Promise<PartitionCommitResult[]> {
  if (stateKind === 'closing' || stateKind === 'closed') {
    throw new ClosedError('commit() after close(): the close commits what finished');
  }
  if (commits === undefined || stateKind !== 'running') return [];
  const targets: Target[] = [];
  for (const control of assignments.values()) {
    // A stream being revoked counts too: its revoke's final commit confirms it (or it is released
    // first, and reported so).
    const offset = control.ledger.committable();
    if (isReleased(control) || offset === undefined) continue;
    targets.push({ control, offset, before: control.lastCommitted });
  }
  if (targets.some((t) => !confirmed(t))) {
    commits.commitSoon();
    conditions.changed();
    await conditions.until(
      () => targets.every((t) => confirmed(t) || released(t)),
      Date.now() + timeoutMs,
      50,
    );
  }
  const results: PartitionCommitResult[] = targets.map((t) => {
    const { topic, partition } = t.control;
    if (confirmed(t)) {
      return t.before !== undefined && t.before >= t.offset
        ? { topic, partition, status: 'unchanged', offset: t.before }
        : { topic, partition, status: 'committed', offset: t.offset };
    }
    return {
      topic,
      partition,
      status: 'failed',
      offset: t.offset,
      reason: released(t)
        ? 'the partition was released (revoked, lost or sought) before this offset was confirmed'
        : `not confirmed by the broker within ${timeoutMs} ms`,
    };
  });
  const failed = results.filter((r) => r.status === 'failed');
  if (failed.length > 0) {
    const first = failed[0];
    throw new CommitError(
      `commit() was not confirmed for ${failed.map((r) => `${r.topic}[${r.partition}]`).join(', ')}: ${first?.status === 'failed' ? first.reason : ''}`,
      undefined,
      failed.map((r) => ({
        topic: r.topic,
        partition: r.partition,
        ...(r.status === 'failed' ? { offset: r.offset } : {}),
      })),
    );
  }
  return results;
}
