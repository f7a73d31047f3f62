/**
 * What the revoke protocol asks of the transactions. Its final commit: what is finished goes into
 * the open transaction, the revoked streams are sealed (nothing more of them is written: a later
 * transaction would carry their records without their offsets), and the transaction is committed
 * and confirmed — within the transaction's own deadline whatever the drain deadline — with one
 * result per revoked stream. And partitions lost without a commit: their work is poisoned, and an
 * open transaction holding any of it aborted.
 */
import type { PartitionCommitResult } from '../../types';
import type { PartitionControl } from '../partition/partition-control';
import { abortInBackground } from './transaction-abort';
import { commit } from './transaction-commit';
import type { TransactionContext } from './transaction-context';

/**
 * The revoke's commit: what is finished goes into the open transaction, which is committed
 * (outputs and offsets together) and confirmed; one result per revoked stream. `holdBy`: until
 * when the revoke may hold its partitions for a commitTransaction that timed out.
 */
export async function commitFinal(
  ctx: TransactionContext,
  controls: PartitionControl[],
  deadline: number,
  holdBy: () => number,
): Promise<PartitionCommitResult[]> {
  const { book } = ctx;
  // What is finished goes into this transaction; from then on nothing more of these streams is
  // written (a later transaction would carry their records without their offsets).
  ctx.writer.pump();
  for (const c of controls) book.sealed.add(c);
  book.revokeHolds.add(holdBy);
  const outcome = await commit(ctx, 'revoke', deadline).finally(() => {
    book.revokeHolds.delete(holdBy);
  });
  const size = { messages: outcome.messages, records: outcome.records };
  book.lastFinal =
    outcome.failure !== undefined
      ? {
          outcome: book.state.kind === 'failed' ? 'failed' : 'aborted',
          ...size,
          reason: outcome.failure,
        }
      : outcome.committed.size > 0
        ? { outcome: 'committed', ...size }
        : { outcome: 'none', messages: 0, records: 0 };
  return controls.map((c): PartitionCommitResult => {
    const base = { topic: c.topic, partition: c.partition };
    if (book.poisoned.has(c)) {
      return {
        ...base,
        status: 'failed',
        offset: c.lastCommitted ?? -1,
        reason: `the transaction with its work was aborted${outcome.failure === undefined ? '' : `: ${outcome.failure}`}; the next owner redoes it`,
      };
    }
    const offset = c.ledger.committable();
    if (offset === undefined || offset === c.lastCommitted) {
      return outcome.committed.has(c) && offset !== undefined
        ? { ...base, status: 'committed', offset }
        : { ...base, status: 'unchanged', offset: c.lastCommitted };
    }
    const reason = outcome.failure ?? 'not committed';
    if (outcome.lost) return { ...base, status: 'lost', reason };
    return { ...base, status: 'failed', offset, reason };
  });
}

/** Partitions taken away without a commit: their work must not be committed by anyone here. */
export function lost(ctx: TransactionContext, controls: readonly PartitionControl[]): void {
  const hit = controls.filter((c) => ctx.writer.work.touched.has(c));
  for (const c of controls) {
    ctx.book.poisoned.add(c);
    ctx.writer.drop(c);
  }
  if (hit.length > 0 && ctx.book.state.kind === 'open') {
    abortInBackground(ctx, 'a partition with work in the open transaction was lost');
  }
}
