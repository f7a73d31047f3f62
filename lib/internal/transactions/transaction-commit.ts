/**
 * The commit of the open transaction, periodic or a revoke's: sendOffsetsToTransaction (the
 * contiguous offsets of every partition it touched, with the consumer's group metadata) →
 * commitTransaction, each retried while librdkafka calls the error retriable; only a commit the
 * broker confirmed moves a partition's `lastCommitted`.
 *
 * - Nothing of a transaction is committed past its own deadline (`transaction.timeout.ms` after
 *   its first record): one that cannot be committed by then is aborted, and its inputs redone.
 * - node-rdkafka reads the group metadata when its worker runs, so a stream that lost its partition
 *   while the offsets were being sent aborts the transaction instead of committing it.
 * - A commitTransaction that timed out goes on in librdkafka's background, which refuses an abort
 *   meanwhile: it is called again (resumed) until the transaction's own deadline, never aborted;
 *   still unresolved then, the consumer stops with a TransactionError.
 * - An abortable failure aborts the transaction (transaction-abort.ts); a fenced producer or any
 *   fatal error stops the consumer.
 */
import type { PartitionControl } from '../partition/partition-control';
import type { TopicPartitionOffset } from '../binding/rdkafka';
import { OWNERSHIP_LOST_CODES } from '../binding/rdkafka';
import { abort } from './transaction-abort';
import { beginNext, fatal, retrying, track } from './transaction-calls';
import { closeBound, deadlineOf, mayRecreate } from './transaction-context';
import type { TransactionContext } from './transaction-context';
import type { TransactionWork } from './transaction-writer';
import type { TransactionSpanHandle } from '../../tracing';
import { TxnCallError } from './transactional-producer';

/** Whose commit it is: the engine's periodic one, or a revoke's final one. */
export type CommitKind = 'periodic' | 'revoke';

export interface CommitOutcome {
  /** The streams whose offset the broker confirmed in this commit. */
  readonly committed: ReadonlySet<PartitionControl>;
  readonly failure: string | undefined;
  /** The broker said the member no longer owns its partitions. */
  readonly lost: boolean;
  /** The size of the transaction committed or aborted. */
  readonly messages: number;
  readonly records: number;
}

const NOTHING: CommitOutcome = {
  committed: new Set(),
  failure: undefined,
  lost: false,
  messages: 0,
  records: 0,
};
const EXPIRED =
  'the transaction could not be committed within transaction.timeout.ms of its first record (the broker aborts it then)';
/**
 * The close deadline came while a sendOffsetsToTransaction was still in flight (librdkafka ends it
 * only when its request is answered or times out): close() stops waiting for it; the transaction
 * is aborted, and the consumer and the producer disconnected, once that call returned.
 */
export const CLOSE_DUE = new Error(
  'the close deadline came while the transaction offsets were being sent (the transaction coordinator does not answer): close() ends without waiting for that call; once it returns, the transaction is aborted (nothing of it is visible; its inputs are redone by the next owner; if the process exits first, the broker aborts it at transaction.timeout.ms) and the consumer and the producer are disconnected',
);
/** The consumer is being disconnected: no more offsets can be sent with its group metadata. */
const CONSUMER_GONE = new Error(
  'the consumer closed before the transaction offsets could be sent: the transaction is aborted and its inputs redone by the next owner',
);
const failed = (failure: string, txn?: TransactionWork, lost = false): CommitOutcome => ({
  committed: new Set(),
  failure,
  lost,
  messages: txn?.messages ?? 0,
  records: txn?.records ?? 0,
});

/** Commits the open transaction (one at a time): offsets, then the commit, both confirmed. */
export async function commit(
  ctx: TransactionContext,
  kind: CommitKind,
  deadline: number,
): Promise<CommitOutcome> {
  const { book } = ctx;
  while (book.op !== undefined) await book.op;
  if (book.state.kind === 'failed') return failed(book.state.error.message, ctx.writer.work);
  if (book.state.kind !== 'open') {
    return failed(`the transactional producer is ${book.state.kind}`, ctx.writer.work);
  }
  let outcome = NOTHING;
  await track(
    ctx,
    commitOpen(ctx, kind, deadline).then((o) => {
      outcome = o;
    }),
  );
  return outcome;
}

/** The offsets the next commit carries: every touched stream, and owned ones whose offset moved. */
export function offsetsToCommit(
  ctx: TransactionContext,
): { control: PartitionControl; offset: number }[] {
  const txn = ctx.writer.work;
  const byKey = new Map<string, { control: PartitionControl; offset: number }>();
  const consider = (control: PartitionControl): void => {
    if (ctx.book.poisoned.has(control)) return;
    const offset = control.ledger.committable();
    if (offset === undefined || offset === control.lastCommitted) return;
    const seen = byKey.get(control.key);
    // A stream a seek replaced and its replacement: the current owner's offset wins.
    if (seen !== undefined && ctx.host.owns(seen.control)) return;
    byKey.set(control.key, { control, offset });
  };
  for (const c of txn.touched.keys()) consider(c);
  for (const c of ctx.host.owned()) {
    if (c.active && !txn.touched.has(c)) consider(c);
  }
  return [...byKey.values()];
}

/** The commit of the open transaction, as the operation in flight. */
async function commitOpen(
  ctx: TransactionContext,
  kind: CommitKind,
  by: number,
): Promise<CommitOutcome> {
  const { book } = ctx;
  const txn = ctx.writer.work;
  // Nothing of a transaction is committed past its own deadline (the broker aborts it then), a
  // revoke's final commit included: one that cannot finish by then aborts it instead.
  const txnDeadline = deadlineOf(ctx, txn);
  const deadline = Math.min(by, txnDeadline);
  // The partly-written message may take half of what is left; the commit needs the rest.
  const unfinished =
    txn.partial !== undefined
      ? await ctx.writer.finishPartial(Date.now() + (closeBound(ctx, deadline) - Date.now()) / 2)
      : txn.doomed;
  // A stream with work in it was lost or replaced while another commit or abort was in flight
  // (lost() could not abort then): its records must not be committed with any offset.
  const lostWork = [...txn.touched.keys()].some((c) => book.poisoned.has(c));
  const reason =
    unfinished ??
    (lostWork
      ? 'a partition with work in the open transaction was lost or replaced'
      : Date.now() >= txnDeadline
        ? EXPIRED
        : undefined);
  if (reason !== undefined) {
    ctx.writer.take();
    await abort(ctx, txn, reason, deadline);
    return failed(reason, txn);
  }
  const offsets = offsetsToCommit(ctx);
  if (offsets.length === 0 && txn.touched.size === 0) return NOTHING;
  ctx.writer.take();
  book.state = { kind: 'committing' };
  const sentAt = Date.now();
  const tpos = offsets.map(({ control, offset }) => ({
    topic: control.topic,
    partition: control.partition,
    offset,
  }));
  const span = traceCommit(ctx, kind, txn, tpos);
  try {
    const outcome = await sendAndCommit(
      ctx,
      kind,
      txn,
      offsets,
      tpos,
      sentAt,
      deadline,
      txnDeadline,
    );
    span?.end(outcome.failure === undefined ? undefined : new Error(outcome.failure));
    return outcome;
  } catch (err) {
    span?.end(err);
    throw err;
  }
}

/** The tracer's span of this commit, if it traces transactions (its failure never stops one). */
function traceCommit(
  ctx: TransactionContext,
  kind: CommitKind,
  txn: TransactionWork,
  tpos: readonly TopicPartitionOffset[],
): TransactionSpanHandle | undefined {
  const tracer = ctx.host.tracer;
  if (tracer?.transaction === undefined) return undefined;
  try {
    const handle = tracer.transaction({
      group: ctx.settings.groupId,
      transactionalId: ctx.producer.transactionalId,
      kind,
      messages: txn.messages,
      records: txn.records,
      inputs: txn.inputs,
      offsets: tpos,
    });
    return {
      end: (error?: unknown) => {
        try {
          handle.end(error);
        } catch (err) {
          ctx.logger.warn({ err }, 'the tracer failed to end a transaction span');
        }
      },
    };
  } catch (err) {
    ctx.logger.warn({ err }, 'the tracer failed to start a transaction span');
    return undefined;
  }
}

/** sendOffsetsToTransaction then commitTransaction, from `sentAt` on (see {@link commitOpen}). */
async function sendAndCommit(
  ctx: TransactionContext,
  kind: CommitKind,
  txn: TransactionWork,
  offsets: readonly { control: PartitionControl; offset: number }[],
  tpos: TopicPartitionOffset[],
  sentAt: number,
  deadline: number,
  txnDeadline: number,
): Promise<CommitOutcome> {
  const { book, host, logger } = ctx;
  const streams = [...new Set([...offsets.map((o) => o.control), ...txn.touched.keys()])];
  const live = (c: PartitionControl): boolean => host.owns(c) && !book.dead(c);
  const sentLive = new Set(streams.filter(live));
  try {
    if (tpos.length > 0) {
      // Not in short calls: librdkafka's send_offsets_to_transaction is not resumable, it waits
      // for its AddOffsetsToTxn answer whatever the call's timeout and fails as timed out when
      // the answer comes after it, so calls shorter than the coordinator's answers never succeed.
      // A close does not wait for it past its deadline (see CLOSE_DUE).
      await ctx.closeDeadline.race(
        retrying(ctx, (t) => sendOffsets(ctx, tpos, t), deadline, -Infinity, false),
        CLOSE_DUE,
      );
    }
  } catch (err) {
    if (err === CLOSE_DUE) {
      host.observer().commit(kind, tpos, Date.now() - sentAt, CLOSE_DUE);
      logger.warn({ kind, offsets: tpos }, CLOSE_DUE.message);
      book.state = { kind: 'failed', error: CLOSE_DUE };
      book.abandoned = txn;
      return failed(CLOSE_DUE.message, txn);
    }
    if (err === CONSUMER_GONE) {
      book.state = { kind: 'open' }; // abort() takes it from here
      await abort(ctx, txn, CONSUMER_GONE.message, deadline);
      return failed(CONSUMER_GONE.message, txn);
    }
    return commitFailed(ctx, kind, txn, tpos, sentAt, err, deadline);
  }
  // node-rdkafka reads the consumer's group metadata when its worker runs, not at the call: after
  // a rebalance in between, a stream's offset may have gone under the new generation.
  const superseded = streams.filter((c) => book.poisoned.has(c) || (sentLive.has(c) && !live(c)));
  if (superseded.length === 0 && Date.now() >= txnDeadline) {
    // The commit would reach the broker after it aborted the transaction: abort it here.
    host.observer().commit(kind, tpos, Date.now() - sentAt, new Error(EXPIRED));
    book.state = { kind: 'open' }; // abort() takes it from here
    await abort(ctx, txn, EXPIRED, deadline);
    return failed(EXPIRED, txn);
  }
  if (superseded.length > 0) {
    const names = superseded.map((c) => `${c.topic}[${c.partition}]`).join(', ');
    const why = `${names} lost its partition while the transaction's offsets were being sent`;
    host.observer().commit(kind, tpos, Date.now() - sentAt, new Error(why));
    logger.warn(
      { kind, offsets: tpos, partitions: names },
      'a partition was lost while the transaction offsets were being sent (they may have gone under the new generation): aborting the transaction (its records are never visible; its inputs are redone)',
    );
    book.state = { kind: 'open' }; // abort() takes it from here
    await abort(ctx, txn, why, deadline);
    return failed(why, txn);
  }
  // A commitTransaction that timed out goes on in the background and must be resumed (an abort
  // is refused meanwhile), up to the transaction's own deadline, or less when a revoke waiting
  // for it must release its partitions sooner.
  const resumeBy = (): number =>
    Math.min(deadlineOf(ctx, txn, sentAt), Math.max(deadline, book.revokeHoldBy()));
  book.commitSent.add(txn);
  try {
    await retrying(ctx, (t) => ctx.producer.commit(t), resumeBy);
  } catch (err) {
    if (err instanceof TxnCallError && err.failure.kind === 'retriable') {
      host.observer().commit(kind, tpos, Date.now() - sentAt, err);
      fatal(
        ctx,
        err,
        'commitTransaction kept timing out until the transaction deadline (or as long as the revoke could hold its partitions); librdkafka goes on with it and refuses an abort meanwhile, so its outcome is unknown here: the broker commits or aborts it by itself, and a restart under the same transactional.id settles it',
      );
      return failed(err.message, txn);
    }
    return commitFailed(ctx, kind, txn, tpos, sentAt, err, deadline);
  }
  const durationMs = Date.now() - sentAt;
  host.observer().commit(kind, tpos, durationMs);
  book.duration.observe(durationMs);
  book.lastCommitAt = Date.now();
  for (const { control, offset } of offsets) control.confirmCommitted(offset);
  if (ctx.faults.size > 0) for (const input of txn.inputs) ctx.faults.clear(input);
  book.counts.committed += 1;
  book.counts.messages += txn.messages;
  book.counts.records += txn.records;
  logger.debug(
    { kind, offsets: tpos, messages: txn.messages, records: txn.records, durationMs },
    'transaction committed',
  );
  await beginNext(ctx);
  return {
    committed: new Set(offsets.map((o) => o.control)),
    failure: undefined,
    lost: false,
    messages: txn.messages,
    records: txn.records,
  };
}

/**
 * sendOffsetsToTransaction with the consumer's group metadata, tracked until it answers (the
 * close disconnects the consumer only then); refused once the consumer is being disconnected.
 */
function sendOffsets(
  ctx: TransactionContext,
  tpos: TopicPartitionOffset[],
  timeoutMs: number,
): Promise<void> {
  const { book } = ctx;
  const consumer = ctx.host.consumer();
  if (consumer === undefined) return Promise.reject(CONSUMER_GONE);
  const call = ctx.producer.sendOffsets(tpos, consumer, timeoutMs);
  const settled = call.then(
    () => undefined,
    () => undefined,
  );
  book.offsetsInFlight = settled;
  void settled.then(() => {
    if (book.offsetsInFlight === settled) book.offsetsInFlight = undefined;
  });
  return call;
}

/**
 * A commit call failed for good: a failure librdkafka lets the transaction recover from aborts
 * it (its records are never visible, its inputs are redone); any other stops the consumer.
 */
async function commitFailed(
  ctx: TransactionContext,
  kind: CommitKind,
  txn: TransactionWork,
  tpos: TopicPartitionOffset[],
  sentAt: number,
  err: unknown,
  deadline: number,
): Promise<CommitOutcome> {
  ctx.host.observer().commit(kind, tpos, Date.now() - sentAt, err);
  const failure = err instanceof TxnCallError ? err.failure : undefined;
  const reason = err instanceof Error ? err.message : String(err);
  // A fatal error (not a fencing) before any commitTransaction of the transaction: the broker
  // cannot commit it, so abort() (which librdkafka refuses with the same fatal error) recreates
  // the producer and rewinds. Once a commitTransaction was called, its EndTxn may have reached
  // the coordinator: stop.
  const recoverable = failure?.kind === 'fatal' && mayRecreate(ctx, txn);
  if (
    failure === undefined ||
    failure.kind === 'fenced' ||
    (failure.kind === 'fatal' && !recoverable)
  ) {
    fatal(ctx, err, 'the transaction could not be committed');
    return failed(reason, txn);
  }
  ctx.logger.warn(
    { err, kind, offsets: tpos, messages: txn.messages, records: txn.records },
    'transaction commit failed: aborting it (its records are never visible; its inputs are redone)',
  );
  ctx.book.state = { kind: 'open' }; // abort() takes it from here
  // After a fatal error the records' delivery reports carry it: they blame no input.
  await abort(ctx, txn, reason, deadline, !recoverable);
  return failed(reason, txn, OWNERSHIP_LOST_CODES.has(failure.error.kafkaCode));
}
