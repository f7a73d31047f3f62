/**
 * What the parts of the transactional unit share: the engine's host, the collaborators
 * (producer, writer, input faults, close deadline), and the bookkeeping of the transactions — the
 * unit's state, the one operation in flight, the streams poisoned or sealed, the counters — with
 * the deadlines derived from them. The parts (commit, abort, close…) are functions of this
 * context: each reads and writes the one state of the unit, none holds a copy of it.
 */
import type { HandlerTracer } from '../../tracing';
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { ResolvedTransactionalOptions } from '../../transactional-options';
import type { ConsumerEvent, RevokeTransaction, TopicPartition } from '../../types';
import type { EngineObserver } from '../observe/engine-observer';
import { Histogram, LATENCY_BUCKETS_SECONDS } from '../observe/histogram';
import type { PartitionControl } from '../partition/partition-control';
import type { CloseDeadline } from './close-deadline';
import type { InputFaults } from './input-faults';
import type { TransactionWork, TransactionWriter } from './transaction-writer';
import type { TransactionalProducer } from './transactional-producer';

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
  /** The consumer's tracer: each commit is a {@link HandlerTracer.transaction} when it has one. */
  readonly tracer?: HandlerTracer;
}

/** The transaction of the last commit a revoke asked for (for the `committed` event). */
export type FinalTransaction = RevokeTransaction;

export type TxnState =
  | { readonly kind: 'starting' }
  | { readonly kind: 'open' }
  | { readonly kind: 'committing' }
  | { readonly kind: 'aborting' }
  | { readonly kind: 'failed'; readonly error: Error }
  | { readonly kind: 'closed' };

/** The mutable state of the unit: each part reads and writes it here. */
export class TransactionBook {
  state: TxnState = { kind: 'starting' };
  /** Streams whose work was aborted: their later results never count. */
  readonly poisoned = new WeakSet<PartitionControl>();
  /** Transactions a commitTransaction was called for (its EndTxn may have reached the broker). */
  readonly commitSent = new WeakSet<TransactionWork>();
  /** Streams whose revoke's final commit has begun: nothing more of them is written. */
  readonly sealed = new WeakSet<PartitionControl>();
  /** The start, a commit or an abort in flight (one at a time). */
  op: Promise<void> | undefined;
  lastCommitAt = Date.now();
  /** `consumer.commit()` asked for a commit: the next `maybeCommit` commits what is open. */
  commitRequested = false;
  /** Periodic commits held while a revoke's onRevoke hook runs (how many holds). */
  periodicHeld = 0;
  lastFinal: FinalTransaction = { outcome: 'none', messages: 0, records: 0 };
  readonly counts = {
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
  readonly duration = new Histogram(LATENCY_BUCKETS_SECONDS);
  /** The close, once one began (every close() waits for the same one). */
  closing: Promise<void> | undefined;
  /** The transaction whose offset send a close stopped waiting for: aborted once it returns. */
  abandoned: TransactionWork | undefined;
  /** A sendOffsetsToTransaction in flight (its worker reads the consumer). */
  offsetsInFlight: Promise<void> | undefined;
  /** While a revoke waits for a commit: until when it holds its partitions for one timed out. */
  readonly revokeHolds = new Set<() => number>();

  /** The latest any revoke waiting for a commit may hold its partitions until (Infinity: none). */
  revokeHoldBy(): number {
    if (this.revokeHolds.size === 0) return Infinity;
    return Math.max(...[...this.revokeHolds].map((by) => by()));
  }

  /** Whether a stream's results no longer count (fenced, released, or its work aborted). */
  dead(control: PartitionControl): boolean {
    return control.state === 'fenced' || control.state === 'released' || this.poisoned.has(control);
  }
}

/** The unit's collaborators and bookkeeping, as every part of it takes them. */
export interface TransactionContext {
  readonly producer: TransactionalProducer;
  readonly options: ResolvedTransactionalOptions;
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly host: TransactionsHost;
  /** Finished messages on their way into the open transaction. */
  readonly writer: TransactionWriter;
  /** Inputs whose output records were refused (suspects and poison). */
  readonly faults: InputFaults;
  /** A close's deadline (`Infinity` while no close began); see CLOSE_DUE in transaction-commit.ts. */
  readonly closeDeadline: CloseDeadline;
  readonly book: TransactionBook;
}

/** `by`, or the close deadline when that is sooner. */
export function closeBound(ctx: TransactionContext, by: number): number {
  return Math.min(by, ctx.closeDeadline.by);
}

/**
 * The last moment a call of `txn` may still end: `transaction.timeout.ms` after its first record
 * (or after its offsets were first sent, when it has no record), less a margin for the request
 * on its way. The broker's clock starts later (when the first record's partition is added to the
 * transaction), so the broker never aborts it before this.
 */
export function deadlineOf(
  ctx: TransactionContext,
  txn: TransactionWork,
  sentAt = Date.now(),
): number {
  const timeout = ctx.options.transactionTimeoutMs;
  return (txn.openedAt ?? sentAt) + timeout - Math.min(1000, Math.floor(timeout / 10));
}

/**
 * The producer may be recreated after `txn` failed for good: no commitTransaction of it was ever
 * called (no EndTxn(commit) of it can have reached the coordinator), and no close began.
 */
export function mayRecreate(ctx: TransactionContext, txn: TransactionWork): boolean {
  return (
    !ctx.book.commitSent.has(txn) &&
    ctx.book.closing === undefined &&
    ctx.closeDeadline.by === Infinity
  );
}
