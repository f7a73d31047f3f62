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
  hasErrorCode,
} from './errors';
export type { KafkaCoordinates } from './errors';
export { resolveSettings, DEFAULTS, DEFAULT_PREFETCH, DEFAULT_DRAIN_FRACTION } from './config';
export type { ReactiveConsumerOptions, ConsumerSettings } from './config';
export { assertNativeFeatures, nativeInfo, REQUIRED_FEATURES } from './internal/rdkafka';
export { ReactiveConsumer, PROCESS_DEFAULTS } from './reactive-consumer';
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
  LastRevoke,
  StalledHandler,
  PartitionState,
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
