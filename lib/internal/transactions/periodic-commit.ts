/**
 * When the open transaction is committed outside a revoke: once it holds `maxMessages` messages,
 * has been open `maxMs`, or holds a suspect input alone (redone in a transaction of its own); and,
 * with nothing processed, every `maxMs` while offsets moved anyway (a new partition's start,
 * markers skipped). One commit at a time, never while a message is partly written.
 */
import { commit, offsetsToCommit } from './transaction-commit';
import type { TransactionContext } from './transaction-context';

/** Called after each consume call: commits the open transaction when it is full or old enough. */
export function maybeCommit(ctx: TransactionContext): void {
  const { book, options } = ctx;
  const txn = ctx.writer.work;
  // A message partly written does not hold the commit back: the commit lets it finish first (up to
  // half of its time; nothing else starts meanwhile) or aborts the transaction (transaction-commit.ts),
  // so its records and its offset still commit together. Skipping here instead kept a transaction
  // open past maxMs, and past transaction.timeout.ms, whenever the producer's queue was the
  // bottleneck (a partly-written message at almost every check).
  if (book.op !== undefined || book.state.kind !== 'open' || book.periodicHeld > 0) {
    return;
  }
  const { openedAt, messages } = txn;
  const now = Date.now();
  // consumer.commit() asked: whatever is open (or moved) commits now.
  const requested = book.commitRequested;
  if (openedAt !== undefined) {
    if (
      requested ||
      txn.solo ||
      messages >= options.maxMessages ||
      now - openedAt >= options.maxMs
    ) {
      commitInBackground(ctx);
    }
    return;
  }
  // Nothing processed: offsets may still have moved (a new partition's start, markers skipped).
  if ((requested || now - book.lastCommitAt >= options.maxMs) && offsetsToCommit(ctx).length > 0) {
    commitInBackground(ctx);
  } else if (requested) {
    book.commitRequested = false; // nothing to commit
  }
}

/** Commits the open transaction unless an operation is in flight (the writer's `full` asks too). */
export function commitInBackground(ctx: TransactionContext): void {
  if (ctx.book.op !== undefined || ctx.book.periodicHeld > 0) return;
  ctx.book.commitRequested = false;
  void commit(ctx, 'periodic', Date.now() + ctx.settings.commitTimeoutMs * 2);
}
