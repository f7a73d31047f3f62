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
 */
import type { Logger } from 'pino';
import type { ConsumerSettings } from '../../config';
import type { ConsumerEvent } from '../../types';
import { NotAssignedError, ProducerFencedError, TransactionError } from '../../errors';
import type { OutputRecord, ResolvedTransactionalOptions } from '../../transactional-options';
import type {
  KafkaMessage,
  PartitionCommitResult,
  RevokeTransaction,
  TopicPartition,
} from '../../types';
import type { OffsetCommits } from '../commit/committer';
import type { EngineObserver } from '../observe/engine-observer';
import { Histogram, LATENCY_BUCKETS_SECONDS } from '../observe/histogram';
import type { TransactionMetrics } from '../../metrics';
import type { PartitionControl } from '../partition/partition-control';
import { OWNERSHIP_LOST_CODES } from '../binding/rdkafka';
import type { TopicPartitionOffset } from '../binding/rdkafka';
import { InputFaults } from './input-faults';
import type { RecordFailure } from './input-faults';
import { DeliveryTag, TransactionWriter, inputName } from './transaction-writer';
import type { Finished, TransactionWork } from './transaction-writer';
import { toKafkaError } from '../binding/rdkafka';
import { TxnCallError } from './transactional-producer';
import type { TransactionalProducer, TxnFailure } from './transactional-producer';
import { NATIVE_CALL_MS } from '../loop/timers';
import { CloseDeadline } from './close-deadline';

/** What the unit needs from the engine. */
export interface TransactionsHost {
  /** The streams owned now (including ones being revoked). */
  owned(): Iterable<PartitionControl>;
  /** Whether the stream still owns its partition. */
  owns(control: PartitionControl): boolean;
  /**
   * The raw node-rdkafka consumer (its group metadata goes into each transaction); undefined once
   * the close disconnects it.
   */
  consumer(): unknown;
  /** Moves a partition back (see seeks.ts): its stream is replaced, its handlers aborted. */
  seek(tp: TopicPartition, offset: number): Promise<number>;
  /** Ends the consumer with an error. */
  fail(err: Error): void;
  changed(): void;
  observer(): EngineObserver;
  /** Publishes an event on `events$` (an input skipped for its refused output). */
  publish(event: ConsumerEvent): void;
}

/** Counters of the unit, for metrics() and Prometheus. */
export type TransactionStats = TransactionMetrics;

/** The transaction of the last commit a revoke asked for (for the `committed` event). */
export type FinalTransaction = RevokeTransaction;

type State =
  | { readonly kind: 'starting' }
  | { readonly kind: 'open' }
  | { readonly kind: 'committing' }
  | { readonly kind: 'aborting' }
  | { readonly kind: 'failed'; readonly error: Error }
  | { readonly kind: 'closed' };

interface CommitOutcome {
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
/** A close() began while the producer was starting: it stops there, quietly. */
const CLOSED_WHILE_STARTING = new Error(
  'the consumer closed while the transactional producer was starting',
);
/**
 * The close deadline came while a sendOffsetsToTransaction was still in flight (librdkafka ends it
 * only when its request is answered or times out): close() stops waiting for it; the transaction
 * is aborted, and the consumer and the producer disconnected, once that call returned.
 */
const CLOSE_DUE = new Error(
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

export class Transactions implements OffsetCommits {
  private state: State = { kind: 'starting' };
  /** Finished messages on their way into the open transaction. */
  private readonly writer: TransactionWriter;
  /** Streams whose work was aborted: their later results never count. */
  private readonly poisoned = new WeakSet<PartitionControl>();
  /** Transactions a commitTransaction was called for (its EndTxn may have reached the broker). */
  private readonly commitSent = new WeakSet<TransactionWork>();
  /** Streams whose revoke's final commit has begun: nothing more of them is written. */
  private readonly sealed = new WeakSet<PartitionControl>();
  /** The start, a commit or an abort in flight (one at a time). */
  private op: Promise<void> | undefined;
  private lastCommitAt = Date.now();
  private lastFinal_: FinalTransaction = { outcome: 'none', messages: 0, records: 0 };
  private readonly counts = {
    committed: 0,
    aborted: 0,
    messages: 0,
    records: 0,
    abortedMessages: 0,
    abortedRecords: 0,
    refusedRecords: 0,
    skippedInputs: 0,
    recreatedProducers: 0,
  };
  /** Inputs whose output records were refused (suspects and poison). */
  private readonly faults = new InputFaults();
  private readonly duration = new Histogram(LATENCY_BUCKETS_SECONDS);

  private closing: Promise<void> | undefined;
  /** When a close() must be done by (Infinity until one begins): no commit is resumed past it. */
  /** A close's deadline (`Infinity` while no close began); see CLOSE_DUE. */
  private readonly closeDeadline = new CloseDeadline();
  /** The transaction whose offset send a close stopped waiting for: aborted once it returns. */
  private abandoned: TransactionWork | undefined;
  /** A sendOffsetsToTransaction in flight (its worker reads the consumer). */
  private offsetsInFlight: Promise<void> | undefined;
  /** While a revoke waits for a commit: until when it holds its partitions for one timed out. */
  private readonly revokeHolds = new Set<() => number>();

  constructor(
    private readonly producer: TransactionalProducer,
    private readonly options: ResolvedTransactionalOptions,
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    private readonly host: TransactionsHost,
  ) {
    this.writer = new TransactionWriter(producer, options.maxMessages, logger, {
      accepting: () => this.state.kind === 'open' && this.op === undefined,
      dead: (c) => this.dead(c),
      sealed: (c) => this.sealed.has(c),
      abort: (reason) => this.abortInBackground(reason),
      fail: (err) => this.host.fail(err),
      full: () => this.commitInBackground(),
      suspect: (m) => this.faults.size > 0 && this.faults.suspect(m),
      refused: (f, record, err) => this.refused(f, record, err),
    });
    producer.onDelivery = (error, opaque) => {
      if (opaque instanceof DeliveryTag) opaque.work.delivered(opaque, error);
    };
  }

  /** The work of the open transaction. */
  private get txn(): TransactionWork {
    return this.writer.work;
  }

  get transactionalId(): string {
    return this.producer.transactionalId;
  }

  /** Connects, initialises the transactional id and opens the first transaction. */
  start(): Promise<void> {
    return this.track(
      (async () => {
        try {
          await this.producer.connect(this.settings.connectTimeoutMs);
          await this.init(Date.now() + this.settings.connectTimeoutMs);
          await this.producer.begin();
          this.state = { kind: 'open' };
          this.logger.info('transactional producer ready');
        } catch (err) {
          if (err === CLOSED_WHILE_STARTING) {
            this.logger.info('the consumer closed while the transactional producer was starting');
            return;
          }
          this.fatal(err, 'the transactional producer could not start');
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
        if (this.closeBy !== Infinity) throw CLOSED_WHILE_STARTING;
        const retriable = err instanceof TxnCallError && err.failure.kind === 'retriable';
        if (!retriable || Date.now() >= by) throw err;
      }
    }
  }

  /** A snapshot for metrics. */
  stats(): TransactionStats {
    return {
      transactionalId: this.transactionalId,
      ...this.counts,
      state: this.state.kind,
      duration: this.duration.snapshot(),
    };
  }

  /** What the last revoke's commit did with the transaction. */
  get lastFinal(): FinalTransaction {
    return this.lastFinal_;
  }

  // --- the message path --------------------------------------------------------------------------

  /**
   * A message finished (`records` undefined: skipped by the failure policy, no output): its records
   * go into the open transaction once every message before it in its partition did.
   */
  settle(control: PartitionControl, message: KafkaMessage, records: readonly OutputRecord[]): void {
    const skip = this.faults.size > 0 ? this.faults.takeSkip(message) : undefined;
    if (skip !== undefined) {
      this.counts.skippedInputs += 1;
      this.logger.error(
        { err: skip.error, input: inputName(message), outputTopic: skip.outputTopic },
        'an output record of this input is refused again and again: the input is skipped (onFailure: skip), it counts with no output',
      );
      this.host.publish({
        type: 'message-skipped',
        topic: message.topic,
        partition: message.partition,
        offset: message.offset,
        attempts: skip.failures,
        error: skip.error,
        at: Date.now(),
      });
      this.writer.settle(control, message, []);
      return;
    }
    this.writer.settle(control, message, records);
  }

  /**
   * A record failed `attempt`'s transaction (`attributable`: nothing else could have caused it):
   * false when the input is poison and the policy stops the consumer.
   */
  private inputFailed(f: RecordFailure, attributable: boolean): boolean {
    this.counts.refusedRecords += 1;
    const verdict = this.faults.fail(f, attributable);
    const input = inputName(f.input);
    const why = `${f.error.message} (code ${f.error.kafkaCode})`;
    if (verdict.kind === 'suspect') {
      this.logger.warn(
        { err: f.error, input, outputTopic: f.outputTopic, attributable },
        'an output record of this input was refused: its transaction is aborted, the input is redone in a transaction of its own',
      );
      return true;
    }
    if (this.options.process.onFailure === 'skip') {
      this.faults.skip(f.input);
      return true;
    }
    this.fatal(
      new TransactionError(
        `An output record of input ${input} for topic ${f.outputTopic} is refused again after an abort and a redo (${why}): stopping (onFailure: 'stop'); nothing of this input or after it in its partition was committed`,
        this.transactionalId,
        f.error.kafkaCode,
        {
          cause: f.error,
          input: { topic: f.input.topic, partition: f.input.partition, offset: f.input.offset },
          outputTopic: f.outputTopic,
        },
      ),
      'poison output',
    );
    return false;
  }

  /** produce() refused one of `f`'s records (too large, invalid…): attributable to `f` alone. */
  private refused(f: Finished, record: OutputRecord, err: unknown): void {
    const failure = {
      input: f.message,
      outputTopic: record.topic,
      error: toKafkaError(err, 'the transactional producer refused a record'),
    };
    if (!this.inputFailed(failure, true)) return;
    this.abortInBackground(
      `produce refused a record of ${inputName(f.message)}: ${failure.error.message}`,
    );
  }

  private dead(control: PartitionControl): boolean {
    return control.state === 'fenced' || control.state === 'released' || this.poisoned.has(control);
  }

  // --- OffsetCommits: what the engine and the revoke protocol call -------------------------------

  get periodicInFlight(): boolean {
    return this.op !== undefined;
  }

  /** Called after each consume call: commits the open transaction when it is full or old enough. */
  maybeCommit(): void {
    // A message partly written goes on first (its records and its offset commit together).
    if (this.op !== undefined || this.state.kind !== 'open' || this.txn.partial !== undefined) {
      return;
    }
    const { openedAt, messages } = this.txn;
    const now = Date.now();
    if (openedAt !== undefined) {
      if (
        this.txn.solo ||
        messages >= this.options.maxMessages ||
        now - openedAt >= this.options.maxMs
      ) {
        this.commitInBackground();
      }
      return;
    }
    // Nothing processed: offsets may still have moved (a new partition's start, markers skipped).
    if (now - this.lastCommitAt >= this.options.maxMs && this.offsetsToCommit().length > 0) {
      this.commitInBackground();
    }
  }

  /**
   * The revoke's commit: what is finished goes into the open transaction, which is committed
   * (outputs and offsets together) and confirmed; one result per revoked stream.
   */
  async commitFinal(
    controls: PartitionControl[],
    deadline: number,
    holdBy: () => number = () => deadline,
  ): Promise<PartitionCommitResult[]> {
    // What is finished goes into this transaction; from then on nothing more of these streams is
    // written (a later transaction would carry their records without their offsets).
    this.writer.pump();
    for (const c of controls) this.sealed.add(c);
    this.revokeHolds.add(holdBy);
    const outcome = await this.commit('revoke', deadline).finally(() => {
      this.revokeHolds.delete(holdBy);
    });
    const size = { messages: outcome.messages, records: outcome.records };
    this.lastFinal_ =
      outcome.failure !== undefined
        ? {
            outcome: this.state.kind === 'failed' ? 'failed' : 'aborted',
            ...size,
            reason: outcome.failure,
          }
        : outcome.committed.size > 0
          ? { outcome: 'committed', ...size }
          : { outcome: 'none', messages: 0, records: 0 };
    return controls.map((c): PartitionCommitResult => {
      const base = { topic: c.topic, partition: c.partition };
      if (this.poisoned.has(c)) {
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
  lost(controls: readonly PartitionControl[]): void {
    const hit = controls.filter((c) => this.txn.touched.has(c));
    for (const c of controls) {
      this.poisoned.add(c);
      this.writer.drop(c);
    }
    if (hit.length > 0 && this.state.kind === 'open') {
      this.abortInBackground('a partition with work in the open transaction was lost');
    }
  }

  // --- commit and abort ---------------------------------------------------------------------------

  /** The offsets the next commit carries: every touched stream, and owned ones whose offset moved. */
  private offsetsToCommit(): { control: PartitionControl; offset: number }[] {
    const byKey = new Map<string, { control: PartitionControl; offset: number }>();
    const consider = (control: PartitionControl): void => {
      if (this.poisoned.has(control)) return;
      const offset = control.ledger.committable();
      if (offset === undefined || offset === control.lastCommitted) return;
      const seen = byKey.get(control.key);
      // A stream a seek replaced and its replacement: the current owner's offset wins.
      if (seen !== undefined && this.host.owns(seen.control)) return;
      byKey.set(control.key, { control, offset });
    };
    for (const c of this.txn.touched.keys()) consider(c);
    for (const c of this.host.owned()) {
      if (c.active && !this.txn.touched.has(c)) consider(c);
    }
    return [...byKey.values()];
  }

  private commitInBackground(): void {
    if (this.op !== undefined) return;
    void this.commit('periodic', Date.now() + this.settings.commitTimeoutMs * 2);
  }

  private abortInBackground(reason: string): void {
    if (this.state.kind !== 'open') return;
    if (this.op !== undefined) {
      // A commit holds the open transaction (it waits for its partly-written message): that
      // commit aborts it instead.
      this.txn.doomed ??= reason;
      return;
    }
    const txn = this.writer.take();
    this.track(this.abort(txn, reason, Date.now() + this.settings.commitTimeoutMs));
  }

  private track(op: Promise<unknown>): Promise<void> {
    const p = op.then(
      () => undefined,
      () => undefined,
    );
    const tracked = p.finally(() => {
      if (this.op === tracked) this.op = undefined;
      this.host.changed();
      this.writer.pump();
    });
    this.op = tracked;
    return tracked;
  }

  /** Commits the open transaction (one at a time): offsets, then the commit, both confirmed. */
  private async commit(kind: 'periodic' | 'revoke', deadline: number): Promise<CommitOutcome> {
    while (this.op !== undefined) await this.op;
    if (this.state.kind === 'failed') return failed(this.state.error.message, this.txn);
    if (this.state.kind !== 'open') {
      return failed(`the transactional producer is ${this.state.kind}`, this.txn);
    }
    let outcome = NOTHING;
    await this.track(
      this.commitOpen(kind, deadline).then((o) => {
        outcome = o;
      }),
    );
    return outcome;
  }

  /** The commit of the open transaction, as the operation in flight. */
  private async commitOpen(kind: 'periodic' | 'revoke', by: number): Promise<CommitOutcome> {
    const txn = this.txn;
    // Nothing of a transaction is committed past its own deadline (the broker aborts it then), a
    // revoke's final commit included: one that cannot finish by then aborts it instead.
    const txnDeadline = this.deadlineOf(txn);
    const deadline = Math.min(by, txnDeadline);
    // The partly-written message may take half of what is left; the commit needs the rest.
    const unfinished =
      txn.partial !== undefined
        ? await this.writer.finishPartial(Date.now() + (this.closeBound(deadline) - Date.now()) / 2)
        : txn.doomed;
    // A stream with work in it was lost or replaced while another commit or abort was in flight
    // (lost() could not abort then): its records must not be committed with any offset.
    const lostWork = [...txn.touched.keys()].some((c) => this.poisoned.has(c));
    const reason =
      unfinished ??
      (lostWork
        ? 'a partition with work in the open transaction was lost or replaced'
        : Date.now() >= txnDeadline
          ? EXPIRED
          : undefined);
    if (reason !== undefined) {
      this.writer.take();
      await this.abort(txn, reason, deadline);
      return failed(reason, txn);
    }
    const offsets = this.offsetsToCommit();
    if (offsets.length === 0 && txn.touched.size === 0) return NOTHING;
    this.writer.take();
    this.state = { kind: 'committing' };
    const sentAt = Date.now();
    const tpos = offsets.map(({ control, offset }) => ({
      topic: control.topic,
      partition: control.partition,
      offset,
    }));
    const streams = [...new Set([...offsets.map((o) => o.control), ...txn.touched.keys()])];
    const live = (c: PartitionControl): boolean => this.host.owns(c) && !this.dead(c);
    const sentLive = new Set(streams.filter(live));
    try {
      if (tpos.length > 0) {
        // Not in short calls: librdkafka's send_offsets_to_transaction is not resumable, it waits
        // for its AddOffsetsToTxn answer whatever the call's timeout and fails as timed out when
        // the answer comes after it, so calls shorter than the coordinator's answers never succeed.
        // A close does not wait for it past its deadline (see CLOSE_DUE).
        await this.closeDeadline.race(
          this.retrying((t) => this.sendOffsets(tpos, t), deadline, -Infinity, false),
          CLOSE_DUE,
        );
      }
    } catch (err) {
      if (err === CLOSE_DUE) {
        this.host.observer().commit(kind, tpos, Date.now() - sentAt, CLOSE_DUE);
        this.logger.warn({ kind, offsets: tpos }, CLOSE_DUE.message);
        this.state = { kind: 'failed', error: CLOSE_DUE };
        this.abandoned = txn;
        return failed(CLOSE_DUE.message, txn);
      }
      if (err === CONSUMER_GONE) {
        this.state = { kind: 'open' }; // abort() takes it from here
        await this.abort(txn, CONSUMER_GONE.message, deadline);
        return failed(CONSUMER_GONE.message, txn);
      }
      return this.commitFailed(kind, txn, tpos, sentAt, err, deadline);
    }
    // node-rdkafka reads the consumer's group metadata when its worker runs, not at the call: after
    // a rebalance in between, a stream's offset may have gone under the new generation.
    const superseded = streams.filter((c) => this.poisoned.has(c) || (sentLive.has(c) && !live(c)));
    if (superseded.length === 0 && Date.now() >= txnDeadline) {
      // The commit would reach the broker after it aborted the transaction: abort it here.
      this.host.observer().commit(kind, tpos, Date.now() - sentAt, new Error(EXPIRED));
      this.state = { kind: 'open' }; // abort() takes it from here
      await this.abort(txn, EXPIRED, deadline);
      return failed(EXPIRED, txn);
    }
    if (superseded.length > 0) {
      const names = superseded.map((c) => `${c.topic}[${c.partition}]`).join(', ');
      const why = `${names} lost its partition while the transaction's offsets were being sent`;
      this.host.observer().commit(kind, tpos, Date.now() - sentAt, new Error(why));
      this.logger.warn(
        { kind, offsets: tpos, partitions: names },
        'a partition was lost while the transaction offsets were being sent (they may have gone under the new generation): aborting the transaction (its records are never visible; its inputs are redone)',
      );
      this.state = { kind: 'open' }; // abort() takes it from here
      await this.abort(txn, why, deadline);
      return failed(why, txn);
    }
    // A commitTransaction that timed out goes on in the background and must be resumed (an abort
    // is refused meanwhile), up to the transaction's own deadline, or less when a revoke waiting
    // for it must release its partitions sooner.
    const resumeBy = (): number =>
      Math.min(this.deadlineOf(txn, sentAt), Math.max(deadline, this.revokeHoldBy()));
    this.commitSent.add(txn);
    try {
      await this.retrying((t) => this.producer.commit(t), resumeBy);
    } catch (err) {
      if (err instanceof TxnCallError && err.failure.kind === 'retriable') {
        this.host.observer().commit(kind, tpos, Date.now() - sentAt, err);
        this.fatal(
          err,
          'commitTransaction kept timing out until the transaction deadline (or as long as the revoke could hold its partitions); librdkafka goes on with it and refuses an abort meanwhile, so its outcome is unknown here: the broker commits or aborts it by itself, and a restart under the same transactional.id settles it',
        );
        return failed(err.message, txn);
      }
      return this.commitFailed(kind, txn, tpos, sentAt, err, deadline);
    }
    const durationMs = Date.now() - sentAt;
    this.host.observer().commit(kind, tpos, durationMs);
    this.duration.observe(durationMs);
    this.lastCommitAt = Date.now();
    for (const { control, offset } of offsets) control.confirmCommitted(offset);
    if (this.faults.size > 0) for (const input of txn.inputs) this.faults.clear(input);
    this.counts.committed += 1;
    this.counts.messages += txn.messages;
    this.counts.records += txn.records;
    this.logger.debug(
      { kind, offsets: tpos, messages: txn.messages, records: txn.records, durationMs },
      'transaction committed',
    );
    await this.beginNext();
    return {
      committed: new Set(offsets.map((o) => o.control)),
      failure: undefined,
      lost: false,
      messages: txn.messages,
      records: txn.records,
    };
  }

  /** The latest any revoke waiting for a commit may hold its partitions until (Infinity: none). */
  private revokeHoldBy(): number {
    if (this.revokeHolds.size === 0) return Infinity;
    return Math.max(...[...this.revokeHolds].map((by) => by()));
  }

  /**
   * sendOffsetsToTransaction with the consumer's group metadata, tracked until it answers (the
   * close disconnects the consumer only then); refused once the consumer is being disconnected.
   */
  private sendOffsets(tpos: TopicPartitionOffset[], timeoutMs: number): Promise<void> {
    const consumer = this.host.consumer();
    if (consumer === undefined) return Promise.reject(CONSUMER_GONE);
    const call = this.producer.sendOffsets(tpos, consumer, timeoutMs);
    const settled = call.then(
      () => undefined,
      () => undefined,
    );
    this.offsetsInFlight = settled;
    void settled.then(() => {
      if (this.offsetsInFlight === settled) this.offsetsInFlight = undefined;
    });
    return call;
  }

  /** Resolves once no sendOffsetsToTransaction holds the consumer. */
  async clientIdle(): Promise<void> {
    while (this.offsetsInFlight !== undefined) await this.offsetsInFlight;
  }

  /**
   * The last moment a call of `txn` may still end: `transaction.timeout.ms` after its first record
   * (or after its offsets were first sent, when it has no record), less a margin for the request
   * on its way. The broker's clock starts later (when the first record's partition is added to the
   * transaction), so the broker never aborts it before this.
   */
  private deadlineOf(txn: TransactionWork, sentAt = Date.now()): number {
    const timeout = this.options.transactionTimeoutMs;
    return (txn.openedAt ?? sentAt) + timeout - Math.min(1000, Math.floor(timeout / 10));
  }

  /**
   * A commit call failed for good: a failure librdkafka lets the transaction recover from aborts
   * it (its records are never visible, its inputs are redone); any other stops the consumer.
   */
  private async commitFailed(
    kind: 'periodic' | 'revoke',
    txn: TransactionWork,
    tpos: TopicPartitionOffset[],
    sentAt: number,
    err: unknown,
    deadline: number,
  ): Promise<CommitOutcome> {
    this.host.observer().commit(kind, tpos, Date.now() - sentAt, err);
    const failure = err instanceof TxnCallError ? err.failure : undefined;
    const reason = err instanceof Error ? err.message : String(err);
    // A fatal error (not a fencing) before any commitTransaction of the transaction: the broker
    // cannot commit it, so abort() (which librdkafka refuses with the same fatal error) recreates
    // the producer and rewinds. Once a commitTransaction was called, its EndTxn may have reached
    // the coordinator: stop.
    const recoverable = failure?.kind === 'fatal' && this.mayRecreate(txn);
    if (
      failure === undefined ||
      failure.kind === 'fenced' ||
      (failure.kind === 'fatal' && !recoverable)
    ) {
      this.fatal(err, 'the transaction could not be committed');
      return failed(reason, txn);
    }
    this.logger.warn(
      { err, kind, offsets: tpos, messages: txn.messages, records: txn.records },
      'transaction commit failed: aborting it (its records are never visible; its inputs are redone)',
    );
    this.state = { kind: 'open' }; // abort() takes it from here
    // After a fatal error the records' delivery reports carry it: they blame no input.
    await this.abort(txn, reason, deadline, !recoverable);
    return failed(reason, txn, OWNERSHIP_LOST_CODES.has(failure.error.kafkaCode));
  }

  /**
   * Aborts `txn`: its streams are poisoned and sought back to the first offset of their work.
   * `blame`: its commit failed, and records the broker refused are pinned on their inputs first.
   */
  private async abort(
    txn: TransactionWork,
    reason: string,
    deadline: number,
    blame = false,
  ): Promise<void> {
    this.state = { kind: 'aborting' };
    for (const c of txn.touched.keys()) {
      this.poisoned.add(c);
      this.writer.drop(c);
    }
    // The abort gets its own budget: the commit that failed has often used up its deadline (its
    // sendOffsetsToTransaction retried, or held by a coordinator that did not answer). One that
    // timed out goes on in librdkafka's background and is resumed by calling it again, as long as
    // the transaction can still end before the broker aborts it by itself; a close bounds it.
    const start = Date.now();
    const until = Math.max(
      deadline,
      start + this.settings.commitTimeoutMs,
      this.deadlineOf(txn, start),
    );
    // A close, or a revoke that must release its partitions, bounds it — to no less than a second:
    // an abort that did not happen leaves the outputs blocked for read_committed readers until
    // transaction.timeout.ms.
    try {
      await this.retrying(
        (t) => this.producer.abort(t),
        () => Math.min(until, this.revokeHoldBy()),
        start + 1000,
      );
    } catch (err) {
      if (this.closeBy !== Infinity && Date.now() >= this.closeBy) {
        this.state = { kind: 'failed', error: err instanceof Error ? err : new Error(String(err)) };
        this.logger.warn(
          { err, reason },
          'the transaction could not be aborted before the close deadline: the broker aborts it at transaction.timeout.ms (read_committed readers of its outputs wait until then); nothing of it is visible',
        );
        return;
      }
      if (!(await this.recreate(txn, err, reason))) {
        this.fatal(err, `the transaction could not be aborted (aborting because ${reason})`);
        return;
      }
    }
    this.counts.aborted += 1;
    this.counts.abortedMessages += txn.messages;
    this.counts.abortedRecords += txn.records;
    this.logger.warn(
      { reason, messages: txn.messages, records: txn.records, partitions: txn.touched.size },
      'transaction aborted: its partitions go back to the first message of its work and redo it',
    );
    if (blame && !(await this.blame(txn))) return;
    for (const [control, first] of txn.touched) {
      if (!this.host.owns(control) || !control.active) continue; // revoked: the next owner redoes it
      this.host
        .seek({ topic: control.topic, partition: control.partition }, first)
        .catch((err: unknown) => {
          if (err instanceof NotAssignedError) return; // revoked meanwhile: the next owner redoes it
          this.host.fail(
            new TransactionError(
              `Could not rewind ${control.topic}[${control.partition}] to ${first} after an aborted transaction: ${String((err as Error).message ?? err)}`,
              this.transactionalId,
              undefined,
              { cause: err },
            ),
          );
        });
    }
    await this.beginNext();
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
  private async recreate(txn: TransactionWork, err: unknown, reason: string): Promise<boolean> {
    const failure = err instanceof TxnCallError ? err.failure : undefined;
    const gaveUp = failure?.kind === 'fatal' || failure?.kind === 'retriable';
    if (!gaveUp || !this.mayRecreate(txn)) return false;
    this.logger.warn(
      { err, reason },
      'the abort failed for good (refused fatally, or timing out until the transaction deadline), and no commit of this transaction was ever sent: recreating the transactional producer with the same transactional.id (its initTransactions fences the old one and the broker aborts what it registered); the transaction counts as aborted, its inputs are redone',
    );
    try {
      await this.producer.recreate(
        Math.min(this.settings.commitTimeoutMs, 5000),
        this.settings.connectTimeoutMs,
        Math.max(this.settings.connectTimeoutMs, this.options.transactionTimeoutMs),
      );
    } catch (e) {
      this.logger.error({ err: e }, 'the transactional producer could not be recreated');
      return false;
    }
    this.counts.recreatedProducers += 1;
    return true;
  }

  /**
   * After the abort of a transaction whose commit failed, every record is delivered or purged: the
   * refused ones name their inputs, which become suspects (redone alone) or poison, before the
   * redo starts. False when a poison input stopped the consumer.
   */
  private async blame(txn: TransactionWork): Promise<boolean> {
    await txn.reportsIn(Date.now() + Math.min(this.settings.commitTimeoutMs, 5000));
    const blamed = new Map<string, RecordFailure>();
    for (const f of txn.failures) blamed.set(inputName(f.input), f);
    const alone = new Set(txn.inputs.map(inputName)).size === 1;
    for (const f of blamed.values()) {
      if (!this.inputFailed(f, alone)) return false;
    }
    return true;
  }

  private async beginNext(): Promise<void> {
    try {
      await this.producer.begin();
      this.state = { kind: 'open' };
    } catch (err) {
      this.fatal(err, 'could not begin the next transaction');
    }
  }

  /** `by`, or the close deadline when that is sooner. */
  private closeBound(by: number): number {
    return Math.min(by, this.closeBy);
  }

  /**
   * The producer may be recreated after `txn` failed for good: no commitTransaction of it was ever
   * called (no EndTxn(commit) of it can have reached the coordinator), and no close began.
   */
  private mayRecreate(txn: TransactionWork): boolean {
    return !this.commitSent.has(txn) && this.closing === undefined && this.closeBy === Infinity;
  }

  /**
   * Calls `fn` again while librdkafka says its error is retriable and the deadline allows: `by`,
   * bounded by a close's deadline, but never before `floor` (the abort's: one that did not happen
   * blocks read_committed readers of its outputs until transaction.timeout.ms).
   */
  private async retrying(
    fn: (timeoutMs: number) => Promise<void>,
    by: number | (() => number),
    floor = -Infinity,
    resumable = true,
  ): Promise<void> {
    const deadline = (): number =>
      Math.max(this.closeBound(typeof by === 'number' ? by : by()), floor);
    for (let attempt = 1; ; attempt++) {
      // A resumable call (commit, abort: librdkafka goes on in the background and the next call
      // resumes it) in calls of at most NATIVE_CALL_MS, so that a close waits at most that for it.
      const timeoutMs = Math.max(
        1,
        Math.min(
          this.settings.commitTimeoutMs,
          resumable ? NATIVE_CALL_MS : Infinity,
          deadline() - Date.now(),
        ),
      );
      const calledAt = Date.now();
      try {
        await fn(timeoutMs);
        return;
      } catch (err) {
        const failure: TxnFailure | undefined =
          err instanceof TxnCallError ? err.failure : undefined;
        if (failure?.kind !== 'retriable' || Date.now() + 100 >= deadline()) throw err;
        if (Date.now() - calledAt >= timeoutMs) {
          // It waited its whole call: made again at once (librdkafka resumes what it can).
          this.logger.debug({ err, attempt }, 'transactional call timed out; calling it again');
        } else {
          this.logger.warn({ err, attempt }, 'transactional call failed (retriable); retrying');
          await new Promise((r) => setTimeout(r, Math.min(100 * attempt, 1000)));
        }
      }
    }
  }

  /** A failure nothing here can heal: stop the consumer with a typed error. */
  private fatal(err: unknown, what: string): void {
    const failure = err instanceof TxnCallError ? err.failure : undefined;
    const message = `${what}: ${err instanceof Error ? err.message : String(err)}`;
    const error =
      err instanceof TransactionError
        ? err
        : failure?.kind === 'fenced'
          ? new ProducerFencedError(
              `${message} (transactional.id ${this.transactionalId} was taken over by another producer, or its epoch was bumped): stopping; the broker aborts the open transaction and the next owners redo its work`,
              this.transactionalId,
              failure.error.kafkaCode,
              { cause: err },
            )
          : err instanceof Error &&
              'code' in err &&
              (err as { code: unknown }).code === 'ERR_RKC_CONNECT'
            ? err
            : new TransactionError(message, this.transactionalId, failure?.error.kafkaCode, {
                cause: err,
              });
    if (this.state.kind !== 'failed') {
      this.state = { kind: 'failed', error };
      this.logger.error(
        { err: error, transactionalId: this.transactionalId },
        'transactional producer failed: stopping',
      );
    }
    this.host.fail(error);
  }

  /**
   * After the consumer closed: aborts the open transaction if anything is in it (even part of one
   * message's records: read_committed readers of its output partitions would wait for it until
   * `transaction.timeout.ms`) and closes the producer. Idempotent: every call (the pipeline's
   * teardown, ReactiveConsumer.close()) waits for the same close, so none closes the producer
   * while another one's abort is in flight.
   */
  close(by = Date.now() + this.settings.closeTimeoutMs): Promise<void> {
    this.closingBy(by);
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  /**
   * A close() must be done by `by`: a commitTransaction being resumed stops then (its outcome
   * unknown, the broker settles it). The sooner of several deadlines holds.
   */
  closingBy(by: number): void {
    this.closeDeadline.tighten(by);
  }

  /** The close deadline (`Infinity` while no close began). */
  private get closeBy(): number {
    return this.closeDeadline.by;
  }

  private async closeOnce(): Promise<void> {
    while (this.op !== undefined) await this.op;
    this.writer.stop();
    if (this.state.kind === 'open' && this.txn.touched.size > 0) {
      const txn = this.writer.take();
      const abortBy = Math.min(
        Date.now() + this.settings.commitTimeoutMs,
        Math.max(this.closeBy, Date.now() + 1000),
      );
      await this.abort(txn, 'the consumer closed', abortBy);
    }
    if (this.state.kind !== 'closed') {
      this.state = { kind: 'closed' };
      const closeProducer = (): Promise<void> =>
        this.producer.close(Math.max(1000, Math.min(10_000, this.closeBy - Date.now())));
      // The transaction a close stopped waiting for (see CLOSE_DUE) is aborted once its offset
      // send returned (an abort meanwhile conflicts with it): read_committed readers of its outputs
      // need not wait for transaction.timeout.ms. The producer closes after that.
      const settle = async (): Promise<void> => {
        const txn = this.abandoned;
        this.abandoned = undefined;
        if (txn !== undefined && txn.touched.size > 0) {
          this.state = { kind: 'open' }; // abort() takes it from here
          await this.abort(txn, CLOSE_DUE.message, Date.now() + this.settings.commitTimeoutMs);
          this.state = { kind: 'closed' };
        }
        await closeProducer();
      };
      if (this.offsetsInFlight !== undefined) {
        // It uses the producer (and the consumer): after this close returned.
        void this.clientIdle()
          .then(settle)
          .catch(() => undefined);
        return;
      }
      await settle();
    }
  }
}
