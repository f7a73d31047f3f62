/**
 * {@link MockKafka}'s `Producer`: node-rdkafka's producer API over the in-memory broker. A record is
 * in its partition's log when produce() returns; its delivery report comes at the next poll
 * (`setPollInterval`, `poll()` or `flush()`), an error (UNKNOWN_TOPIC_OR_PART) when the topic or
 * partition does not exist. With `transactional.id`: initTransactions fences an older producer
 * of the same id (aborting what it left open); records of a transaction are hidden from
 * `read_committed` readers until commitTransaction, which also commits the offsets
 * sendOffsetsToTransaction gave it (refused, abortable, when the consumer no longer holds the
 * partitions); abortTransaction hides them for good.
 */
import * as Kafka from 'node-rdkafka';
import type { MessageHeader, TopicPartitionOffset } from 'node-rdkafka';
import type { MockBroker, MockTxn } from './broker';
import { partitionKey } from './broker';
import type { GroupPort, MockGroup } from './group';
import { copyHeaders, kafkaError } from './client-parts';
import type { MockClient } from './client-parts';

const E = Kafka.CODES.ERRORS;
const UNKNOWN_TOPIC_OR_PART = 3;

interface OpenTxn {
  readonly txn: MockTxn;
  readonly partitions: Set<string>;
  readonly offsets: { group: MockGroup; offsets: TopicPartitionOffset[] }[];
  /** A record of it the broker refused: the commit fails (abortable), as librdkafka's does. */
  refused?: Error;
}

/** Which producer holds each transactional.id now (the latest initTransactions). */
type Owners = Map<string, object>;

/** The partition of a keyed record: a hash of its key (not Kafka's murmur2). */
export function keyHash(key: Buffer): number {
  let h = 0;
  for (const b of key) h = (h * 31 + b) | 0;
  return Math.abs(h);
}

export function mockProducerClass(
  broker: MockBroker,
  owners: Owners,
  Base: typeof MockClient,
): typeof Kafka.Producer {
  class MockProducer extends Base {
    private polling: NodeJS.Timeout | undefined;
    private reports: { err: Error | null; report: Record<string, unknown> }[] = [];
    private readonly transactionalId: string | undefined;
    private open: OpenTxn | undefined;
    private rr = 0;

    constructor(config: Record<string, unknown>, topicConfig?: Record<string, unknown>) {
      super();
      // librdkafka checks the settings as it would for a real producer (never connected).
      new Kafka.Producer(config as Kafka.ProducerGlobalConfig, topicConfig ?? {});
      const id = config['transactional.id'];
      this.transactionalId = typeof id === 'string' && id !== '' ? id : undefined;
    }

    disconnect(cb?: (err: Error | null, data?: unknown) => void): this {
      this.setPollInterval(0);
      this.connected = false;
      setImmediate(() => cb?.(null, {}));
      return this;
    }

    setPollInterval(ms: number): this {
      if (this.polling !== undefined) clearInterval(this.polling);
      this.polling = ms > 0 ? setInterval(() => this.poll(), ms) : undefined;
      return this;
    }

    poll(): this {
      for (const r of this.reports.splice(0)) this.emit('delivery-report', r.err, r.report);
      return this;
    }

    flush(_timeout?: number, cb?: (err: Error | null) => void): this {
      this.poll();
      if (cb) setImmediate(() => cb(null));
      return this;
    }

    produce(
      topic: string,
      partition: number | null | undefined,
      value: Buffer | null,
      key?: Buffer | string | null,
      timestamp?: number | null,
      opaque?: unknown,
      headers?: MessageHeader[],
    ): boolean {
      if (!this.connected) throw kafkaError(E.ERR__STATE, 'Producer not connected');
      if (this.transactionalId !== undefined && this.open === undefined) {
        throw kafkaError(E.ERR__STATE, 'Local: Erroneous state: no transaction begun');
      }
      this.fencedCheck();
      const n = broker.partitionCount(topic);
      const k = key === undefined || key === null ? null : Buffer.from(key);
      const p = partition ?? (n === 0 ? 0 : k !== null ? keyHash(k) % n : this.rr++ % n);
      const base = {
        topic,
        partition: p,
        key: k ?? undefined,
        value,
        opaque,
        size: value?.length ?? 0,
      };
      if (p < 0 || p >= n) {
        const err = kafkaError(UNKNOWN_TOPIC_OR_PART, 'Broker: Unknown topic or partition');
        this.reports.push({ err, report: { ...base, offset: -1 } });
        if (this.open !== undefined) this.open.refused ??= err;
        return true;
      }
      const offset = broker.append(topic, p, {
        key: k,
        value: value === null ? null : Buffer.from(value),
        headers: copyHeaders(headers ?? []),
        timestamp: timestamp ?? Date.now(),
        txn: this.open?.txn,
      });
      this.open?.partitions.add(partitionKey(topic, p));
      this.reports.push({ err: null, report: { ...base, offset } });
      return true;
    }

    initTransactions(_timeout: number, cb: (err: Error | null) => void): void {
      this.call(cb, () => {
        if (this.transactionalId === undefined) {
          throw kafkaError(E.ERR__NOT_CONFIGURED, 'Local: transactional.id is not set', {
            isFatal: true,
          });
        }
        // The new epoch fences the older producer and aborts what it left open.
        const older = owners.get(this.transactionalId) as MockProducer | undefined;
        if (older !== undefined && older !== this) older.abandon();
        owners.set(this.transactionalId, this);
      });
    }

    beginTransaction(cb: (err: Error | null) => void): void {
      this.call(cb, () => {
        this.fencedCheck();
        if (this.open !== undefined)
          throw kafkaError(E.ERR__STATE, 'Local: a transaction is open already');
        this.open = { txn: { status: 'open' }, partitions: new Set(), offsets: [] };
      });
    }

    sendOffsetsToTransaction(
      offsets: TopicPartitionOffset[],
      consumer: unknown,
      _timeout: number | ((err: Error | null) => void),
      cb?: (err: Error | null) => void,
    ): void {
      const done = (typeof _timeout === 'function' ? _timeout : cb) as (err: Error | null) => void;
      this.call(done, () => {
        this.fencedCheck();
        const txn = this.needOpen();
        const member = consumer as GroupPort & { group?: MockGroup };
        if (member.group === undefined) {
          throw kafkaError(
            E.ERR__INVALID_ARG,
            'MockKafka: the consumer is not a MockKafka consumer',
          );
        }
        const refused = member.group.refusal(member, offsets);
        if (refused !== undefined) {
          throw kafkaError(refused, `MockKafka: the group refused the offsets (${refused})`, {
            isTxnRequiresAbort: true,
          });
        }
        txn.offsets.push({ group: member.group, offsets: offsets.map((o) => ({ ...o })) });
      });
    }

    commitTransaction(_timeout: number, cb: (err: Error | null) => void): void {
      this.call(cb, () => {
        this.fencedCheck();
        const txn = this.needOpen();
        this.poll();
        if (txn.refused !== undefined) {
          const e = txn.refused as Error & { code: number };
          throw kafkaError(e.code, `a record of the transaction failed: ${e.message}`, {
            isTxnRequiresAbort: true,
          });
        }
        this.open = undefined;
        broker.endTxn(txn.txn, 'committed', txn.partitions);
        for (const o of txn.offsets) o.group.apply(o.offsets);
      });
    }

    abortTransaction(_timeout: number, cb: (err: Error | null) => void): void {
      this.call(cb, () => {
        this.fencedCheck();
        const txn = this.open;
        this.open = undefined;
        this.reports = [];
        if (txn !== undefined) broker.endTxn(txn.txn, 'aborted', txn.partitions);
      });
    }

    setOauthBearerToken(): this {
      return this;
    }

    /** Fenced by a newer producer of its transactional.id: its transaction is aborted. */
    private abandon(): void {
      const txn = this.open;
      this.open = undefined;
      if (txn !== undefined) broker.endTxn(txn.txn, 'aborted', txn.partitions);
    }

    private fencedCheck(): void {
      const id = this.transactionalId;
      if (id !== undefined && owners.has(id) && owners.get(id) !== this) {
        throw kafkaError(
          E.ERR__FENCED,
          'Local: This instance has been fenced by a newer instance',
          {
            isFatal: true,
          },
        );
      }
    }

    private needOpen(): OpenTxn {
      if (this.open === undefined) throw kafkaError(E.ERR__STATE, 'Local: no transaction is open');
      return this.open;
    }

    private call(cb: (err: Error | null) => void, body: () => void): void {
      let err: Error | null = null;
      try {
        body();
      } catch (e) {
        err = e as Error;
      }
      setImmediate(() => cb(err));
    }
  }
  return MockProducer as unknown as typeof Kafka.Producer;
}
