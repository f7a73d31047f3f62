/**
 * How the transactional unit makes its calls: one operation (start, commit, abort) in flight at a
 * time, each native call bounded (retried while librdkafka calls its error retriable, within its
 * deadline and a close's), the next transaction begun after one ended, and a failure nothing here
 * can heal turned into the typed error that stops the consumer.
 */
import { ProducerFencedError, TransactionError } from '../../errors';
import { Code } from '../binding/rdkafka';
import { NATIVE_CALL_MS } from '../loop/timers';
import { closeBound } from './transaction-context';
import type { TransactionContext } from './transaction-context';
import { TxnCallError } from './transactional-producer';
import type { TxnFailure } from './transactional-producer';

/**
 * Makes `op` the operation in flight (its failure is its own to report); once it ends, the engine
 * is told and the writer resumes.
 */
export function track(ctx: TransactionContext, op: Promise<unknown>): Promise<void> {
  const p = op.then(
    () => undefined,
    () => undefined,
  );
  const tracked = p.finally(() => {
    if (ctx.book.op === tracked) ctx.book.op = undefined;
    ctx.host.changed();
    ctx.writer.pump();
  });
  ctx.book.op = tracked;
  return tracked;
}

const TIMED_OUT = Code.TIMED_OUT;

/**
 * Calls `fn` again while librdkafka says its error is retriable and the deadline allows: `by`,
 * bounded by a close's deadline, but never before `floor` (the abort's: one that did not happen
 * blocks read_committed readers of its outputs until transaction.timeout.ms).
 */
export async function retrying(
  ctx: TransactionContext,
  fn: (timeoutMs: number) => Promise<void>,
  by: number | (() => number),
  floor = -Infinity,
  resumable = true,
): Promise<void> {
  const deadline = (): number =>
    Math.max(closeBound(ctx, typeof by === 'number' ? by : by()), floor);
  let last: unknown;
  for (let attempt = 1; ; attempt++) {
    // Checked again before every new attempt: a pause may have overslept (a loaded machine), or a
    // close or revoke may have brought the deadline forward meanwhile.
    if (attempt > 1 && Date.now() + 100 >= deadline()) throw last;
    // A resumable call (commit, abort: librdkafka goes on in the background and the next call
    // resumes it) in calls of at most NATIVE_CALL_MS, so that a close waits at most that for it.
    const timeoutMs = Math.max(
      1,
      Math.min(
        ctx.settings.commitTimeoutMs,
        resumable ? NATIVE_CALL_MS : Infinity,
        deadline() - Date.now(),
      ),
    );
    const calledAt = Date.now();
    try {
      await fn(timeoutMs);
      return;
    } catch (err) {
      last = err;
      const failure: TxnFailure | undefined = err instanceof TxnCallError ? err.failure : undefined;
      if (failure?.kind !== 'retriable' || Date.now() + 100 >= deadline()) throw err;
      // A call that waited its whole time — librdkafka's "timed out" after (nearly) all of it: the
      // clock may say it returned a few ms early — is made again at once (librdkafka resumes what
      // it can). A "timed out" that came back early takes the pause below: made again at once, it
      // could spin without ever yielding to the event loop.
      const waitedMs = Date.now() - calledAt;
      const nearlyAll = timeoutMs - Math.max(25, timeoutMs / 10);
      if (
        waitedMs >= timeoutMs ||
        (failure.error.kafkaCode === TIMED_OUT && waitedMs >= nearlyAll)
      ) {
        ctx.logger.debug({ err, attempt }, 'transactional call timed out; calling it again');
        continue;
      }
      // Any other retriable failure after a pause, which must leave room for the call: a call
      // made after the deadline would reach a broker that aborted the transaction meanwhile.
      const pauseMs = Math.min(100 * attempt, 1000);
      if (Date.now() + pauseMs + 100 >= deadline()) throw err;
      ctx.logger.warn({ err, attempt }, 'transactional call failed (retriable); retrying');
      await new Promise((r) => setTimeout(r, pauseMs));
    }
  }
}

/** Begins the next transaction after one ended (committed or aborted). */
export async function beginNext(ctx: TransactionContext): Promise<void> {
  try {
    await ctx.producer.begin();
    ctx.book.state = { kind: 'open' };
  } catch (err) {
    fatal(ctx, err, 'could not begin the next transaction');
  }
}

/** A failure nothing here can heal: stop the consumer with a typed error. */
export function fatal(ctx: TransactionContext, err: unknown, what: string): void {
  const transactionalId = ctx.producer.transactionalId;
  const failure = err instanceof TxnCallError ? err.failure : undefined;
  const message = `${what}: ${err instanceof Error ? err.message : String(err)}`;
  const error =
    err instanceof TransactionError
      ? err
      : failure?.kind === 'fenced'
        ? new ProducerFencedError(
            `${message} (transactional.id ${transactionalId} was taken over by another producer, or its epoch was bumped): stopping; the broker aborts the open transaction and the next owners redo its work`,
            transactionalId,
            failure.error.kafkaCode,
            { cause: err },
          )
        : err instanceof Error &&
            'code' in err &&
            (err as { code: unknown }).code === 'ERR_RKC_CONNECT'
          ? err
          : new TransactionError(message, transactionalId, failure?.error.kafkaCode, {
              cause: err,
            });
  if (ctx.book.state.kind !== 'failed') {
    ctx.book.state = { kind: 'failed', error };
    ctx.logger.error({ err: error, transactionalId }, 'transactional producer failed: stopping');
  }
  ctx.host.fail(error);
}
