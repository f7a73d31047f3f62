/**
 * Where completed-offset memories live: a compacted Kafka topic owned by the library, one record
 * per (group, topic, partition), written and confirmed before the offset commit it belongs to, read
 * on assignment. node-rdkafka 3.x can neither send nor read commit metadata (the binding drops it;
 * see integration/binding-contract.test.ts), so Kafka's own offset metadata is not an option.
 */
import type * as Kafka from 'node-rdkafka';
import type { KafkaBinding } from '../../binding';
import type { Logger } from '../../logger';
import type { TopicPartition } from '../../types';
import { decodeCompleted, encodeCompleted } from './completed-codec';
import type { CompletedMemory } from './completed-codec';
import { toKafkaError, tpKey } from '../binding/rdkafka';
import { timerDelay } from '../loop/timers';

/** Reads and writes completed-offset memories. */
export interface CompletedStore {
  /** The memories of these partitions (by `tpKey`), where the store has one. */
  load(partitions: readonly TopicPartition[]): Promise<Map<string, CompletedMemory>>;
  /** Writes memories; resolves once the broker confirmed every one. */
  save(entries: readonly (TopicPartition & CompletedMemory)[]): Promise<void>;
  close(): Promise<void>;
}

/** Settings of the Kafka-backed store. */
export interface KafkaStoreSettings {
  readonly topic: string;
  readonly group: string;
  readonly maxRuns: number;
  /** Connection and security settings (bootstrap.servers, sasl.*, ssl.*…). */
  readonly connection: Record<string, unknown>;
  readonly timeoutMs: number;
  /** The module its clients are built from (the consumer's `binding`). */
  readonly binding: KafkaBinding;
}

const recordKey = (group: string, tp: TopicPartition): string =>
  `${group}\u0000${tp.topic}\u0000${tp.partition}`;

export class KafkaCompletedStore implements CompletedStore {
  private producer: Kafka.Producer | undefined;
  private producerReady: Promise<Kafka.Producer> | undefined;
  private readonly pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  private nextId = 1;
  private topicReady: Promise<void> | undefined;

  constructor(
    private readonly settings: KafkaStoreSettings,
    private readonly logger: Logger,
  ) {}

  /** Creates the compacted topic if it does not exist (an existing one is used as it is). */
  private ensureTopic(): Promise<void> {
    this.topicReady ??= new Promise<void>((resolve) => {
      const admin = this.settings.binding.AdminClient.create({
        ...this.settings.connection,
      } as never);
      admin.createTopic(
        {
          topic: this.settings.topic,
          num_partitions: 1,
          replication_factor: -1,
          config: { 'cleanup.policy': 'compact', 'segment.ms': '600000' },
        },
        this.settings.timeoutMs,
        (err) => {
          admin.disconnect();
          if (err && !/already exists/i.test(err.message)) {
            this.logger.warn(
              { err, topic: this.settings.topic },
              'could not create the completed-offsets topic (it may exist already, or be created by the cluster)',
            );
          }
          resolve();
        },
      );
    });
    return this.topicReady;
  }

  private connectProducer(): Promise<Kafka.Producer> {
    this.producerReady ??= (async () => {
      await this.ensureTopic();
      const producer = new this.settings.binding.Producer(
        {
          ...this.settings.connection,
          dr_cb: true,
          'enable.idempotence': true,
          'linger.ms': 0,
          'message.timeout.ms': this.settings.timeoutMs,
        } as Kafka.ProducerGlobalConfig,
        {},
      );
      producer.on('delivery-report', (err, report) => {
        const id = (report as { opaque?: unknown }).opaque;
        const entry = typeof id === 'number' ? this.pending.get(id) : undefined;
        if (!entry || typeof id !== 'number') return;
        this.pending.delete(id);
        if (err) entry.reject(toKafkaError(err, 'completed-offsets write failed'));
        else entry.resolve();
      });
      await new Promise<void>((resolve, reject) =>
        producer.connect({ timeout: this.settings.timeoutMs }, (err) =>
          err ? reject(toKafkaError(err, 'completed-offsets producer connect failed')) : resolve(),
        ),
      );
      producer.setPollInterval(20);
      this.producer = producer;
      return producer;
    })();
    const attempt = this.producerReady;
    attempt.catch(() => {
      if (this.producerReady === attempt) this.producerReady = undefined;
    });
    return attempt;
  }

  async save(entries: readonly (TopicPartition & CompletedMemory)[]): Promise<void> {
    if (entries.length === 0) return;
    const producer = await this.connectProducer();
    await Promise.all(
      entries.map(
        (e) =>
          new Promise<void>((resolve, reject) => {
            const id = this.nextId++;
            const timer = setTimeout(
              () => {
                this.pending.delete(id);
                reject(new Error('completed-offsets write not confirmed in time'));
              },
              timerDelay(this.settings.timeoutMs + 2000),
            );
            this.pending.set(id, {
              resolve: () => {
                clearTimeout(timer);
                resolve();
              },
              reject: (err) => {
                clearTimeout(timer);
                reject(err);
              },
            });
            try {
              producer.produce(
                this.settings.topic,
                0,
                encodeCompleted(e, this.settings.maxRuns),
                // A Buffer: node-rdkafka cuts string keys at the first NUL.
                Buffer.from(recordKey(this.settings.group, e)),
                null,
                id,
              );
            } catch (err) {
              clearTimeout(timer);
              this.pending.delete(id);
              reject(toKafkaError(err, 'completed-offsets write refused'));
            }
          }),
      ),
    );
  }

  /** Reads the store topic from its start to its end and keeps the last memory of each partition. */
  async load(partitions: readonly TopicPartition[]): Promise<Map<string, CompletedMemory>> {
    const out = new Map<string, CompletedMemory>();
    if (partitions.length === 0) return out;
    await this.ensureTopic();
    const wanted = new Map(partitions.map((p) => [recordKey(this.settings.group, p), p]));
    const reader = new this.settings.binding.KafkaConsumer(
      {
        ...this.settings.connection,
        'group.id': `${this.settings.group}.completed-offsets-reader`,
        'enable.auto.commit': false,
      } as Kafka.ConsumerGlobalConfig,
      { 'auto.offset.reset': 'earliest' },
    );
    const timeout = this.settings.timeoutMs;
    await new Promise<void>((resolve, reject) =>
      reader.connect({ timeout }, (err) =>
        err ? reject(toKafkaError(err, 'completed-offsets reader connect failed')) : resolve(),
      ),
    );
    try {
      const high = await new Promise<number>((resolve, reject) =>
        reader.queryWatermarkOffsets(this.settings.topic, 0, timeout, (err, w) =>
          err ? reject(toKafkaError(err, 'completed-offsets watermarks')) : resolve(w.highOffset),
        ),
      );
      if (high <= 0) return out;
      reader.assign([{ topic: this.settings.topic, partition: 0, offset: -2 }] as never);
      reader.setDefaultConsumeTimeout(100);
      const deadline = Date.now() + timeout;
      let next = 0;
      while (next < high) {
        if (Date.now() > deadline) throw new Error('reading the completed-offsets topic timed out');
        const batch = await new Promise<Kafka.Message[]>((resolve) =>
          reader.consume(500, (err, messages) => resolve(err ? [] : (messages ?? []))),
        );
        for (const m of batch) {
          next = m.offset + 1;
          const key = m.key?.toString();
          const tp = key === undefined ? undefined : wanted.get(key);
          if (!tp) continue;
          if (m.value === null || m.value.length === 0) {
            out.delete(tpKey(tp.topic, tp.partition));
            continue;
          }
          try {
            out.set(tpKey(tp.topic, tp.partition), decodeCompleted(m.value));
          } catch (err) {
            this.logger.warn({ err, key }, 'ignored an unreadable completed-offsets record');
          }
        }
      }
      return out;
    } finally {
      await new Promise<void>((resolve) => reader.disconnect(() => resolve()));
    }
  }

  async close(): Promise<void> {
    const producer = this.producer;
    if (!producer) return;
    this.producer = undefined;
    producer.setPollInterval(0);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 10_000);
      producer.disconnect(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
