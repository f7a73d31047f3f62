/**
 * The error family of the library. Every error has a stable string `code` (the contract users match
 * on; `instanceof` works too: the ESM entry point re-exports the CommonJS build, so there is one
 * copy of each class however the package is loaded), a `retriable` flag, an optional `cause`, and
 * Kafka coordinates where they apply.
 */

/** Stable error codes, one per class. */
export const ErrorCode = {
  Config: 'ERR_RKC_CONFIG',
  NativeFeatureMissing: 'ERR_RKC_NATIVE_FEATURE_MISSING',
  Connect: 'ERR_RKC_CONNECT',
  Kafka: 'ERR_RKC_KAFKA',
  Commit: 'ERR_RKC_COMMIT',
  AlreadySubscribed: 'ERR_RKC_ALREADY_SUBSCRIBED',
  Closed: 'ERR_RKC_CLOSED',
  Handler: 'ERR_RKC_HANDLER',
  Timeout: 'ERR_RKC_TIMEOUT',
  Authentication: 'ERR_RKC_AUTHENTICATION',
  Deserialization: 'ERR_RKC_DESERIALIZATION',
  DeadLetter: 'ERR_RKC_DEAD_LETTER',
  StartPosition: 'ERR_RKC_START_POSITION',
  NotAssigned: 'ERR_RKC_NOT_ASSIGNED',
  FencedInstance: 'ERR_RKC_FENCED_INSTANCE',
  ProducerFenced: 'ERR_RKC_PRODUCER_FENCED',
  Transaction: 'ERR_RKC_TRANSACTION',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Where in Kafka an error happened, when it concerns one message or partition. */
export interface KafkaCoordinates {
  readonly topic: string;
  readonly partition: number;
  readonly offset?: number;
}

interface BaseOptions {
  cause?: unknown;
  retriable?: boolean;
}

/** Base class of every error this library throws or emits. */
export abstract class ReactiveKafkaError extends Error {
  abstract readonly code: ErrorCode;
  readonly retriable: boolean;

  constructor(message: string, options: BaseOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.retriable = options.retriable ?? false;
  }
}

/** An invalid, unknown or conflicting configuration value. `key` names the offending setting. */
export class ConfigError extends ReactiveKafkaError {
  readonly code = ErrorCode.Config;
  constructor(
    message: string,
    readonly key: string,
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/**
 * The installed node-rdkafka was compiled without a feature the library relies on (for example
 * zstd, because `libzstd-dev` was absent when librdkafka was built).
 */
export class NativeFeatureMissingError extends ReactiveKafkaError {
  readonly code = ErrorCode.NativeFeatureMissing;
  constructor(
    message: string,
    readonly missing: readonly string[],
  ) {
    super(message);
  }
}

/** The client could not connect (or authenticate) within the configured time. */
export class ConnectError extends ReactiveKafkaError {
  readonly code = ErrorCode.Connect;
}

/** An error reported by librdkafka, normalised. `kafkaCode` is librdkafka's numeric code. */
export class KafkaClientError extends ReactiveKafkaError {
  readonly code = ErrorCode.Kafka;
  readonly kafkaCode: number;
  readonly fatal: boolean;
  constructor(
    message: string,
    details: { kafkaCode: number; fatal?: boolean; retriable?: boolean; cause?: unknown },
  ) {
    super(message, { cause: details.cause, retriable: details.retriable ?? false });
    this.kafkaCode = details.kafkaCode;
    this.fatal = details.fatal ?? false;
  }
}

/**
 * The transactional producer of `processTransactional()` was fenced: another producer with the same
 * `transactional.id` started (two live instances share an id, or a restarted instance took over), or
 * the broker bumped its epoch. Fatal: the consumer stops; the open transaction is aborted by the
 * broker, so nothing of it becomes visible, and the partitions' next owners redo that work.
 */
export class ProducerFencedError extends ReactiveKafkaError {
  readonly code = ErrorCode.ProducerFenced;
  constructor(
    message: string,
    readonly transactionalId: string,
    readonly kafkaCode: number,
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/**
 * A transactional failure `processTransactional()` cannot recover from (a fatal producer error other
 * than fencing, such as a refused `TransactionalIdWrite` authorization). The consumer stops; the open
 * transaction is aborted (or left to the broker to abort), so none of it becomes visible.
 */
export class TransactionError extends ReactiveKafkaError {
  readonly code = ErrorCode.Transaction;
  /** The input message whose output the producer or the broker refuses, when one is to blame. */
  readonly input: KafkaCoordinates | undefined;
  /** The topic of the refused output record. */
  readonly outputTopic: string | undefined;
  constructor(
    message: string,
    readonly transactionalId: string,
    readonly kafkaCode: number | undefined,
    options: BaseOptions & { input?: KafkaCoordinates; outputTopic?: string } = {},
  ) {
    super(message, options);
    this.input = options.input;
    this.outputTopic = options.outputTopic;
  }
}

/** An offset commit the broker did not confirm. */
export class CommitError extends ReactiveKafkaError {
  readonly code = ErrorCode.Commit;
  constructor(
    message: string,
    readonly kafkaCode: number | undefined,
    readonly partitions: readonly KafkaCoordinates[],
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/**
 * A second pipeline was subscribed on a consumer that already runs one, or a second subscriber on
 * a partition's `messages$`.
 */
export class AlreadySubscribedError extends ReactiveKafkaError {
  readonly code = ErrorCode.AlreadySubscribed;
}

/** The consumer was closed (or is closing) and cannot do what was asked. */
export class ClosedError extends ReactiveKafkaError {
  readonly code = ErrorCode.Closed;
}

/**
 * A message handler failed for good (after its retries). Carries the message coordinates, the
 * number of attempts, and the handler's last error as `cause`.
 */
export class HandlerError extends ReactiveKafkaError {
  readonly code = ErrorCode.Handler;
  /** Handler calls made for this message (1 + retries). */
  readonly attempts: number;
  constructor(
    message: string,
    readonly coordinates: KafkaCoordinates,
    options: BaseOptions & { attempts?: number } = {},
  ) {
    super(message, options);
    this.attempts = options.attempts ?? 1;
  }
}

/**
 * A message's key or value could not be decoded (or failed the user's validation). Never retried;
 * it follows the `process()` failure policy. `cause` is the decoder's error.
 */
export class DeserializationError extends ReactiveKafkaError {
  readonly code = ErrorCode.Deserialization;
  constructor(
    message: string,
    readonly coordinates: KafkaCoordinates,
    /** Which part failed to decode. */
    readonly part: 'key' | 'value',
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/**
 * A failed message could not be written to the dead-letter topic (the broker never confirmed it).
 * The consumer then stops as with `onFailure: 'stop'`: `cause` is the delivery error and `failure`
 * the error that sent the message to the dead-letter topic.
 */
export class DeadLetterError extends ReactiveKafkaError {
  readonly code = ErrorCode.DeadLetter;
  constructor(
    message: string,
    readonly coordinates: KafkaCoordinates,
    readonly deadLetterTopic: string,
    /** Why the message was being dead-lettered. */
    readonly failure: unknown,
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/**
 * The cluster refused the client's credentials (SASL/SSL). librdkafka treats this as transient and
 * retries forever; the library ends the consumer instead. `kafkaCode` is librdkafka's code.
 */
export class AuthenticationError extends ReactiveKafkaError {
  readonly code = ErrorCode.Authentication;
  constructor(
    message: string,
    readonly kafkaCode: number,
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/**
 * Another consumer of the group uses this consumer's `group.instance.id` (static membership), and
 * the broker refused this one for good: under KIP-848 a newcomer whose instance id is still held
 * gets UNRELEASED_INSTANCE_ID; under the classic protocol the older member is fenced with
 * FENCED_INSTANCE_ID when the newcomer joins. Fatal: librdkafka stops the client. Give every
 * static member its own `group.instance.id`. `kafkaCode` is the broker's code.
 */
export class FencedInstanceError extends ReactiveKafkaError {
  readonly code = ErrorCode.FencedInstance;
  constructor(
    message: string,
    readonly kafkaCode: number,
    /** The contested `group.instance.id`. */
    readonly groupInstanceId: string,
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/** A bounded wait (connect, drain, close, commit) ran out. */
export class TimeoutError extends ReactiveKafkaError {
  readonly code = ErrorCode.Timeout;
  constructor(
    message: string,
    readonly operation: string,
    readonly timeoutMs: number,
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/**
 * A start position (from the `onAssign` hook or `seek()`) could not be used: the hook threw, the
 * position is malformed, or it could not be resolved (no committed offset, lookup failed).
 */
export class StartPositionError extends ReactiveKafkaError {
  readonly code = ErrorCode.StartPosition;
  constructor(
    message: string,
    readonly coordinates: KafkaCoordinates,
    options: BaseOptions = {},
  ) {
    super(message, options);
  }
}

/** A partition operation (`seek`) named a partition this consumer does not own right now. */
export class NotAssignedError extends ReactiveKafkaError {
  readonly code = ErrorCode.NotAssigned;
  constructor(
    message: string,
    readonly coordinates: KafkaCoordinates,
  ) {
    super(message, { retriable: true });
  }
}

/** True when `err` is one of this library's errors with the given code (works across module copies). */
export function hasErrorCode(err: unknown, code: ErrorCode): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}
