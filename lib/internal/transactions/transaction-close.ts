/**
 * The close of the transactional unit, once the consumer closed: the operation in flight ends
 * first, then the open transaction is aborted if anything is in it (even part of one message's
 * records: read_committed readers of its outputs would wait for it until `transaction.timeout.ms`)
 * and the producer closed. A transaction whose offset send the close deadline stopped waiting for
 * (CLOSE_DUE) is aborted once that call returned, after close() itself returned; the consumer is
 * disconnected only once no offset send holds it ({@link clientIdle}).
 */
import { abort } from './transaction-abort';
import { CLOSE_DUE } from './transaction-commit';
import type { TransactionBook, TransactionContext } from './transaction-context';

/** The one close of the unit (every close() waits for it). */
export async function closeOnce(ctx: TransactionContext): Promise<void> {
  const { book } = ctx;
  while (book.op !== undefined) await book.op;
  ctx.writer.stop();
  if (book.state.kind === 'open' && ctx.writer.work.touched.size > 0) {
    const txn = ctx.writer.take();
    const abortBy = Math.min(
      Date.now() + ctx.settings.commitTimeoutMs,
      Math.max(ctx.closeDeadline.by, Date.now() + 1000),
    );
    await abort(ctx, txn, 'the consumer closed', abortBy);
  }
  if (book.state.kind !== 'closed') {
    book.state = { kind: 'closed' };
    const closeProducer = (): Promise<void> =>
      ctx.producer.close(Math.max(1000, Math.min(10_000, ctx.closeDeadline.by - Date.now())));
    // The transaction a close stopped waiting for (see CLOSE_DUE) is aborted once its offset
    // send returned (an abort meanwhile conflicts with it): read_committed readers of its outputs
    // need not wait for transaction.timeout.ms. The producer closes after that.
    const settle = async (): Promise<void> => {
      const txn = book.abandoned;
      book.abandoned = undefined;
      if (txn !== undefined && txn.touched.size > 0) {
        book.state = { kind: 'open' }; // abort() takes it from here
        await abort(ctx, txn, CLOSE_DUE.message, Date.now() + ctx.settings.commitTimeoutMs);
        book.state = { kind: 'closed' };
      }
      await closeProducer();
    };
    if (book.offsetsInFlight !== undefined) {
      // It uses the producer (and the consumer): after this close returned.
      void clientIdle(book)
        .then(settle)
        .catch(() => undefined);
      return;
    }
    await settle();
  }
}

/** Resolves once no sendOffsetsToTransaction holds the consumer. */
export async function clientIdle(book: TransactionBook): Promise<void> {
  while (book.offsetsInFlight !== undefined) await book.offsetsInFlight;
}
