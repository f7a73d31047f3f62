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
  StartPositionError,
  NotAssignedError,
  FencedInstanceError,
  ProducerFencedError,
  TransactionError,
  hasErrorCode,
} from './errors';
export type { KafkaCoordinates } from './errors';
export type { ReactiveConsumerOptions, ConsumerSettings } from './config';
export type { LoggerLike, LogFn } from './logger';
export { TracingChannel } from './tracing';
export type { HandlerTrace, HandlerTracer } from './tracing';
export { openTelemetryTracing } from './opentelemetry';
export type {
  OpenTelemetryApi,
  OpenTelemetryTracingOptions,
  OtelContext,
  OtelSpan,
  OtelSpanContext,
  OtelTracer,
} from './opentelemetry';
export type { OAuthBearerToken, OAuthBearerTokenProvider } from './oauth';
export { assertNativeFeatures, nativeInfo, REQUIRED_FEATURES } from './native';
export type { BindingInfo, KafkaBinding } from './binding';
export { ReactiveConsumer } from './reactive-consumer';
export { BatchItemFailure } from './batch-item-failure';
export { deserializers } from './deserializers';
export type {
  OutputRecord,
  TransactionalHandler,
  TransactionalOptions,
} from './transactional-options';
export { DEAD_LETTER_HEADERS } from './dead-letter-headers';
export type {
  TopicPartition,
  KafkaMessage,
  RebalanceEvent,
  RebalanceEventBase,
  RebalanceEventType,
  RebalanceProtocol,
  PartitionCommitResult,
  RevokeTransaction,
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
  StartPosition,
  AssignedPartition,
  MessageBatch,
  Ordering,
  BatchHandler,
  BatchProcessOptions,
  ProcessedBatch,
  HandlerResult,
  MessageHandler,
  ProcessOptions,
  PartitionStream,
} from './types';
export type {
  ConsumerMetrics,
  PartitionMetrics,
  MessageCounters,
  DurationHistogram,
  CommitMetrics,
  RebalanceMetrics,
  FetchWakeMetrics,
  LastRevoke,
  StalledHandler,
  PartitionState,
  TransactionMetrics,
} from './metrics';
export type { ConsumerHealth, HealthChecks, HealthDetails, HealthOptions } from './health';
export { DiagnosticsChannel } from './diagnostics';
export type {
  DiagnosticsChannelName,
  DiagnosticsBase,
  RebalanceDiagnostics,
  CommitDiagnostics,
  CommitKind,
  HandlerDiagnostics,
  StallDiagnostics,
  StatsDiagnostics,
} from './diagnostics';
export { registerPrometheusMetrics } from './prometheus';
export type { PrometheusOptions, PrometheusRegistry } from './prometheus';
