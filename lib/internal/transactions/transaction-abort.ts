/**
 * The abort of a transaction: every partition that had work in it is poisoned (its later results
 * are dropped, never let into a later transaction) and sought back to the first offset of that
 * work, so it is redone. An abort gets at least `commitTimeoutMs` and is resumed while it times
 * out, up to the transaction's deadline; one librdkafka refuses for good, for a transaction no
 * commitTransaction was called for, recreates the producer with the same transactional.id
 * (initTransactions fences the old epoch, the broker aborts what it registered) and then rewinds
 * as after an abort.
 */
import { NotAssignedError, TransactionError } from '../../errors';
import { blame } from './refused-inputs';
import { beginNext, fatal, retrying, track } from './transaction-calls';
import { deadlineOf, mayRecreate } from './transaction-context';
import type { TransactionContext } from './transaction-context';
import type { TransactionWork } from './transaction-writer';
import { TxnCallError } from './transactional-producer';

/**
 * Aborts `txn`: its streams are poisoned and sought back to the first offset of their work.
 * `blameInputs`: its commit failed, and records the broker refused are pinned on their inputs first.
 */
export async function abort(
  ctx: TransactionContext,
  txn: TransactionWork,
  reason: string,
  deadline: number,
  blameInputs = false,
): Promise<void> {
  const { book } = ctx;
  book.state = { kind: 'aborting' };
  for (const c of txn.touched.keys()) {
    book.poisoned.add(c);
    ctx.writer.drop(c);
  }
  // The abort gets its own budget: the commit that failed has often used up its deadline (its
  // sendOffsetsToTransaction retried, or held by a coordinator that did not answer). One that
  // timed out goes on in librdkafka's background and is resumed by calling it again, as long as
  // the transaction can still end before the broker aborts it by itself; a close bounds it.
  const start = Date.now();
  const until = Math.max(
    deadline,
    start + ctx.settings.commitTimeoutMs,
    deadlineOf(ctx, txn, start),
  );
  // A close, or a revoke that must release its partitions, bounds it — to no less than a second:
  // an abort that did not happen leaves the outputs blocked for read_committed readers until
  // transaction.timeout.ms.
  try {
    await retrying(
      ctx,
      (t) => ctx.producer.abort(t),
      () => Math.min(until, book.revokeHoldBy()),
      start + 1000,
    );
  } catch (err) {
    if (ctx.closeDeadline.by !== Infinity && Date.now() >= ctx.closeDeadline.by) {
      book.state = { kind: 'failed', error: err instanceof Error ? err : new Error(String(err)) };
      ctx.logger.warn(
        { err, reason },
        'the transaction could not be aborted before the close deadline: the broker aborts it at transaction.timeout.ms (read_committed readers of its outputs wait until then); nothing of it is visible',
      );
      return;
    }
    if (!(await recreate(ctx, txn, err, reason))) {
      fatal(ctx, err, `the transaction could not be aborted (aborting because ${reason})`);
      return;
    }
  }
  book.counts.aborted += 1;
  book.counts.abortedMessages += txn.messages;
  book.counts.abortedRecords += txn.records;
  ctx.logger.warn(
    { reason, messages: txn.messages, records: txn.records, partitions: txn.touched.size },
    'transaction aborted: its partitions go back to the first message of its work and redo it',
  );
  if (blameInputs && !(await blame(ctx, txn))) return;
  for (const [control, first] of txn.touched) {
    if (!ctx.host.owns(control) || !control.active) continue; // revoked: the next owner redoes it
    ctx.host
      .seek({ topic: control.topic, partition: control.partition }, first)
      .catch((err: unknown) => {
        if (err instanceof NotAssignedError) return; // revoked meanwhile: the next owner redoes it
        ctx.host.fail(
          new TransactionError(
            `Could not rewind ${control.topic}[${control.partition}] to ${first} after an aborted transaction: ${String((err as Error).message ?? err)}`,
            ctx.producer.transactionalId,
            undefined,
            { cause: err },
          ),
        );
      });
  }
  await beginNext(ctx);
}

/**
 * Aborts the open transaction as the operation in flight; while a commit holds it (it waits for
 * its partly-written message), that commit aborts it instead.
 */
export function abortInBackground(ctx: TransactionContext, reason: string): void {
  if (ctx.book.state.kind !== 'open') return;
  if (ctx.book.op !== undefined) {
    // A commit holds the open transaction (it waits for its partly-written message): that
    // commit aborts it instead.
    ctx.writer.work.doomed ??= reason;
    return;
  }
  const txn = ctx.writer.take();
  void track(ctx, abort(ctx, txn, reason, Date.now() + ctx.settings.commitTimeoutMs));
}

/**
 * The abort of `txn` failed for good: librdkafka refused it with a fatal error that is not a
 * fencing (typically INVALID_TXN_STATE, the coordinator's answer to an EndTxn(abort) for a
 * transaction it never registered: its AddPartitionsToTxn / AddOffsetsToTxn went to a
 * coordinator that stopped answering and lost the role; the new one still holds the previous
 * transaction, committed), or it kept timing out until the transaction's deadline (its flush
 * waits for records sent to a leader that stopped answering; the broker aborts the transaction
 * at its timeout). When no commitTransaction of `txn` was ever called (no EndTxn(commit) of it can have reached
 * the coordinator, so the broker cannot commit it), the native producer is recreated with the
 * same transactional.id: its initTransactions fences the old epoch and has the broker abort
 * whatever of `txn` it registered; the caller then rewinds its partitions as after an abort.
 * True when the new producer is ready.
 */
async function recreate(
  ctx: TransactionContext,
  txn: TransactionWork,
  err: unknown,
  reason: string,
): Promise<boolean> {
  const failure = err instanceof TxnCallError ? err.failure : undefined;
  const gaveUp = failure?.kind === 'fatal' || failure?.kind === 'retriable';
  if (!gaveUp || !mayRecreate(ctx, txn)) return false;
  ctx.logger.warn(
    { err, reason },
    'the abort failed for good (refused fatally, or timing out until the transaction deadline), and no commit of this transaction was ever sent: recreating the transactional producer with the same transactional.id (its initTransactions fences the old one and the broker aborts what it registered); the transaction counts as aborted, its inputs are redone',
  );
  try {
    await ctx.producer.recreate(
      Math.min(ctx.settings.commitTimeoutMs, 5000),
      ctx.settings.connectTimeoutMs,
      Math.max(ctx.settings.connectTimeoutMs, ctx.options.transactionTimeoutMs),
    );
  } catch (e) {
    ctx.logger.error({ err: e }, 'the transactional producer could not be recreated');
    return false;
  }
  ctx.book.counts.recreatedProducers += 1;
  return true;
}
