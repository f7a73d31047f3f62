/**
 * The transactional producer of `processTransactional()` as promises: connect, initTransactions,
 * begin, produce (synchronous hand-over to librdkafka), sendOffsetsToTransaction with the consumer's
 * group metadata (KIP-447), commit and abort, each bounded; and librdkafka's three kinds of
 * transactional error (rd_kafka_error_is_fatal / is_retriable / txn_requires_abort, which
 * node-rdkafka copies onto the error as `isFatal`, `isRetriable`, `isTxnRequiresAbort`).
 */
import type { ClientOAuth } from '../binding/oauth-bearer';
import * as Kafka from 'node-rdkafka';
import { translateLibrdkafkaConfigError } from '../settings/librdkafka-settings';
import { ConnectError } from '../../errors';
import { toKafkaError } from '../binding/rdkafka';
import type { KafkaClientError } from '../../errors';

/** The Producer methods the transactional unit uses (the fake implements the same). */
export type RdKafkaTransactionalProducer = Pick<
  Kafka.Producer,
  | 'connect'
  | 'disconnect'
  | 'produce'
  | 'setPollInterval'
  | 'on'
  | 'initTransactions'
  | 'beginTransaction'
  | 'commitTransaction'
  | 'abortTransaction'
  | 'sendOffsetsToTransaction'
>;

/** Builds the native producer; tests inject a fake. */
export type TransactionalProducerFactory = (
  globalConfig: Record<string, unknown>,
) => RdKafkaTransactionalProducer;

/** The transactional producer factory of a binding (node-rdkafka by default). */
export const transactionalProducerFactoryOf =
  (binding: { readonly Producer: typeof Kafka.Producer }): TransactionalProducerFactory =>
  (globalConfig) =>
    new binding.Producer(globalConfig as Kafka.ProducerGlobalConfig, {});

/** One record's delivery report: `error` undefined when the broker took it. */
export type DeliveryListener = (error: KafkaClientError | undefined, opaque: unknown) => void;

/** How a transactional call failed, in librdkafka's terms. */
export type TxnErrorKind = 'fatal' | 'fenced' | 'abortable' | 'retriable';

/** librdkafka codes that mean another producer took over this transactional.id. */
const FENCED_CODES: ReadonlySet<number> = new Set([
  Kafka.CODES.ERRORS.ERR__FENCED, // -144: librdkafka's local "producer fenced"
  90, // PRODUCER_FENCED
  47, // INVALID_PRODUCER_EPOCH
  82, // FENCED_INSTANCE_ID (KIP-447: the consumer's static member id was fenced)
]);

/** A transactional call's failure, classified. */
export interface TxnFailure {
  readonly kind: TxnErrorKind;
  readonly error: KafkaClientError;
}

/** Classifies a transactional error as librdkafka flags it; fatal-and-fenced is `fenced`. */
export function classifyTxnError(err: unknown, context: string): TxnFailure {
  const raw = (err ?? {}) as {
    isFatal?: boolean;
    isRetriable?: boolean;
    isTxnRequiresAbort?: boolean;
  };
  const error = toKafkaError(err, context);
  if (raw.isFatal === true || error.fatal) {
    return { kind: FENCED_CODES.has(error.kafkaCode) ? 'fenced' : 'fatal', error };
  }
  if (raw.isTxnRequiresAbort === true) return { kind: 'abortable', error };
  if (raw.isRetriable === true) return { kind: 'retriable', error };
  // Neither flag: librdkafka refused the call in this state (ERR__STATE, a timeout of a call
  // that is not retriable): the transaction cannot be trusted any more, abort it.
  return { kind: FENCED_CODES.has(error.kafkaCode) ? 'fenced' : 'abortable', error };
}

/** Thrown by the wrapper's calls: the classified failure. */
export class TxnCallError extends Error {
  constructor(readonly failure: TxnFailure) {
    super(failure.error.message, { cause: failure.error });
  }
}

const POLL_INTERVAL_MS = 50;

export class TransactionalProducer {
  private producer: RdKafkaTransactionalProducer;
  /** Where each record's delivery report goes (with the opaque produce() was given). */
  onDelivery: DeliveryListener = () => undefined;

  constructor(
    readonly transactionalId: string,
    private readonly config: Record<string, unknown>,
    private readonly onError: (err: KafkaClientError) => void,
    private readonly factory: TransactionalProducerFactory,
    /** The consumer's OAUTHBEARER provider, kept supplying each native producer. */
    private readonly oauth?: ClientOAuth,
  ) {
    try {
      // Delivery reports name the record the broker refused (the commit's error does not).
      this.producer = this.create();
    } catch (err) {
      const e = translateLibrdkafkaConfigError(err);
      throw Object.assign(e, {
        message: `producerConfig: ${e.message}`,
        key: `producerConfig.${e.key}`,
      });
    }
  }

  /** A native producer of this transactional.id, its errors and delivery reports wired. */
  private create(): RdKafkaTransactionalProducer {
    const producer = this.factory({ ...this.config, dr_cb: true });
    producer.on('event.error', (err) => {
      this.onError(toKafkaError(err, 'transactional producer error'));
    });
    producer.on('delivery-report', (err, report) => {
      this.onDelivery(
        err ? toKafkaError(err, 'delivery failed') : undefined,
        (report as { opaque?: unknown } | undefined)?.opaque,
      );
    });
    return producer;
  }

  /**
   * Replaces a native producer librdkafka put in a fatal state by a new one of the same
   * transactional.id: the old one is disconnected (bounded by `closeWaitMs`), the new one connects
   * and initTransactions, which bumps the epoch: the broker fences the old producer and aborts the
   * transaction it had open (or lets one already being committed finish first).
   */
  async recreate(
    closeWaitMs: number,
    connectTimeoutMs: number,
    initTimeoutMs: number,
  ): Promise<void> {
    await this.close(closeWaitMs);
    this.producer = this.create();
    await this.connect(connectTimeoutMs);
    await this.init(initTimeoutMs);
  }

  /** Connects (bounded by `connectTimeoutMs`). */
  async connect(connectTimeoutMs: number): Promise<void> {
    await this.oauth?.before(this.producer);
    await new Promise<void>((resolve, reject) => {
      this.producer.connect({ timeout: connectTimeoutMs }, (err) => {
        if (err) {
          reject(
            new ConnectError(
              `The transactional producer could not connect within ${connectTimeoutMs} ms: ${err.message}`,
              { cause: err, retriable: true },
            ),
          );
          return;
        }
        resolve();
      });
    });
    this.producer.setPollInterval(POLL_INTERVAL_MS);
  }

  /**
   * Registers the transactional.id (fencing older producers of the same id, aborting what they
   * left open). A call that timed out can be made again: librdkafka goes on where it was.
   */
  init(timeoutMs: number): Promise<void> {
    return this.call('initTransactions', (cb) => this.producer.initTransactions(timeoutMs, cb));
  }

  begin(): Promise<void> {
    return this.call('beginTransaction', (cb) => this.producer.beginTransaction(cb));
  }

  /**
   * Hands one record to librdkafka inside the open transaction (no wait for the broker: the
   * commit flushes and fails if any record failed). Throws the binding's error (QUEUE_FULL…).
   */
  produce(
    topic: string,
    partition: number | undefined,
    value: Buffer | null,
    key: Buffer | null | undefined,
    headers: Record<string, Buffer | string>[] | undefined,
    opaque?: unknown,
  ): void {
    this.producer.produce(
      topic,
      partition ?? null,
      value,
      key ?? undefined,
      null,
      opaque,
      headers as never,
    );
  }

  sendOffsets(
    offsets: { topic: string; partition: number; offset: number }[],
    consumer: unknown,
    timeoutMs: number,
  ): Promise<void> {
    return this.call('sendOffsetsToTransaction', (cb) =>
      this.producer.sendOffsetsToTransaction(
        offsets as Kafka.TopicPartitionOffset[],
        consumer as Kafka.KafkaConsumer,
        timeoutMs,
        cb,
      ),
    );
  }

  commit(timeoutMs: number): Promise<void> {
    return this.call('commitTransaction', (cb) => this.producer.commitTransaction(timeoutMs, cb));
  }

  abort(timeoutMs: number): Promise<void> {
    return this.call('abortTransaction', (cb) => this.producer.abortTransaction(timeoutMs, cb));
  }

  /** Disconnects (bounded); an open transaction is abandoned to the broker's timeout. */
  /** Disconnects, waiting for the answer up to `waitMs`. */
  async close(waitMs = 10_000): Promise<void> {
    this.oauth?.stop();
    this.producer.setPollInterval(0);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, waitMs);
      try {
        this.producer.disconnect(() => {
          clearTimeout(timer);
          resolve();
        });
      } catch {
        clearTimeout(timer);
        resolve();
      }
    });
  }

  private call(what: string, fn: (cb: (err: unknown) => void) => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = (err: unknown): void => {
        if (err) reject(new TxnCallError(classifyTxnError(err, `${what} failed`)));
        else resolve();
      };
      try {
        fn(done);
      } catch (err) {
        done(err);
      }
    });
  }
}
