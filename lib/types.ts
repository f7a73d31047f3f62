import type { Observable, ObservableInput, OperatorFunction } from 'rxjs';

export type {
  ConsumerEvent,
  ConsumerEventBase,
  ConsumerEventType,
  PartitionCommitResult,
  RebalanceEvent,
  RebalanceEventBase,
  RebalanceEventType,
  RebalanceProtocol,
  RevokeTransaction,
} from './events';

/** A topic and partition. */
export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

/** A Kafka record as handed to handlers and partition pipelines. */
export interface KafkaMessage {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Ordered `[key, value]` pairs; duplicate keys are kept. */
  readonly headers: ReadonlyArray<readonly [string, Buffer]>;
  /** Record timestamp in ms since the epoch, when the record has one. */
  readonly timestamp: number | undefined;
  /** Payload size in bytes. */
  readonly size: number;
  /** The assignment generation this message was delivered in. */
  readonly generation: number;
  /**
   * Aborted when the partition is lost, its drain deadline passes, or a `seek()` replaces its
   * stream. One signal per partition stream (a seek starts a new one): pass it to the I/O your
   * handler does so it stops when the work no longer counts. It also tells the stream's messages
   * apart: an `ack()` counts only for a message carrying its stream's signal.
   */
  readonly signal: AbortSignal;
}

/** How a message left `process()`: handled, skipped after failing, or written to the dead-letter topic. */
export type ProcessedStatus = 'processed' | 'skipped' | 'dead-lettered';

/**
 * What `process()` emits for each message it finished: its handler succeeded (`processed`), or it
 * failed for good and the failure policy `skip`ped it or wrote it to the dead-letter topic. Every
 * emitted offset counts as done and will be committed.
 */
export interface Processed<R = unknown> {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly generation: number;
  readonly status: ProcessedStatus;
  /** Handler calls made for this message (0 when its key or value could not be decoded). */
  readonly attempts: number;
  /** The handler's result (last value for an Observable handler); undefined unless `processed`. */
  readonly result: R | undefined;
  /** Why the message was skipped or dead-lettered. */
  readonly error?: unknown;
}

/** A handler's return: a plain value, a Promise, or an Observable (processed when it completes). */
export type HandlerResult<R> = R | Promise<R> | Observable<R>;

/**
 * A message handler for `process()`: the message counts as processed when the returned Promise
 * resolves, the Observable completes, or a plain value is returned; a throw, rejection or error is a
 * failure.
 */
export type MessageHandler<R = unknown, K = Buffer | null, V = Buffer | null> = (
  message: DecodedMessage<K, V>,
) => HandlerResult<R>;

/**
 * A message whose key and value went through the `process()` deserializers. Without deserializers
 * it is the plain {@link KafkaMessage} (`Buffer | null` key and value). `size` stays the payload's
 * size in bytes.
 */
export type DecodedMessage<K = Buffer | null, V = Buffer | null> = Omit<
  KafkaMessage,
  'key' | 'value'
> & {
  readonly key: K;
  readonly value: V;
};

/**
 * Decodes a key or value. Throw (or reject) to reject the payload: the message then follows the
 * failure policy (never retried) with a `DeserializationError`. It may return a Promise — a
 * schema-registry decoder that fetches a schema on first use — and the message's handler then runs
 * once it resolves; synchronous deserializers cost nothing extra.
 */
export type Deserializer<T> = (data: Buffer | null, message: KafkaMessage) => T | PromiseLike<T>;

/**
 * A deserializer, or a built-in one by name: `'buffer'` (as is), `'string'` (UTF-8, `null` stays
 * `null`), `'json'` (UTF-8 JSON, `null` stays `null`; see `deserializers.json` for validation).
 */
export type DeserializerSpec<T> = Deserializer<T> | 'buffer' | 'string' | 'json';

// An option added here goes into its list in lib/internal/settings/option-names.ts too (the type
// check insists): a name missing there is refused as unknown.
/**
 * Retries of a failing handler: exponential backoff with jitter, `delay × factor^n` capped at
 * `maxDelayMs`. Any other name is a `ConfigError`.
 */
export interface RetryOptions {
  /** Retries after the first attempt (0 disables retrying). @default 3 */
  count?: number;
  /** Delay before the first retry, in ms. @default 100 */
  initialDelayMs?: number;
  /** Longest delay between two attempts, in ms. @default 5000 */
  maxDelayMs?: number;
  /** Growth of the delay per retry. @default 2 */
  factor?: number;
  /** Random spread of each delay, as a fraction of it (0.2 = ±20%). @default 0.2 */
  jitter?: number;
  /**
   * Whether a failure is worth retrying, asked before each retry with the handler's error and the
   * message (for `processBatch()`, the batch's first message). `false` (any falsy answer) skips
   * the retries left and applies `onFailure` at once — for errors no retry can fix (a validation
   * error, a 4xx answer). It must answer synchronously (a Promise is warned about and retried). A
   * predicate that throws counts as `false` (its error is logged). Deserialization errors are
   * never retried, whatever it says.
   * @default every handler error is retried
   */
  when?: (error: unknown, message: KafkaMessage) => boolean;
}

/**
 * What happens to a message whose handler failed for good (retries exhausted) or whose payload
 * could not be decoded:
 * - `stop`: commit everything before it, close the consumer, error `process()` with the coordinates;
 * - `dead-letter`: write it to `deadLetter.topic` (confirmed by the broker), then count it as done;
 * - `skip`: log it at error level, count it, and go on.
 */
export type FailurePolicy = 'stop' | 'skip' | 'dead-letter';

// An option added here goes into its list in lib/internal/settings/option-names.ts too (the type
// check insists): a name missing there is refused as unknown.
/**
 * Where and how failed messages are written under `onFailure: 'dead-letter'`. Any other name is a
 * `ConfigError`.
 */
export interface DeadLetterOptions {
  /** The dead-letter topic. Must exist (or be auto-created by the cluster) and differ from the input topics. */
  topic: string;
  /**
   * librdkafka producer settings layered over the defaults (the consumer's `bootstrap.servers`,
   * `client.id`, `security.protocol`, `sasl.*` and `ssl.*`; `enable.idempotence=true`;
   * `message.timeout.ms` = half the drain deadline, at most 30000). `message.timeout.ms` must stay
   * below `drainTimeoutMs`; `dr_cb`/`dr_msg_cb` are owned by the library.
   */
  producerConfig?: Record<string, unknown>;
}

/** Order of processing within a partition; see {@link ProcessOptions.ordering}. */
export type Ordering = 'partition' | 'key' | 'none';

// An option added here goes into its list in lib/internal/settings/option-names.ts too (the type
// check insists): a name missing there is refused as unknown.
/** Options of `process()`. Any other option name is a `ConfigError` naming the closest known one. */
export interface ProcessOptions<K = Buffer | null, V = Buffer | null> {
  /** Most handlers in flight across all partitions; a fair pool. @default 64 */
  concurrency?: number;
  /** Most handlers in flight within one partition; 1 keeps offset order. @default 1 */
  partitionConcurrency?: number;
  /**
   * Order of processing within a partition:
   * - `'partition'`: offset order, one message at a time (needs `partitionConcurrency: 1`);
   * - `'key'`: messages with the same key in offset order, different keys concurrently (up to
   *   `partitionConcurrency`); messages without a key count as one key;
   * - `'none'`: any order, up to `partitionConcurrency`.
   * The committed offset never passes unfinished work, whatever the order.
   * @default 'partition' with `partitionConcurrency: 1`, else 'none'
   */
  ordering?: Ordering;
  /** Decodes each key before the handler sees it. @default 'buffer' */
  key?: DeserializerSpec<K>;
  /** Decodes each value before the handler sees it. @default 'buffer' */
  value?: DeserializerSpec<V>;
  /**
   * Retries of a failing handler (each attempt calls it afresh), as a count or with backoff
   * settings; `false` or 0 disables. A retry waiting when its partition is revoked keeps retrying
   * within the drain deadline (the message is still this member's work); at the deadline, a loss or
   * a seek it is abandoned: the message stays uncommitted and the next owner runs it.
   * @default { count: 3, initialDelayMs: 100 }
   */
  retry?: number | RetryOptions | false;
  /**
   * What to do with a message that failed for good. @default 'stop' (or 'dead-letter' when
   * `deadLetter` is set): nothing is committed past a failed message unless you choose otherwise.
   */
  onFailure?: FailurePolicy;
  /** The dead-letter topic and producer settings; required by `onFailure: 'dead-letter'`. */
  deadLetter?: DeadLetterOptions;
}

/**
 * One partition of one assignment, as a stream. Its `messages$` completes when the partition is
 * revoked (or lost, or the consumer closes). Mark each message finished with `ack()` (or the
 * `acknowledge()` operator); the library commits up to the contiguous finished prefix, and on a
 * revoke waits until the pipeline is drained before committing and releasing the partition.
 *
 * The pipeline is drained when the Observable returned by `acknowledge()` finalizes (completes,
 * errors or is unsubscribed), or when `messages$` completed and every delivered message was acked.
 */
export interface PartitionStream extends TopicPartition {
  readonly generation: number;
  /** Aborted when the partition is lost or its drain deadline passes. */
  readonly signal: AbortSignal;
  /** The partition's messages, in offset order. Single subscriber. */
  readonly messages$: Observable<KafkaMessage>;
  /** False once the partition is being revoked: skip starting work on buffered messages. */
  readonly active: boolean;
  /**
   * Like `mergeMap(project, concurrency)` over this partition's messages (or batches of them),
   * except that values still waiting for a slot when the partition is revoked are dropped (never started, never
   * committed; the next owner gets them). Use it instead of `mergeMap`/`concatMap`, whose buffers
   * would otherwise run every buffered message before the partition can be released.
   */
  run<T, R>(
    project: (value: T) => ObservableInput<R>,
    concurrency?: number,
  ): OperatorFunction<T, R>;
  /**
   * Marks a message finished (its offset may be committed once everything before it is). Pass the
   * message the stream delivered (or a copy that keeps its fields, `signal` included): a message
   * of another stream — another partition, an earlier assignment, the stream a seek replaced — is
   * ignored.
   */
  ack(message: KafkaMessage): void;
  /**
   * An operator that acks every message it sees and, when it finalizes, tells the library this
   * partition's pipeline is drained. Put it last in the partition's pipeline.
   */
  acknowledge<T extends KafkaMessage>(): OperatorFunction<T, T>;
}

/**
 * Where a partition starts (or, with `seek()`, continues): the group's committed offset, the
 * earliest or latest offset, an explicit offset, or the first offset at or after a timestamp (ms
 * since the epoch; the end of the partition when no record is that recent).
 */
export type StartPosition =
  | 'committed'
  | 'earliest'
  | 'latest'
  | { readonly offset: number }
  | { readonly timestamp: number };

/** A partition being assigned, as the `onAssign` hook sees it. */
export interface AssignedPartition extends TopicPartition {
  /** The group's committed offset, or undefined when it has none. */
  readonly committed: number | undefined;
  /** The assignment generation. */
  readonly generation: number;
}

/** One batch of one partition's messages, in offset order, for `processBatch()`. */
export interface MessageBatch<K = Buffer | null, V = Buffer | null> extends TopicPartition {
  readonly generation: number;
  /** The first message's offset. */
  readonly offset: number;
  /** The last message's offset. */
  readonly lastOffset: number;
  readonly messages: readonly DecodedMessage<K, V>[];
  /** Aborted when the partition is lost or its drain deadline passes. */
  readonly signal: AbortSignal;
}

/** A batch handler for `processBatch()`: the whole batch is processed when it succeeds. */
export type BatchHandler<R = unknown, K = Buffer | null, V = Buffer | null> = (
  batch: MessageBatch<K, V>,
) => HandlerResult<R>;

// An option added here goes into its list in lib/internal/settings/option-names.ts too (the type
// check insists): a name missing there is refused as unknown.
/**
 * Options of `processBatch()`: those of `process()` plus the batch bounds. Any other option name is
 * a `ConfigError` naming the closest known one.
 */
export interface BatchProcessOptions<K = Buffer | null, V = Buffer | null> extends ProcessOptions<
  K,
  V
> {
  /** Most messages per batch. @default 100 */
  maxSize?: number;
  /** Longest wait for a batch to fill after its first message, in ms. @default 100 */
  maxWaitMs?: number;
}

/** What `processBatch()` emits for each finished batch. */
export interface ProcessedBatch<R = unknown> extends TopicPartition {
  readonly generation: number;
  /** The offsets of the batch's messages, in order. */
  readonly offsets: readonly number[];
  readonly status: ProcessedStatus;
  /** Handler calls made for this batch. */
  readonly attempts: number;
  /** The handler's result; undefined unless `processed`. */
  readonly result: R | undefined;
  /** Why the batch was skipped or dead-lettered. */
  readonly error?: unknown;
}
