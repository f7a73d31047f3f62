/**
 * The broker side of {@link MockKafka}: topics as in-memory logs, transactions (KIP-98: a record of
 * an open transaction is invisible to `read_committed` readers and holds back what follows it; an
 * abort hides its records for good; each end writes a control record), and consumer groups whose
 * coordinator ({@link MockGroup}) hands partitions out. Everything is synchronous: the clients
 * (mock/consumer.ts, mock/producer.ts) add the asynchrony a binding has.
 */
import type { MessageHeader } from 'node-rdkafka';
import { MockGroup } from './group';

/** A transaction as the broker knows it. */
export interface MockTxn {
  status: 'open' | 'committed' | 'aborted';
}

/** One entry of a partition's log: a record, or a control record (a transaction marker). */
export interface LogEntry {
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: MessageHeader[];
  readonly timestamp: number;
  readonly txn: MockTxn | undefined;
  readonly control: boolean;
}

export type Isolation = 'read_committed' | 'read_uncommitted';

export const partitionKey = (topic: string, partition: number): string => `${topic}[${partition}]`;

export class MockBroker {
  private readonly topics = new Map<string, LogEntry[][]>();
  private readonly groups = new Map<string, MockGroup>();
  /** Called on every change a waiting consume() may be interested in (records, rebalances). */
  private readonly listeners = new Set<() => void>();

  createTopic(name: string, partitions: number): void {
    if (this.topics.has(name)) throw new Error(`MockKafka: topic ${name} exists already`);
    this.topics.set(
      name,
      Array.from({ length: partitions }, () => []),
    );
    for (const g of this.groups.values()) g.reconcile();
  }

  topicNames(): string[] {
    return [...this.topics.keys()];
  }

  /** Partitions of `topic`, 0 when it does not exist. */
  partitionCount(topic: string): number {
    return this.topics.get(topic)?.length ?? 0;
  }

  log(topic: string, partition: number): LogEntry[] | undefined {
    return this.topics.get(topic)?.[partition];
  }

  /** Appends a record; returns its offset. The caller checked that the partition exists. */
  append(topic: string, partition: number, record: Omit<LogEntry, 'offset' | 'control'>): number {
    const log = this.log(topic, partition) as LogEntry[];
    const offset = log.length;
    log.push({ ...record, offset, control: false });
    this.changed();
    return offset;
  }

  /** Ends `txn` (committed or aborted) with a control record in each partition it wrote to. */
  endTxn(txn: MockTxn, status: 'committed' | 'aborted', partitions: Iterable<string>): void {
    txn.status = status;
    for (const k of partitions) {
      const [, topic = '', p = '0'] = /^(.*)\[(\d+)\]$/.exec(k) ?? [];
      const log = this.log(topic, Number(p));
      if (log === undefined) continue;
      log.push({
        offset: log.length,
        key: null,
        value: null,
        headers: [],
        timestamp: Date.now(),
        txn,
        control: true,
      });
    }
    this.changed();
  }

  /**
   * Where a reader of `isolation` sees the partition end: the high watermark, or under
   * `read_committed` the last stable offset (the first record of a transaction still open).
   */
  end(topic: string, partition: number, isolation: Isolation): number {
    const log = this.log(topic, partition) ?? [];
    if (isolation === 'read_committed') {
      const open = log.find((e) => e.txn?.status === 'open');
      if (open !== undefined) return open.offset;
    }
    return log.length;
  }

  /** Whether a reader of `isolation` is given this entry (it moves past the others). */
  static delivers(entry: LogEntry, isolation: Isolation): boolean {
    if (entry.control) return false;
    return isolation === 'read_uncommitted' || entry.txn?.status !== 'aborted';
  }

  group(id: string): MockGroup {
    let g = this.groups.get(id);
    if (g === undefined) {
      g = new MockGroup(id, this);
      this.groups.set(id, g);
    }
    return g;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  changed(): void {
    for (const l of [...this.listeners]) l();
  }
}
