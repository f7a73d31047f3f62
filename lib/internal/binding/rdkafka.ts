/**
 * The subset of node-rdkafka the library uses, its error codes, and error normalisation. node-rdkafka
 * is CommonJS; this module is the only place the consumer loads it (the testing kit, lib/testing/,
 * has its own helper clients).
 */
import * as Kafka from 'node-rdkafka';
import type {
  Assignment,
  ConsumerGlobalConfig,
  ConsumerTopicConfig,
  KafkaConsumer,
  LibrdKafkaError,
  Message,
  TopicPartitionOffset,
} from 'node-rdkafka';
import { KafkaClientError } from '../../errors';

/** @internal */
export type { Assignment, LibrdKafkaError, Message, TopicPartitionOffset };

/** The methods and events of node-rdkafka's `KafkaConsumer` the library relies on. @internal */
export type RdKafkaConsumer = Pick<
  KafkaConsumer,
  | 'connect'
  | 'disconnect'
  | 'isConnected'
  | 'subscribe'
  | 'unsubscribe'
  | 'consume'
  | 'setDefaultConsumeTimeout'
  | 'commit'
  | 'committed'
  | 'assign'
  | 'unassign'
  | 'incrementalAssign'
  | 'incrementalUnassign'
  | 'rebalanceProtocol'
  | 'assignments'
  | 'pause'
  | 'resume'
  | 'position'
  | 'queryWatermarkOffsets'
  | 'offsetsForTimes'
  | 'seek'
  | 'getMetadata'
  | 'on'
  | 'once'
  | 'removeListener'
  | 'setOauthBearerToken'
>;

/** Signature of librdkafka's rebalance callback as node-rdkafka calls it. @internal */
export type RebalanceCallback = (err: LibrdKafkaError, assignment: Assignment[]) => void;

/** Builds the native consumer; tests inject a deterministic fake instead. @internal */
export type ConsumerFactory = (
  globalConfig: ConsumerGlobalConfig,
  topicConfig: ConsumerTopicConfig,
) => RdKafkaConsumer;

/** The consumer factory of a binding (`binding` option; node-rdkafka by default). @internal */
export const consumerFactoryOf =
  (binding: { readonly KafkaConsumer: typeof Kafka.KafkaConsumer }): ConsumerFactory =>
  (globalConfig, topicConfig) =>
    new binding.KafkaConsumer(globalConfig, topicConfig);

const E = Kafka.CODES.ERRORS;

/** librdkafka error codes the library reacts to. @internal */
export const Code = {
  ASSIGN_PARTITIONS: E.ERR__ASSIGN_PARTITIONS,
  REVOKE_PARTITIONS: E.ERR__REVOKE_PARTITIONS,
  NO_OFFSET: E.ERR__NO_OFFSET,
  TIMED_OUT: E.ERR__TIMED_OUT,
  TIMED_OUT_QUEUE: E.ERR__TIMED_OUT_QUEUE,
  STATE: E.ERR__STATE,
  INVALID_ARG: E.ERR__INVALID_ARG,
  MAX_POLL_EXCEEDED: E.ERR__MAX_POLL_EXCEEDED,
  ASSIGNMENT_LOST: E.ERR__ASSIGNMENT_LOST,
  FATAL: E.ERR__FATAL,
  AUTHENTICATION: E.ERR__AUTHENTICATION,
  TRANSPORT: E.ERR__TRANSPORT,
  ALL_BROKERS_DOWN: E.ERR__ALL_BROKERS_DOWN,
  PARTITION_EOF: E.ERR__PARTITION_EOF,
  UNKNOWN_TOPIC: E.ERR__UNKNOWN_TOPIC,
  UNKNOWN_PARTITION: E.ERR__UNKNOWN_PARTITION,
  RESOLVE: E.ERR__RESOLVE,
  DESTROY: E.ERR__DESTROY,
  AUTO_OFFSET_RESET: E.ERR__AUTO_OFFSET_RESET,
  QUEUE_FULL: E.ERR__QUEUE_FULL,
  UNKNOWN_TOPIC_OR_PART: E.ERR_UNKNOWN_TOPIC_OR_PART,
  COORDINATOR_NOT_AVAILABLE: E.ERR_COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR: E.ERR_NOT_COORDINATOR,
  WAIT_COORD: E.ERR__WAIT_COORD,
  ILLEGAL_GENERATION: E.ERR_ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID: E.ERR_UNKNOWN_MEMBER_ID,
  REBALANCE_IN_PROGRESS: E.ERR_REBALANCE_IN_PROGRESS,
  TOPIC_AUTHORIZATION_FAILED: E.ERR_TOPIC_AUTHORIZATION_FAILED,
  GROUP_AUTHORIZATION_FAILED: E.ERR_GROUP_AUTHORIZATION_FAILED,
  SASL_AUTHENTICATION_FAILED: E.ERR_SASL_AUTHENTICATION_FAILED,
  FENCED_INSTANCE_ID: E.ERR_FENCED_INSTANCE_ID,
  FENCED_MEMBER_EPOCH: E.ERR_FENCED_MEMBER_EPOCH,
  UNRELEASED_INSTANCE_ID: E.ERR_UNRELEASED_INSTANCE_ID,
  STALE_MEMBER_EPOCH: E.ERR_STALE_MEMBER_EPOCH,
} as const;

/** Commit errors that mean this member no longer owns the partitions: treat them as lost. @internal */
export const OWNERSHIP_LOST_CODES: ReadonlySet<number> = new Set([
  Code.ILLEGAL_GENERATION,
  Code.UNKNOWN_MEMBER_ID,
  Code.FENCED_MEMBER_EPOCH,
]);

/**
 * Commit refusals that also refuse every earlier copy of the same request: the member's
 * generation or epoch moved on, or the member is unknown (a copy landing later carries the old
 * one). Every other commit error leaves the outcome unknown: librdkafka reports only its last
 * attempt's answer, and an earlier attempt — sent on a connection it then gave up on, or answered
 * by a coordinator whose write waited too long for its replicas — may still be applied, even after
 * a newer commit. @internal
 */
export const FENCING_REFUSAL_CODES: ReadonlySet<number> = new Set([
  E.ERR_ILLEGAL_GENERATION,
  E.ERR_UNKNOWN_MEMBER_ID,
  E.ERR_REBALANCE_IN_PROGRESS,
  E.ERR_FENCED_MEMBER_EPOCH,
  E.ERR_STALE_MEMBER_EPOCH,
  E.ERR_FENCED_INSTANCE_ID,
]);

/** Errors that can never heal by waiting; they end the consumer. @internal */
export const TERMINAL_CODES: ReadonlySet<number> = new Set([
  Code.FATAL,
  Code.AUTHENTICATION,
  Code.SASL_AUTHENTICATION_FAILED,
  Code.GROUP_AUTHORIZATION_FAILED,
  Code.FENCED_INSTANCE_ID,
  Code.UNRELEASED_INSTANCE_ID,
]);

/**
 * Normalises the error shapes node-rdkafka produces: `LibrdKafkaError`s, plain `Error`s thrown by
 * `assign`/`unassign` (numeric code lost: docs/binding-behaviours.md, "Assignment calls and their
 * errors"), and `{message, code}` objects.
 * @internal
 */
export function toKafkaError(err: unknown, context: string): KafkaClientError {
  if (err instanceof KafkaClientError) return err;
  const e = (err ?? {}) as Partial<LibrdKafkaError> & { message?: string; stack?: string };
  const code = typeof e.code === 'number' && e.code !== -1 ? e.code : (codeFromText(e) ?? -1);
  const message = typeof e.message === 'string' ? e.message : String(err);
  return new KafkaClientError(`${context}: ${message}`, {
    kafkaCode: code,
    fatal: e.isFatal === true || code === Code.FATAL,
    retriable: e.isRetriable === true,
    cause: err,
  });
}

/** librdkafka's description of every error code (`rd_kafka_err2str`) → the code. */
let descriptions: Map<string, number> | undefined;
function codeByDescription(text: string): number | undefined {
  if (descriptions === undefined) {
    descriptions = new Map();
    const err2str = nativeErr2str();
    if (err2str) addDescriptions(err2str);
  }
  return descriptions.get(text);
}

function addDescriptions(err2str: (code: number) => string): void {
  descriptions ??= new Map();
  for (const code of Object.values(E)) {
    if (typeof code !== 'number') continue;
    try {
      const d = err2str(code);
      if (d && !descriptions.has(d)) descriptions.set(d, code);
    } catch {
      return; // not librdkafka's err2str after all
    }
  }
}

const described = new WeakSet<(code: number) => string>();
/**
 * Adds the descriptions of another binding's librdkafka (the `binding` option's `err2str`), for a
 * build whose librdkafka words an error differently from node-rdkafka's.
 */
export function learnErrorDescriptions(err2str: (code: number) => string): void {
  if (described.has(err2str)) return;
  described.add(err2str);
  codeByDescription('');
  addDescriptions(err2str);
}

function nativeErr2str(): ((code: number) => string) | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const binding = require('node-rdkafka/librdkafka') as { err2str?: (code: number) => string };
    return binding.err2str;
  } catch {
    return undefined;
  }
}

/**
 * node-rdkafka's `event.error` loses the numeric code (it is always -1; docs/binding-behaviours.md, "Client errors"):
 * only librdkafka's description survives, in the stack's first line ("Error: Local: Authentication
 * failure") and, cut at the second colon and lower-cased, in `message`. Recover the code from it.
 */
function codeFromText(e: { message?: string; stack?: string }): number | undefined {
  const first = typeof e.stack === 'string' ? e.stack.split('\n', 1)[0] : undefined;
  if (first?.startsWith('Error: ')) {
    const code = codeByDescription(first.slice('Error: '.length));
    if (code !== undefined) return code;
  }
  return typeof e.message === 'string' ? codeByDescription(e.message) : undefined;
}

/**
 * librdkafka reports every fatal error as ERR__FATAL ("Local: Fatal error") and names the error
 * behind it only in its FATAL log line and fatal-error text: `Fatal error: Broker: The instance ID
 * is still used by another member in the consumer group: ConsumerGroupHeartbeat fatal error: …`.
 * Recover that code (here UNRELEASED_INSTANCE_ID) from the text, or undefined.
 * @internal
 */
export function fatalCauseFromText(text: string): number | undefined {
  const marker = 'Fatal error: ';
  const at = text.indexOf(marker);
  if (at < 0) return undefined;
  const rest = text.slice(at + marker.length);
  // Descriptions contain ": " themselves ("Broker: …"): try each prefix ending before one.
  for (let i = rest.indexOf(': '); i >= 0; i = rest.indexOf(': ', i + 1)) {
    const code = codeByDescription(rest.slice(0, i));
    if (code !== undefined && code !== Code.FATAL) return code;
  }
  const whole = codeByDescription(rest);
  return whole === Code.FATAL ? undefined : whole;
}

/** The numeric librdkafka code of an error of any shape, or undefined. @internal */
export function kafkaCodeOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { kafkaCode?: unknown; code?: unknown };
  if (typeof e.kafkaCode === 'number') return e.kafkaCode;
  if (typeof e.code === 'number') return e.code;
  return undefined;
}

/** A map key for a topic partition. @internal */
export const tpKey = (topic: string, partition: number): string => `${topic}\u0000${partition}`;

/**
 * The message of an error of any shape — also of a thrown value `String()` cannot convert (an
 * object without a prototype): its tag then. @internal
 */
export const errorMessage = (err: unknown): string => {
  try {
    if (err instanceof Error) return err.message;
    return String(err);
  } catch {
    try {
      return Object.prototype.toString.call(err);
    } catch {
      return '(a thrown value that cannot be described)';
    }
  }
};

/** Plain `{ topic, partition }` copies (drops offsets and anything else the binding attached). @internal */
export const list = (
  tps: readonly { topic: string; partition: number }[],
): { topic: string; partition: number }[] =>
  tps.map((t) => ({ topic: t.topic, partition: t.partition }));
