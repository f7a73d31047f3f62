/**
 * The dead-letter writer: a node-rdkafka Producer with delivery reports, where `send()` resolves
 * only once the broker confirmed the record (so the failed message's offset may then count as done).
 */
import type { ClientOAuth } from '../binding/oauth-bearer';
import type * as Kafka from 'node-rdkafka';
import type { Logger } from '../../logger';
import { translateLibrdkafkaConfigError } from '../settings/librdkafka-settings';
import { ConnectError, TimeoutError } from '../../errors';
import type { KafkaMessage } from '../../types';
import { Code, toKafkaError } from '../binding/rdkafka';
import { timerDelay } from '../loop/timers';
import { DEAD_LETTER_HEADERS } from '../../dead-letter-headers';

export { DEAD_LETTER_HEADERS };

/** The Producer methods the writer uses. @internal */
export type RdKafkaProducer = Pick<
  Kafka.Producer,
  'connect' | 'disconnect' | 'produce' | 'flush' | 'setPollInterval' | 'on' | 'isConnected'
>;

/** Builds the native producer; tests inject a fake. @internal */
export type ProducerFactory = (globalConfig: Record<string, unknown>) => RdKafkaProducer;

/** The producer factory of a binding (`binding` option; node-rdkafka by default). @internal */
export const producerFactoryOf =
  (binding: { readonly Producer: typeof Kafka.Producer }): ProducerFactory =>
  (globalConfig) =>
    new binding.Producer(globalConfig as Kafka.ProducerGlobalConfig, {});

/** Why a message is dead-lettered. @internal */
export interface DeadLetterReason {
  readonly error: unknown;
  readonly attempts: number;
  /** `handler`, or `key`/`value` for a payload that could not be decoded. */
  readonly stage: 'handler' | 'key' | 'value';
}

interface Pending {
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

const POLL_INTERVAL_MS = 50;
const QUEUE_FULL_BACKOFF_MS = 50;

/** @internal */
export class DeadLetterWriter {
  private readonly producer: RdKafkaProducer;
  private readonly pending = new Map<number, Pending>();
  private readonly messageTimeoutMs: number;
  private nextId = 1;
  private connecting: Promise<void> | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(
    readonly topic: string,
    private readonly config: Record<string, unknown>,
    private readonly group: string,
    private readonly connectTimeoutMs: number,
    private readonly logger: Logger,
    factory: ProducerFactory,
    /** The consumer's OAUTHBEARER provider, kept supplying the producer. */
    private readonly oauth?: ClientOAuth,
  ) {
    // `delivery.timeout.ms` is librdkafka's alias of `message.timeout.ms`.
    this.messageTimeoutMs = Number(
      config['delivery.timeout.ms'] ?? config['message.timeout.ms'] ?? 300_000,
    );
    try {
      this.producer = factory({ ...config });
    } catch (err) {
      const e = translateLibrdkafkaConfigError(err);
      throw Object.assign(e, {
        message: `deadLetter.producerConfig: ${e.message}`,
        key: `deadLetter.producerConfig.${e.key}`,
      });
    }
    this.producer.on('delivery-report', (err, report) => {
      const id = (report as { opaque?: unknown }).opaque;
      const entry = typeof id === 'number' ? this.pending.get(id) : undefined;
      if (!entry || typeof id !== 'number') return;
      this.pending.delete(id);
      clearTimeout(entry.timer);
      if (err) entry.reject(toKafkaError(err, `dead-letter write to ${this.topic} failed`));
      else entry.resolve();
    });
    this.producer.on('event.error', (err) => {
      this.logger.warn({ err, topic: this.topic }, 'dead-letter producer error');
    });
  }

  /** Connects in the background; `send()` waits for it (and retries a connect that failed). */
  start(): Promise<void> {
    this.connecting ??= (async () => {
      await this.oauth?.before(this.producer);
      await this.connectNow();
    })();
    const attempt = this.connecting;
    // A failed connect surfaces at the next send(), which tries again; never unhandled meanwhile.
    attempt.catch(() => {
      if (this.connecting === attempt) this.connecting = undefined;
    });
    return attempt;
  }

  private connectNow(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.producer.connect({ timeout: this.connectTimeoutMs }, (err) => {
        if (err) {
          reject(
            new ConnectError(
              `The dead-letter producer could not connect within ${this.connectTimeoutMs} ms: ${err.message}`,
              { cause: err, retriable: true },
            ),
          );
          return;
        }
        this.producer.setPollInterval(POLL_INTERVAL_MS);
        resolve();
      });
    });
  }

  /**
   * Writes `message` with its key, value and headers plus the {@link DEAD_LETTER_HEADERS}; resolves
   * when the broker confirmed it, rejects when it failed for good (after librdkafka's own retries,
   * within `message.timeout.ms`).
   */
  async send(message: KafkaMessage, reason: DeadLetterReason): Promise<void> {
    await this.start();
    if (this.closed) throw new Error('the dead-letter producer is closed');
    const headers = [
      ...message.headers.map(([k, v]) => ({ [k]: v })),
      ...Object.entries(this.describe(message, reason)).map(([k, v]) => ({ [k]: v })),
    ];
    const id = this.nextId++;
    const confirmed = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => {
          this.pending.delete(id);
          reject(
            new TimeoutError(
              `No delivery report for the dead-letter write to ${this.topic} within ${this.messageTimeoutMs + 5000} ms`,
              'dead-letter write',
              this.messageTimeoutMs + 5000,
            ),
          );
        },
        timerDelay(this.messageTimeoutMs + 5000),
      );
      this.pending.set(id, { resolve, reject, timer });
    });
    const deadline = Date.now() + this.messageTimeoutMs;
    for (;;) {
      try {
        this.producer.produce(
          this.topic,
          null,
          message.value,
          message.key ?? undefined,
          // Stamped now: an old CreateTime could let retention delete the record right after
          // its offset is committed. The original time is in the dlq.original.timestamp header.
          null,
          id,
          headers,
        );
        break;
      } catch (err) {
        const e = toKafkaError(err, `dead-letter write to ${this.topic} refused`);
        if (e.kafkaCode === Code.QUEUE_FULL && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, QUEUE_FULL_BACKOFF_MS));
          continue;
        }
        const entry = this.pending.get(id);
        if (entry) {
          clearTimeout(entry.timer);
          this.pending.delete(id);
        }
        throw e;
      }
    }
    return confirmed;
  }

  private describe(message: KafkaMessage, reason: DeadLetterReason): Record<string, string> {
    const err = reason.error;
    const name = err instanceof Error ? err.name : typeof err;
    const text = err instanceof Error ? err.message : String(err);
    const code = (err as { code?: unknown } | null)?.code;
    const h = DEAD_LETTER_HEADERS;
    const out: Record<string, string> = {
      [h.topic]: message.topic,
      [h.partition]: String(message.partition),
      [h.offset]: String(message.offset),
      [h.group]: this.group,
      [h.errorName]: name,
      [h.errorMessage]: text.slice(0, 4096),
      [h.stage]: reason.stage,
      [h.attempts]: String(reason.attempts),
      [h.failedAt]: new Date().toISOString(),
    };
    if (message.timestamp !== undefined) out[h.timestamp] = String(message.timestamp);
    if (typeof code === 'string' || typeof code === 'number') out[h.errorCode] = String(code);
    return out;
  }

  /** Flushes what is queued (bounded) and disconnects. Unconfirmed writes reject. Idempotent. */
  close(timeoutMs: number): Promise<void> {
    this.closing ??= this.doClose(timeoutMs);
    return this.closing;
  }

  private async doClose(timeoutMs: number): Promise<void> {
    this.closed = true;
    this.oauth?.stop();
    const connected = await this.connecting?.then(
      () => true,
      () => false,
    );
    if (connected) {
      await new Promise<void>((resolve) => {
        try {
          this.producer.flush(Math.max(1, timeoutMs), () => resolve());
        } catch {
          resolve();
        }
      });
      this.producer.setPollInterval(0);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 10_000);
        this.producer.disconnect(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    for (const [id, entry] of this.pending) {
      clearTimeout(entry.timer);
      entry.reject(
        new Error('the dead-letter producer closed before the broker confirmed the write'),
      );
      this.pending.delete(id);
    }
  }
}
