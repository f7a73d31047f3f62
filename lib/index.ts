export {
  ErrorCode,
  ReactiveKafkaError,
  ConfigError,
  NativeFeatureMissingError,
  ConnectError,
  KafkaClientError,
  CommitError,
  AlreadySubscribedError,
  ClosedError,
  HandlerError,
  TimeoutError,
  AuthenticationError,
  DeserializationError,
  DeadLetterError,
  FencedInstanceError,
  hasErrorCode,
} from './errors';
export type { KafkaCoordinates } from './errors';
export { resolveSettings, DEFAULTS, DEFAULT_PREFETCH, DEFAULT_DRAIN_FRACTION } from './config';
export type { ReactiveConsumerOptions, ConsumerSettings } from './config';
export { assertNativeFeatures, nativeInfo, REQUIRED_FEATURES } from './internal/rdkafka';
export { ReactiveConsumer } from './reactive-consumer';
export { PROCESS_DEFAULTS, resolveProcessOptions } from './process-options';
export type { ResolvedProcessOptions, ResolvedRetry } from './process-options';
export { deserializers } from './deserializers';
export { DEAD_LETTER_HEADERS } from './internal/dead-letter';
export type { ReactiveConsumerInternals } from './reactive-consumer';
export type {
  TopicPartition,
  KafkaMessage,
  RebalanceEvent,
  RebalanceEventBase,
  RebalanceEventType,
  RebalanceProtocol,
  PartitionCommitResult,
  Processed,
  ProcessedStatus,
  DecodedMessage,
  Deserializer,
  DeserializerSpec,
  RetryOptions,
  FailurePolicy,
  DeadLetterOptions,
  ConsumerEvent,
  ConsumerEventBase,
  ConsumerEventType,
  HandlerResult,
  MessageHandler,
  ProcessOptions,
  PartitionStream,
} from './types';
