/**
 * A deterministic fake of node-rdkafka's transactional Producer, with the broker side of KIP-98:
 * records produced inside a transaction become visible (`committed`) only when its commit
 * succeeds, and the offsets sent with it are applied to the consumer fake's committed offsets at
 * the same moment; an abort discards both (`aborted` keeps what a read_uncommitted reader saw).
 * Each call answers asynchronously; `plan` can fail any call with librdkafka's error flags
 * (fatal / retriable / txn-requires-abort), `hold` keeps a commit in flight until released and
 * `holdOffsets` a sendOffsetsToTransaction (node-rdkafka's worker not run yet).
 *
 * As on the broker, a transaction open longer than the producer's `transaction.timeout.ms` (from its
 * first record or offsets) is aborted by the coordinator: a call that reaches it later is counted
 * in `expiredCalls` and fails as abortable (INVALID_PRODUCER_EPOCH, the bumped epoch).
 *
 * As in librdkafka, commitTransaction is resumable: after a retriable answer (it timed out waiting)
 * the commit goes on in the background, every other transactional call conflicts (ERR__CONFLICT,
 * retriable) and produce() is refused until commitTransaction is called again and finishes.
 */
import { EventEmitter } from 'node:events';
import type { TopicPartitionOffset } from 'node-rdkafka';

export interface TxnRecord {
  /** produce()'s opaque, handed back in the record's delivery report. */
  opaque?: unknown;
  /** Whether its delivery report was emitted. */
  reported?: boolean;
  topic: string;
  partition: number | null;
  value: Buffer | null;
  key: Buffer | string | undefined;
  headers: Record<string, string | Buffer>[] | undefined;
}

export type TxnOp = 'init' | 'begin' | 'send' | 'commit' | 'abort';

/** A planned failure of one call. */
export interface TxnFailurePlan {
  code: number;
  fatal?: boolean;
  retriable?: boolean;
  abortable?: boolean;
  /** The call answers only once its timeout passed, as a librdkafka call that timed out does. */
  afterTimeout?: boolean;
  /**
   * The call answers only after this long, whatever its timeout: librdkafka's
   * send_offsets_to_transaction waits for its AddOffsetsToTxn answer (or that request's own
   * timeout, `socket.timeout.ms`), not for the call's timeout.
   */
  answerAfterMs?: number;
  /**
   * commitTransaction with `retriable`: the commit librdkafka goes on with in the background after
   * this answer reaches the broker, which commits the transaction now (records visible, offsets
   * applied); the next call resumes it and answers success without committing it again.
   */
  committedMeanwhile?: boolean;
}

const ERR_CONFLICT = -173;
const ERR_STATE = -172;

export interface FakeTxnOptions {
  /** Decides each call's failure (n: the how-manieth call of that op, from 1). */
  plan?: (op: TxnOp, n: number) => TxnFailurePlan | undefined;
  /** Makes produce() of `record` throw QUEUE_FULL (n: the how-manieth produce() call, from 1). */
  queueFull?: (n: number, record: TxnRecord) => boolean;
  /**
   * The broker's refusal of a record produce() took (too large for the topic, a null key on a
   * compacted topic): its librdkafka error code, or undefined. A refused record fails its delivery
   * report and makes the commit of its transaction fail (abortable, with that code).
   */
  brokerRefuses?: (record: TxnRecord, txn: readonly TxnRecord[]) => number | undefined;
}

const ERR_PURGE_QUEUE = -152;
const ERR_INVALID_PRODUCER_EPOCH = 47;
const ERR_PRODUCER_FENCED = 90;

/** The broker's view of one transaction. */
export interface FakeTxn {
  readonly records: TxnRecord[];
  offsets: TopicPartitionOffset[];
  outcome: 'open' | 'committed' | 'aborted';
  /** When the broker's clock of the transaction started (its first record or offsets). */
  startedAt?: number;
  /** The broker aborted it: it outlived `transaction.timeout.ms`. */
  expired?: boolean;
}

interface ConsumerLike {
  commits: Map<string, number>;
  /** Set by the factory: whether an open transaction holds offsets of a partition. */
  pendingTxnOffsets?: ((partitionKey: string) => boolean) | undefined;
}

export class FakeTransactionalProducer extends EventEmitter {
  readonly transactions: FakeTxn[] = [];
  readonly calls: string[] = [];
  private current: FakeTxn | undefined;
  private connected = false;
  private initialised = false;
  private readonly counts = new Map<TxnOp | 'produce', number>();
  private held: (() => void)[] = [];
  private heldSends: (() => void)[] = [];
  /** The call librdkafka goes on with in the background (see the class comment). */
  private resumable: 'commit' | undefined;
  hold = false;
  holdOffsets = false;
  /** sendOffsetsToTransaction calls whose worker ran with the consumer disconnected (a crash). */
  disconnectedConsumerCalls = 0;
  /** Calls (send, commit) that reached the broker after it aborted their transaction for its age. */
  readonly expiredCalls: string[] = [];

  constructor(
    readonly config: Record<string, unknown>,
    private readonly options: FakeTxnOptions = {},
  ) {
    super();
  }

  /** Records of committed transactions, in commit order: what a read_committed reader sees. */
  get committed(): TxnRecord[] {
    return this.transactions.filter((t) => t.outcome === 'committed').flatMap((t) => t.records);
  }

  /** Whether the open transaction holds offsets of `partitionKey` (`topic[partition]`). */
  hasPendingOffsets(partitionKey: string): boolean {
    const txn = this.current;
    return (
      txn !== undefined &&
      txn.outcome === 'open' &&
      txn.offsets.some((o) => `${o.topic}[${o.partition}]` === partitionKey)
    );
  }

  /** Records of aborted transactions (a read_uncommitted reader may have seen them). */
  get aborted(): TxnRecord[] {
    return this.transactions.filter((t) => t.outcome === 'aborted').flatMap((t) => t.records);
  }

  get inTransaction(): boolean {
    return this.current !== undefined;
  }

  /** Lets held commits go on. */
  release(): void {
    this.hold = false;
    for (const go of this.held.splice(0)) go();
  }

  get heldCommits(): number {
    return this.held.length;
  }

  /** Lets held sendOffsetsToTransaction calls go on. */
  releaseOffsets(): void {
    this.holdOffsets = false;
    for (const go of this.heldSends.splice(0)) go();
  }

  get heldOffsets(): number {
    return this.heldSends.length;
  }

  private count(op: TxnOp | 'produce'): number {
    const n = (this.counts.get(op) ?? 0) + 1;
    this.counts.set(op, n);
    return n;
  }

  private answer(
    op: TxnOp,
    cb: (err: unknown) => void,
    then: () => void,
    timeoutMs = 0,
    failed?: (failure: TxnFailurePlan) => void,
  ): void {
    const expired = (op === 'send' || op === 'commit') && this.expire();
    const failure: TxnFailurePlan | undefined = this.fenced
      ? { code: ERR_PRODUCER_FENCED, fatal: true }
      : this.resumable !== undefined && this.resumable !== op
        ? { code: ERR_CONFLICT, retriable: true }
        : expired
          ? { code: ERR_INVALID_PRODUCER_EPOCH, abortable: true }
          : this.options.plan?.(op, this.count(op));
    this.calls.push(op);
    if (expired) this.expiredCalls.push(op);
    const reply = (): void => {
      if (failure === undefined) {
        then();
        cb(null);
        return;
      }
      if (failure.abortable === true && this.current && this.current.expired !== true) {
        this.current.outcome = 'open';
      }
      failed?.(failure);
      cb(
        Object.assign(new Error(`${op} failed (${failure.code})`), {
          code: failure.code,
          isFatal: failure.fatal === true,
          isRetriable: failure.retriable === true,
          isTxnRequiresAbort: failure.abortable === true,
        }),
      );
    };
    if (failure?.answerAfterMs !== undefined) setTimeout(reply, failure.answerAfterMs);
    else if (failure?.afterTimeout === true) setTimeout(reply, timeoutMs);
    else setImmediate(reply);
  }

  /**
   * Whether the open transaction outlived `transaction.timeout.ms` (the coordinator aborted it
   * then).
   */
  private expire(): boolean {
    const txn = this.current;
    const timeoutMs = Number(this.config['transaction.timeout.ms'] ?? 60_000);
    if (txn === undefined || txn.outcome !== 'open' || txn.startedAt === undefined) {
      return txn?.expired === true;
    }
    if (Date.now() - txn.startedAt <= timeoutMs) return false;
    txn.expired = true;
    txn.outcome = 'aborted';
    this.resumable = undefined;
    return true;
  }

  connect(_opts: unknown, cb: (err: Error | null) => void): this {
    this.calls.push('connect');
    setImmediate(() => {
      this.connected = true;
      cb(null);
    });
    return this;
  }

  setPollInterval(_ms: number): this {
    return this;
  }

  initTransactions(_timeout: number, cb: (err: unknown) => void): void {
    this.answer('init', cb, () => {
      this.initialised = true;
      this.emit('initialised');
    });
  }

  /**
   * Another producer of the same transactional.id initialised (InitProducerId bumped the epoch):
   * the broker aborts what this one had open, and every later call of this one fails fenced.
   */
  fence(): void {
    if (this.current !== undefined && this.current.outcome === 'open') {
      this.current.outcome = 'aborted';
    }
    this.current = undefined;
    this.resumable = undefined;
    this.fenced = true;
  }

  /** Fenced by a newer producer of the same transactional.id (see fence()). */
  fenced = false;

  beginTransaction(cb: (err: unknown) => void): void {
    if (!this.initialised) throw new Error('begin before init');
    if (this.current) throw new Error('begin while a transaction is open');
    this.current = { records: [], offsets: [], outcome: 'open' };
    this.transactions.push(this.current);
    this.answer('begin', cb, () => undefined);
  }

  produce(
    topic: string,
    partition: number | null,
    value: Buffer | null,
    key: Buffer | string | undefined,
    _timestamp: number | null,
    opaque: unknown,
    headers: Record<string, string | Buffer>[] | undefined,
  ): boolean {
    if (!this.connected) throw new Error('Producer not connected');
    if (!this.current) {
      throw Object.assign(new Error('Local: Erroneous state (no transaction)'), { code: -172 });
    }
    if (this.resumable !== undefined) {
      throw Object.assign(new Error('Local: Erroneous state (commit in progress)'), {
        code: ERR_STATE,
      });
    }
    const record: TxnRecord = { topic, partition, value, key, headers, opaque };
    if (this.options.queueFull?.(this.count('produce'), record) === true) {
      throw Object.assign(new Error('Local: Queue full'), { code: -184 });
    }
    this.current.startedAt ??= Date.now();
    this.current.records.push(record);
    return true;
  }

  sendOffsetsToTransaction(
    offsets: TopicPartitionOffset[],
    consumer: unknown,
    timeout: number,
    cb: (err: unknown) => void,
  ): void {
    const txn = this.current;
    if (!txn) throw new Error('sendOffsets without a transaction');
    txn.startedAt ??= Date.now();
    const go = (): void => {
      // node-rdkafka's worker reads the consumer's group metadata when it runs: a disconnected
      // consumer there is a native crash.
      const c = consumer as { isConnected?: () => boolean } | undefined;
      if (c?.isConnected?.() === false) this.disconnectedConsumerCalls += 1;
      this.answer(
        'send',
        (err) => {
          // The worker used the consumer until it answered: disconnected meanwhile, it crashed.
          if (c?.isConnected?.() === false) this.disconnectedConsumerCalls += 1;
          cb(err);
        },
        () => {
          txn.offsets.push(...offsets.map((o) => ({ ...o })));
        },
        timeout,
      );
    };
    if (this.holdOffsets) this.heldSends.push(go);
    else go();
  }

  commitTransaction(timeout: number, cb: (err: unknown) => void): void {
    const txn = this.current;
    if (!txn) throw new Error('commit without a transaction');
    const commit = (): void => {
      if (txn.outcome === 'committed') return;
      txn.outcome = 'committed';
      this.emit('committed', txn);
    };
    const refusal = txn.records
      .map((r) => this.options.brokerRefuses?.(r, txn.records))
      .find((c) => c !== undefined);
    if (refusal !== undefined && this.resumable === undefined) {
      // The flush inside commitTransaction meets the refused record: delivery reports go out (after
      // the answer, as node-rdkafka's dispatcher emits them on a later tick), the commit fails.
      this.calls.push('commit');
      setImmediate(() => {
        cb(
          Object.assign(new Error(`commit failed: a record was refused (${refusal})`), {
            code: refusal,
            isFatal: false,
            isRetriable: false,
            isTxnRequiresAbort: true,
          }),
        );
        setImmediate(() => this.report(txn, (r) => this.options.brokerRefuses?.(r, txn.records)));
      });
      return;
    }
    const go = (): void =>
      this.answer(
        'commit',
        cb,
        () => {
          commit();
          this.current = undefined;
          this.resumable = undefined;
          this.report(txn, () => undefined);
        },
        timeout,
        (failure) => {
          this.resumable = failure.retriable === true ? 'commit' : undefined;
          if (failure.committedMeanwhile === true) commit();
        },
      );
    if (this.hold) this.held.push(go);
    else go();
  }

  abortTransaction(timeout: number, cb: (err: unknown) => void): void {
    const txn = this.current;
    this.answer(
      'abort',
      cb,
      () => {
        if (txn) txn.outcome = 'aborted';
        this.current = undefined;
        if (txn) setImmediate(() => this.report(txn, () => ERR_PURGE_QUEUE));
      },
      timeout,
    );
  }

  /** Emits the delivery reports (with `dr_cb` set) of `txn`'s records not reported yet. */
  private report(txn: FakeTxn, code: (r: TxnRecord) => number | undefined): void {
    if (this.config.dr_cb !== true) return;
    for (const r of txn.records) {
      if (r.reported === true) continue;
      r.reported = true;
      const c = code(r);
      const report = { topic: r.topic, partition: r.partition ?? 0, opaque: r.opaque };
      if (c === undefined) this.emit('delivery-report', null, report);
      else {
        const err = Object.assign(new Error(`Broker: refused (${c})`), { code: c });
        this.emit('delivery-report', err, report);
      }
    }
  }

  /** The consumer whose committed offsets a commit moves (set by the spec helper). */
  consumer: ConsumerLike | undefined;

  disconnect(cb?: () => void): this {
    this.calls.push('disconnect');
    this.connected = false;
    setImmediate(() => cb?.());
    return this;
  }
}

/** A factory recording the fake it creates; committed offsets go to `consumer()`'s map. */
export function fakeTransactionalProducerFactory(
  consumer: () => ConsumerLike,
  options: FakeTxnOptions = {},
): {
  factory: (g: Record<string, unknown>) => never;
  producer: () => FakeTransactionalProducer;
  producers: () => FakeTransactionalProducer[];
} {
  let created: FakeTransactionalProducer | undefined;
  const all: FakeTransactionalProducer[] = [];
  return {
    factory: (g) => {
      const p = new FakeTransactionalProducer(g, options);
      consumer().pendingTxnOffsets = (k) => all.some((x) => x.hasPendingOffsets(k));
      // The broker is shared: a newer producer of the same transactional.id fences the older ones.
      p.on('initialised', () => {
        for (const older of all) {
          if (older !== p && older.config['transactional.id'] === g['transactional.id']) {
            older.fence();
          }
        }
      });
      all.push(p);
      p.on('committed', (txn: FakeTxn) => {
        const commits = consumer().commits;
        for (const o of txn.offsets) commits.set(`${o.topic}[${o.partition}]`, o.offset);
      });
      created = p;
      return p as never;
    },
    producer: () => {
      if (!created) throw new Error('no transactional producer created yet');
      return created;
    },
    /** Every producer created, oldest first (a recovery recreates it). */
    producers: () => [...all],
  };
}
