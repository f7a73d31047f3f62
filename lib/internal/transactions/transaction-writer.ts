/**
 * The message path of `processTransactional()`: finished messages' records go into the open
 * transaction in offset order per partition, and a message's records and its offset are always in
 * the same transaction.
 *
 * - A finished message waits until every message before it in its partition is in (then its
 *   offset is what the ledger commits next), and is acked only once all its records are in.
 * - Before its first record is produced, its partition counts as touched (with the first offset of
 *   its work in the transaction), so an abort poisons and rewinds the partition even when only
 *   part of the message's records are in.
 * - A message the producer stops half-way (QUEUE_FULL) is the transaction's `partial` message: it
 *   is finished before any other message starts, and a transaction is never committed with one
 *   (the commit lets it finish first, {@link TransactionWriter.finishPartial}, or aborts).
 * - Each record carries a {@link DeliveryTag} (produce()'s opaque) naming its input, so a record
 *   the broker refuses later is pinned on its input (input-faults.ts). A suspect input (one whose
 *   records failed a transaction before) goes into a transaction of its own, committed at once.
 */
import type { Logger } from '../../logger';
import type { KafkaClientError } from '../../errors';
import type { OutputRecord } from '../../transactional-options';
import type { KafkaMessage } from '../../types';
import type { InputCoordinates, RecordFailure } from './input-faults';
import type { PartitionControl } from '../partition/partition-control';
import { Code } from '../binding/rdkafka';
import type { TransactionalProducer } from './transactional-producer';

/** A message whose handler finished, with the records it writes. */
export interface Finished {
  readonly control: PartitionControl;
  readonly message: KafkaMessage;
  readonly records: readonly OutputRecord[];
  /** Records already handed to the producer. */
  produced: number;
}

/** What handing a message's remaining records to the producer did. */
type WriteOutcome =
  | { readonly kind: 'written' }
  /** The producer's queue is full: the rest goes in once it has room. */
  | { readonly kind: 'queue-full' }
  /** The producer refused a record for another reason (too large, invalid…). */
  | { readonly kind: 'refused'; readonly record: OutputRecord; readonly error: unknown };

const WRITTEN: WriteOutcome = { kind: 'written' };
const QUEUE_FULL: WriteOutcome = { kind: 'queue-full' };
const QUEUE_FULL_RETRY_MS = 20;

/** Why a transaction whose partly-written message's partition was taken away is aborted. */
const PARTIAL_LOST =
  'the partition of a message partly written in the open transaction was lost or replaced';

/** `topic[partition]@offset`, how logs and errors name an input message. */
export const inputName = (m: InputCoordinates): string => `${m.topic}[${m.partition}]@${m.offset}`;

/** librdkafka's delivery errors of records an abort purged: not the record's fault. */
const PURGED: ReadonlySet<number> = new Set([-152, -151]);

/** produce()'s opaque: which transaction and input a record belongs to. */
export class DeliveryTag {
  constructor(
    readonly work: TransactionWork,
    readonly input: InputCoordinates,
    readonly outputTopic: string,
    /** The generation of the input's stream. */
    readonly generation: number,
  ) {}
}

/** The work of one transaction. */
export class TransactionWork {
  /** Each partition stream with work in it → the first offset of that work. */
  readonly touched = new Map<PartitionControl, number>();
  /** Messages whose records are all in. */
  messages = 0;
  records = 0;
  /** When its first record went in. */
  openedAt: number | undefined;
  /** The message whose records are only partly in. */
  partial: Finished | undefined;
  /** Why it must be aborted, recorded while a commit holds it (that commit aborts it). */
  doomed: string | undefined;
  /** The inputs with records in it (whole or in part), in the order they went in. */
  readonly inputs: InputCoordinates[] = [];
  /** It holds one suspect input and nothing else goes in: it is committed at once. */
  solo = false;
  /** Records handed to the producer, and delivery reports received of them. */
  private produced = 0;
  private reported = 0;
  /** Records the broker refused (their delivery reports), purges left out. */
  readonly failures: RecordFailure[] = [];
  private waiters: (() => void)[] = [];

  /** A delivery report of one of its records. */
  delivered(tag: DeliveryTag, error: KafkaClientError | undefined): void {
    this.reported += 1;
    if (error !== undefined && !PURGED.has(error.kafkaCode)) {
      const { input, outputTopic, generation } = tag;
      this.failures.push({ input, generation, outputTopic, error });
    }
    if (this.reported >= this.produced) for (const go of this.waiters.splice(0)) go();
  }

  /** Resolves once every record's delivery report arrived, or at `by`. */
  async reportsIn(by: number): Promise<void> {
    if (this.reported >= this.produced) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.waiters.push(resolve);
      timer = setTimeout(resolve, Math.max(0, by - Date.now()));
    });
    clearTimeout(timer);
  }

  /** Hands `f`'s remaining records to the producer inside this transaction. */
  write(producer: TransactionalProducer, f: Finished): WriteOutcome {
    if (!this.touched.has(f.control)) this.touched.set(f.control, f.message.offset);
    this.openedAt ??= Date.now();
    if (this.partial !== f) this.inputs.push(f.message);
    this.partial = f;
    while (f.produced < f.records.length) {
      const record = f.records[f.produced] as OutputRecord;
      try {
        producer.produce(
          record.topic,
          record.partition,
          toBuffer(record.value),
          toBuffer(record.key),
          record.headers?.map(([k, v]) => ({ [k]: v })),
          new DeliveryTag(this, f.message, record.topic, f.control.generation),
        );
        this.produced += 1;
      } catch (error) {
        if ((error as { code?: unknown }).code === Code.QUEUE_FULL) return QUEUE_FULL;
        return { kind: 'refused', record, error };
      }
      f.produced += 1;
    }
    this.partial = undefined;
    this.messages += 1;
    this.records += f.records.length;
    return WRITTEN;
  }
}

/** What the writer needs from the transactional unit. */
export interface WriterHost {
  /** Whether records may go into the open transaction now (open, no operation in flight). */
  accepting(): boolean;
  /** Whether a stream's results no longer count (fenced, released, or its work aborted). */
  dead(control: PartitionControl): boolean;
  /**
   * Whether a stream's revoke has sent its final commit: nothing more of it goes into a
   * transaction (what still waits is redone by the partition's next owner).
   */
  sealed(control: PartitionControl): boolean;
  /** The open transaction must be aborted. */
  abort(reason: string): void;
  /** Ends the consumer with an error. */
  fail(err: Error): void;
  /** The open transaction holds `maxMessages` messages (or a suspect input alone): commit it. */
  full(): void;
  /** Whether `input` failed a transaction before: it goes into one of its own. */
  suspect(input: KafkaMessage): boolean;
  /** The producer refused a record of `f` at produce() (not QUEUE_FULL). */
  refused(f: Finished, record: OutputRecord, error: unknown): void;
}

export class TransactionWriter {
  /** The work of the open transaction. */
  private txn = new TransactionWork();
  /** Finished messages not yet in, per stream, by offset. */
  private readonly waiting = new Map<PartitionControl, Map<number, Finished>>();
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly producer: TransactionalProducer,
    private readonly maxMessages: number,
    private readonly logger: Logger,
    private readonly host: WriterHost,
  ) {}

  /** The work of the open transaction. */
  get work(): TransactionWork {
    return this.txn;
  }

  /** Takes the open transaction's work for its commit or abort; the next one starts empty. */
  take(): TransactionWork {
    const txn = this.txn;
    this.txn = new TransactionWork();
    return txn;
  }

  /** A message finished: its records go in once every message before it in its partition did. */
  settle(control: PartitionControl, message: KafkaMessage, records: readonly OutputRecord[]): void {
    if (this.host.dead(control)) return;
    let map = this.waiting.get(control);
    if (map === undefined) {
      map = new Map();
      this.waiting.set(control, map);
    }
    map.set(message.offset, { control, message, records, produced: 0 });
    this.pump();
  }

  /** Forgets what of `control` waits (its work was aborted or its partition lost). */
  drop(control: PartitionControl): void {
    this.waiting.delete(control);
  }

  /**
   * Hands what is next in offset order to the open transaction, the partly-written message first.
   * Not while an operation is in flight: a commit drives the partly-written message itself.
   */
  pump(): void {
    if (!this.host.accepting()) return;
    const txn = this.txn;
    if (txn.doomed !== undefined) {
      this.host.abort(txn.doomed);
      return;
    }
    if (txn.partial !== undefined) {
      if (this.host.dead(txn.partial.control)) {
        this.host.abort(PARTIAL_LOST);
        return;
      }
      if (this.handOver(txn.partial) !== 'written') return;
    }
    if (txn.solo) return; // committed at once, alone
    for (const [control, map] of this.waiting) {
      if (this.host.dead(control) || this.host.sealed(control)) {
        this.waiting.delete(control);
        continue;
      }
      while (this.txn.messages < this.maxMessages) {
        const next = control.ledger.committable();
        const f = next === undefined ? undefined : map.get(next);
        if (f === undefined) break;
        if (this.host.suspect(f.message)) {
          // It failed a transaction before: alone, so a failure again is its own.
          if (this.txn.inputs.length === 0) {
            this.txn.solo = true;
            if (this.handOver(f) === 'written') this.host.full();
          } else this.host.full();
          return;
        }
        if (this.handOver(f) !== 'written') {
          // Retried shortly (queue full) or aborting. The other partitions go first next time: the
          // queue refuses part-way through most inputs when it is the bottleneck, and a pump that
          // always began with the same partition starved the others (nothing of theirs written).
          this.waiting.delete(control);
          this.waiting.set(control, map);
          return;
        }
      }
      if (map.size === 0) this.waiting.delete(control);
    }
    if (this.txn.messages >= this.maxMessages) this.host.full();
  }

  /**
   * Lets the open transaction's partly-written message finish before its commit (nothing else
   * starts meanwhile), retrying a full queue until `by`. Returns why it could not.
   */
  async finishPartial(by: number): Promise<string | undefined> {
    const txn = this.txn;
    for (;;) {
      const f = txn.partial;
      if (txn.doomed !== undefined || f === undefined) return txn.doomed;
      if (this.host.dead(f.control)) return PARTIAL_LOST;
      const outcome = this.handOver(f);
      if (outcome === 'refused') {
        return txn.doomed ?? `the producer refused a record of ${inputName(f.message)}`;
      }
      if (outcome === 'written') continue;
      if (Date.now() + QUEUE_FULL_RETRY_MS > by) {
        return `the producer's queue stayed full: input ${inputName(f.message)} could not be written whole before the commit's deadline`;
      }
      await new Promise((r) => setTimeout(r, QUEUE_FULL_RETRY_MS));
    }
  }

  /** No more retries of a full queue (the consumer closed). */
  stop(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
  }

  /** Writes a finished message's remaining records into the open transaction; acks it once all are in. */
  private handOver(f: Finished): WriteOutcome['kind'] {
    const outcome = this.txn.write(this.producer, f);
    switch (outcome.kind) {
      case 'written':
        this.waiting.get(f.control)?.delete(f.message.offset);
        f.control.ack(f.message);
        break;
      case 'queue-full':
        this.retryTimer ??= setTimeout(() => {
          this.retryTimer = undefined;
          this.pump();
        }, QUEUE_FULL_RETRY_MS);
        break;
      case 'refused':
        this.host.refused(f, outcome.record, outcome.error);
        break;
    }
    return outcome.kind;
  }
}

const toBuffer = (v: Buffer | string | null | undefined): Buffer | null =>
  v === null || v === undefined ? null : typeof v === 'string' ? Buffer.from(v) : v;
