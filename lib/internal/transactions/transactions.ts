/**
 * The transactional unit of `processTransactional()`: one transactional producer per consumer, and
 * the consumer's offsets committed through it (KIP-98 transactions, KIP-447 group metadata) in
 * place of the committer's offset commits.
 *
 * - A finished message's records are handed to the producer in the open transaction strictly in
 *   offset order per partition (a message finished out of order waits for the ones below it); only
 *   then is it acked in its partition's ledger. So the offset a transaction carries never passes a
 *   message whose records are not in that transaction or an earlier one.
 * - A message's records and its offset are always in one transaction (transaction-writer.ts): one
 *   the producer took only part of (QUEUE_FULL) is finished before anything else starts, and a
 *   commit waits for it (within half of its deadline) or aborts the transaction.
 * - One transaction at a time: while one commits (or aborts), finished messages wait for the next.
 *   A transaction holds at most `maxMessages` messages and stays open at most `maxMs`.
 * - Commit = sendOffsetsToTransaction (the contiguous offsets of every partition it touched, with
 *   the consumer's group metadata) → commitTransaction, retried while librdkafka calls the error
 *   retriable; only a commit the broker confirmed moves a partition's `lastCommitted`. node-rdkafka
 *   reads the group metadata when its worker runs, so a stream that lost its partition while the
 *   offsets were being sent aborts the transaction instead of committing it.
 * - Every call of a transaction ends before its own deadline (`transaction.timeout.ms` after its
 *   first record), a revoke's final commit included whatever its drain deadline: the broker never
 *   aborts a transaction the library still commits. One that cannot be committed by then is
 *   aborted, and its inputs redone.
 * - A commitTransaction that timed out goes on in librdkafka's background, which refuses an abort
 *   meanwhile: it is called again (resumed) until the transaction's own deadline, never aborted;
 *   still unresolved then, the consumer stops with a TransactionError (the broker commits or
 *   aborts it by itself).
 * - An abortable failure, or a partition lost while its work is in the open transaction, aborts
 *   it: every partition that had work in it is poisoned (its later results are dropped, never let
 *   into a later transaction) and sought back to the first offset of that work, so it is redone.
 * - A record refused by the broker (its delivery report) or by produce() makes its input a
 *   suspect, redone in a transaction of its own; refused again for the same cause there, it is
 *   poison and `onFailure` applies: `stop` (a TransactionError naming the input and the output
 *   topic) or `skip` (it counts with no output, a `message-skipped` event says so). See
 *   input-faults.ts.
 * - An abort gets at least `commitTimeoutMs` (the failed commit may have used up its own deadline)
 *   and is resumed while it times out, up to the transaction's deadline. One librdkafka refuses
 *   fatally (INVALID_TXN_STATE: the coordinator never registered the transaction) for a transaction
 *   no commitTransaction was called for recreates the producer with the same transactional.id
 *   (initTransactions fences the old epoch, the broker aborts what it registered), then rewinds as
 *   after an abort.
 * - A fenced producer (another instance took the transactional.id) or any fatal error stops the
 *   consumer with a ProducerFencedError / TransactionError; the broker aborts what was open.
 *
 * This file is the unit as the engine, the committer and the revoke protocol see it (the
 * {@link OffsetCommits} it implements, the message path's `settle()`, start and close); its parts
 * are functions of one shared context (transaction-context.ts): the commit (transaction-commit.ts),
 * when to commit (periodic-commit.ts), a revoke's final commit and lost partitions
 * (revoke-commit.ts), the abort (transaction-abort.ts), refused records' inputs
 * (refused-inputs.ts), the bounded calls (transaction-calls.ts) and the close
 * (transaction-close.ts).
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { TransactionMetrics } from '../../metrics';
import type { OutputRecord, ResolvedTransactionalOptions } from '../../transactional-options';
import type { KafkaMessage, PartitionCommitResult } from '../../types';
import { toKafkaError } from '../binding/rdkafka';
import type { OffsetCommits } from '../commit/committer';
import { NATIVE_CALL_MS } from '../loop/timers';
import type { PartitionControl } from '../partition/partition-control';
import { CloseDeadline } from './close-deadline';
import { InputFaults } from './input-faults';
import { commitInBackground, maybeCommit } from './periodic-commit';
import { inputFailed, skipsPoison } from './refused-inputs';
import { commitFinal, lost } from './revoke-commit';
import { abortInBackground } from './transaction-abort';
import { fatal, track } from './transaction-calls';
import { clientIdle, closeOnce } from './transaction-close';
import { TransactionBook } from './transaction-context';
import type { FinalTransaction, TransactionContext, TransactionsHost } from './transaction-context';
import { DeliveryTag, TransactionWriter, inputName } from './transaction-writer';
import type { Finished } from './transaction-writer';
import { TxnCallError } from './transactional-producer';
import type { TransactionalProducer } from './transactional-producer';

export type { FinalTransaction, TransactionsHost } from './transaction-context';

/** Counters of the unit, for metrics() and Prometheus. */
export type TransactionStats = TransactionMetrics;

/** A close() began while the producer was starting: it stops there, quietly. */
const CLOSED_WHILE_STARTING = new Error(
  'the consumer closed while the transactional producer was starting',
);

export class Transactions implements OffsetCommits {
  /** The unit's state and counters (transaction-context.ts). */
  private readonly book = new TransactionBook();
  /** Inputs whose output records were refused (suspects and poison). */
  private readonly faults = new InputFaults();
  /** A close's deadline (`Infinity` while no close began); see CLOSE_DUE in transaction-commit.ts. */
  private readonly closeDeadline = new CloseDeadline();
  /** What every part of the unit takes. */
  private readonly ctx: TransactionContext;

  constructor(
    private readonly producer: TransactionalProducer,
    options: ResolvedTransactionalOptions,
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    host: TransactionsHost,
  ) {
    const writer = new TransactionWriter(producer, options.maxMessages, logger, {
      accepting: () => this.book.state.kind === 'open' && this.book.op === undefined,
      dead: (c) => this.book.dead(c),
      sealed: (c) => this.book.sealed.has(c),
      abort: (reason) => abortInBackground(this.ctx, reason),
      fail: (err) => host.fail(err),
      full: () => commitInBackground(this.ctx),
      suspect: (m) => this.faults.size > 0 && this.faults.suspect(m),
      refused: (f, record, err) => this.refused(f, record, err),
    });
    this.ctx = {
      producer,
      options,
      settings,
      logger,
      host,
      writer,
      faults: this.faults,
      closeDeadline: this.closeDeadline,
      book: this.book,
    };
    producer.onDelivery = (error, opaque) => {
      if (opaque instanceof DeliveryTag) opaque.work.delivered(opaque, error);
    };
  }

  get transactionalId(): string {
    return this.producer.transactionalId;
  }

  /** Connects, initialises the transactional id and opens the first transaction. */
  start(): Promise<void> {
    return track(
      this.ctx,
      (async () => {
        try {
          await this.producer.connect(this.settings.connectTimeoutMs);
          await this.init(Date.now() + this.settings.connectTimeoutMs);
          await this.producer.begin();
          this.book.state = { kind: 'open' };
          this.logger.info('transactional producer ready');
        } catch (err) {
          if (err === CLOSED_WHILE_STARTING) {
            this.logger.info('the consumer closed while the transactional producer was starting');
            return;
          }
          fatal(this.ctx, err, 'the transactional producer could not start');
        }
      })(),
    );
  }

  /**
   * initTransactions, in calls of at most a second (librdkafka resumes one that timed out), until
   * `by` — or until a close() begins, which then need not wait for the coordinator.
   */
  private async init(by: number): Promise<void> {
    for (;;) {
      const timeoutMs = Math.max(1, Math.min(NATIVE_CALL_MS, by - Date.now()));
      try {
        await this.producer.init(timeoutMs);
        return;
      } catch (err) {
        if (this.closeDeadline.by !== Infinity) throw CLOSED_WHILE_STARTING;
        const retriable = err instanceof TxnCallError && err.failure.kind === 'retriable';
        if (!retriable || Date.now() >= by) throw err;
      }
    }
  }

  /** A snapshot for metrics. */
  stats(): TransactionStats {
    return {
      transactionalId: this.transactionalId,
      ...this.book.counts,
      state: this.book.state.kind,
      duration: this.book.duration.snapshot(),
    };
  }

  /** What the last revoke's commit did with the transaction. */
  get lastFinal(): FinalTransaction {
    return this.book.lastFinal;
  }

  // --- the message path --------------------------------------------------------------------------

  /**
   * A message finished (`records` undefined: skipped by the failure policy, no output): its records
   * go into the open transaction once every message before it in its partition did.
   */
  settle(control: PartitionControl, message: KafkaMessage, records: readonly OutputRecord[]): void {
    if (this.book.dead(control)) return; // its result no longer counts: nothing is skipped
    if (skipsPoison(this.ctx, control, message)) {
      this.ctx.writer.settle(control, message, []);
      return;
    }
    this.ctx.writer.settle(control, message, records);
  }

  /** produce() refused one of `f`'s records (too large, invalid…): attributable to `f` alone. */
  private refused(f: Finished, record: OutputRecord, err: unknown): void {
    const failure = {
      input: f.message,
      generation: f.control.generation,
      outputTopic: record.topic,
      error: toKafkaError(err, 'the transactional producer refused a record'),
    };
    if (!inputFailed(this.ctx, failure, true)) return;
    abortInBackground(
      this.ctx,
      `produce refused a record of ${inputName(f.message)}: ${failure.error.message}`,
    );
  }

  // --- OffsetCommits: what the engine and the revoke protocol call -------------------------------

  get periodicInFlight(): boolean {
    return this.book.op !== undefined;
  }

  /** Called after each consume call: commits the open transaction when it is full or old enough. */
  maybeCommit(): void {
    maybeCommit(this.ctx);
  }

  /**
   * The revoke's commit: what is finished goes into the open transaction, which is committed
   * (outputs and offsets together) and confirmed; one result per revoked stream.
   */
  commitFinal(
    controls: PartitionControl[],
    deadline: number,
    holdBy: () => number = () => deadline,
  ): Promise<PartitionCommitResult[]> {
    return commitFinal(this.ctx, controls, deadline, holdBy);
  }

  /** Partitions taken away without a commit: their work must not be committed by anyone here. */
  /** A revoke's onRevoke hook runs: no periodic commit (it would carry the revoked offsets). */
  holdPeriodic(): () => void {
    this.book.periodicHeld += 1;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.book.periodicHeld -= 1;
    };
  }

  /** `consumer.commit()`: the open transaction commits at the next `maybeCommit`. */
  commitSoon(): void {
    this.book.commitRequested = true;
  }

  lost(controls: readonly PartitionControl[]): void {
    lost(this.ctx, controls);
  }

  /** Resolves once no sendOffsetsToTransaction holds the consumer. */
  clientIdle(): Promise<void> {
    return clientIdle(this.book);
  }

  // --- close -------------------------------------------------------------------------------------

  /**
   * After the consumer closed: aborts the open transaction if anything is in it (even part of one
   * message's records: read_committed readers of its output partitions would wait for it until
   * `transaction.timeout.ms`) and closes the producer. Idempotent: every call (the pipeline's
   * teardown, ReactiveConsumer.close()) waits for the same close, so none closes the producer
   * while another one's abort is in flight.
   */
  close(by = Date.now() + this.settings.closeTimeoutMs): Promise<void> {
    this.closingBy(by);
    this.book.closing ??= closeOnce(this.ctx);
    return this.book.closing;
  }

  /**
   * A close() must be done by `by`: a commitTransaction being resumed stops then (its outcome
   * unknown, the broker settles it). The sooner of several deadlines holds.
   */
  closingBy(by: number): void {
    this.closeDeadline.tighten(by);
  }
}
