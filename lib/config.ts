/**
 * The consumer's options (`ReactiveConsumerOptions`) and what they resolve to
 * (`ConsumerSettings`, `consumer.settings`). The resolution itself is internal
 * (lib/internal/settings/).
 */
import type { LoggerLike } from './logger';
import type { HandlerTracer } from './tracing';
import type { ConsumerGlobalConfig, ConsumerTopicConfig } from 'node-rdkafka';
import type { AssignedPartition, StartPosition, TopicPartition } from './types';
import type { OAuthBearerTokenProvider } from './internal/binding/oauth-bearer';
import type { KafkaBinding } from './binding';

// An option added here goes into its list in lib/internal/settings/option-names.ts too (the type
// check insists): a name missing there is refused as unknown.
/**
 * Options of a {@link ReactiveConsumer}. Only `config` (with `bootstrap.servers` and `group.id`)
 * and `topics` are required; every tuning option has a documented default. Any other option name
 * is a `ConfigError` naming the closest known one.
 */
export interface ReactiveConsumerOptions {
  /**
   * librdkafka global configuration. Must contain `bootstrap.servers` and `group.id`.
   * `enable.auto.commit` and `enable.auto.offset.store` may only be `false`; `rebalance_cb` and
   * `offset_commit_cb` must be absent: the library owns them. `sasl.mechanisms`, when set, must be
   * one librdkafka supports, in capitals (`GSSAPI`, `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`,
   * `OAUTHBEARER`). librdkafka checks the names of its settings itself.
   */
  config: ConsumerGlobalConfig;
  /** librdkafka topic configuration, e.g. `{ 'auto.offset.reset': 'earliest' }`. */
  topicConfig?: ConsumerTopicConfig;
  /** Topics to subscribe to. A name starting with `^` is a regular expression (librdkafka syntax). */
  topics: readonly string[] | string;
  /**
   * A pino logger, or any logger with pino's calling convention (`info(fields, message)`,
   * `child(bindings)`; see {@link LoggerLike}); the library logs through child loggers of it.
   * pino is an optional peer dependency: install it only if you pass a pino logger.
   * @default none: the library logs nothing
   */
  logger?: LoggerLike;
  /**
   * A handler running longer than this is reported as stalled (a warning, a metric, a diagnostics
   * event, and `health()` fails) and again when it completes, in ms. 0 disables the detection.
   * @default 30000, or `drainTimeoutMs` when that is lower
   */
  stallThresholdMs?: number;
  /**
   * How often `metrics$` emits a snapshot, in ms. Unless `statistics.interval.ms` is set in
   * `config`, librdkafka's statistics (the source of consumer lag) are enabled at this interval too.
   * @default 5000
   */
  metricsIntervalMs?: number;
  /**
   * Longest time a revoke may spend draining in-flight handlers and committing, in ms. Must stay
   * below `max.poll.interval.ms` (the broker's rebalance timeout). One exception: a final commit
   * that librdkafka still holds at this deadline (the coordinator unreachable: it cannot be
   * cancelled, and handed over it could land after the next owner's commits) keeps the partitions
   * until librdkafka answers it, up to shortly before `max.poll.interval.ms` (or the close's own
   * deadline); applied late, it counts as committed.
   * @default 60% of `max.poll.interval.ms` (180000 with librdkafka's default of 300000)
   */
  drainTimeoutMs?: number;
  /** How often processed offsets are committed while running, in ms. @default 1000 */
  commitIntervalMs?: number;
  /** How long to wait for the broker to confirm one commit, in ms. @default 10000 */
  commitTimeoutMs?: number;
  /**
   * How long after librdkafka gave up on a commit (answered it timed out, or with a transport or
   * coordinator error) the broker may still apply it, in ms: such a commit can land after a newer
   * one and move the group's offset back. A partition with one is released only once the group's
   * offset, read back after this window, is its final offset (committed again when it is lower),
   * bounded by the rebalance deadline. Set it to the broker's `offsets.commit.timeout.ms` when
   * that differs from its default. Must be below `drainTimeoutMs`. See docs/rebalance-semantics.md,
   * "Commits of unknown outcome".
   * @default 5000, or half of `drainTimeoutMs` when that is lower
   */
  lateCommitWindowMs?: number;
  /**
   * Longest time `close()` may take as a whole (drain, final commit, leave, disconnect), in ms.
   * The default fits a Kubernetes pod's 30 s SIGTERM grace period; a revoke running while the
   * consumer closes is brought forward to end within it (handlers still running then are cut off
   * and their messages redone by the next owner). `close({ timeoutMs })` overrides it per call.
   * @default 25000
   */
  closeTimeoutMs?: number;
  /**
   * Closes the consumer (gracefully, as {@link ReactiveConsumer.close}) when this signal aborts:
   * tie it to the service's shutdown. A signal aborted already closes it at once.
   */
  signal?: AbortSignal;
  /**
   * Runs each handler call inside a tracing context, so the handler's own spans are children of
   * the message's span: `openTelemetryTracing(api)` for OpenTelemetry, or your own
   * {@link HandlerTracer}. (The `reactive-rdkafka:handler` tracing channel works without it.)
   */
  tracing?: HandlerTracer;
  /** Longest wait for the first connection to the cluster, in ms. @default 30000 */
  connectTimeoutMs?: number;
  /** Most messages taken from librdkafka by one `consume(n)` call. @default 500 */
  consumeBatchSize?: number;
  /** How long one `consume(n)` call waits for the first message, in ms. @default 100 */
  consumeTimeoutMs?: number;
  /**
   * Messages a partition holds, counted from its first unfinished one on (running, waiting, or
   * finished behind an unfinished one), at which the partition is paused. Up to two consume
   * batches may overshoot it: the one that filled it and the next one, fetched while it was
   * dispatched. @default 200
   */
  maxBufferedMessages?: number;
  /**
   * Buffered bytes per partition above which the partition is paused. A message counts as its
   * value and key bytes plus 512 B for the objects that carry it. As with `maxBufferedMessages`,
   * up to two consume batches may overshoot it. @default 16777216 (16 MiB)
   */
  maxBufferedBytes?: number;
  /**
   * Buffered bytes of all partitions together (counted as for `maxBufferedBytes`), shared out
   * equally: each owned partition is paused at its share (this divided by the partitions owned,
   * at least 256 KiB or all of it if smaller, at most `maxBufferedBytes`) and resumes at
   * `resumeThreshold` of it. A share, not a pool: what one partition holds never pauses another.
   * It bounds the library's memory for unfinished messages whatever the number of partitions
   * (to the larger of this and 256 KiB per partition, plus up to two consume batches that
   * overshoot a share); not counted: librdkafka's prefetch
   * (`queued.max.messages.kbytes`, 8 MiB by default here) and a value kept after its message
   * finished. A `partitions$` pipeline that holds messages unacked (`bufferCount(n)`) must fit
   * in a share. @default 33554432 (32 MiB)
   */
  maxBufferedBytesTotal?: number;
  /**
   * A paused partition resumes once its buffer falls to this fraction of both limits.
   * @default 0.5
   */
  resumeThreshold?: number;
  /**
   * Chooses where each newly assigned partition starts. Called for every partition of every
   * assignment (sync or async) before the assignment is applied; the answer goes into the assign
   * call itself, so no record before it is fetched. `undefined` or `'committed'` keeps the group's
   * committed offset (else `auto.offset.reset`). A chosen position is committed as the partition's
   * position when it is revoked, even if nothing was processed. A hook that throws ends the consumer.
   */
  onAssign?: (
    partition: AssignedPartition,
  ) => StartPosition | undefined | Promise<StartPosition | undefined>;
  /**
   * Runs when partitions are revoked, after their handlers drained and before their final commit
   * (Java's `onPartitionsRevoked`): flush what you buffered for them (a sink, an aggregate) so the
   * committed offsets never run ahead of it. Given the revoked partitions, and a `signal` aborted
   * at the latest moment the hook may take (`deadline`, ms since the epoch), which leaves the
   * final commit its time within the drain deadline; the revoke waits for it until then, and then
   * commits without it. A hook that throws or rejects is logged and reported (`revoke-hook-failed`
   * on `events$`); the final commit still covers only the messages whose handlers finished. Not
   * called for partitions lost (nothing is committed for them) nor while the consumer disconnects.
   */
  onRevoke?: (
    partitions: TopicPartition[],
    context: { readonly signal: AbortSignal; readonly deadline: number },
  ) => void | Promise<void>;
  /**
   * Remember offsets finished out of order (`ordering: 'key' | 'none'`) above the committed one, so
   * that after a rebalance or a restart the next owner skips them instead of redoing them. Kept in
   * a compacted topic owned by the library (one record per group and partition, written and
   * confirmed before each commit); `maxRuns` caps a partition's memory (runs of consecutive
   * offsets; past it, the highest are forgotten and redone).
   * @default false; `true` = `{ topic: 'reactive-rdkafka.completed-offsets', maxRuns: 512 }`
   */
  rememberCompleted?: boolean | { topic?: string; maxRuns?: number };
  /**
   * Supplies SASL/OAUTHBEARER tokens; required with `sasl.mechanisms: 'OAUTHBEARER'` (unless
   * librdkafka's own `sasl.oauthbearer.method: 'oidc'` or its test-only unsecured JWT handler is
   * used). Called before connecting — a failure there ends the start with a `ConnectError` — and
   * again at 80% of each token's remaining lifetime; librdkafka re-authenticates its broker
   * connections with the newest token (KIP-368). A refresh that throws, times out
   * (`connectTimeoutMs`) or returns an expired token is logged at error level and retried (after
   * at most 10 s) while the current token stays in use; once it has expired the brokers refuse
   * re-authentication and the consumer ends with an `AuthenticationError` if that lasts
   * `connectTimeoutMs`. `lifetimeMs` is the expiry time in ms since the epoch (JWT `exp` × 1000).
   * node-rdkafka cannot pass SASL extensions (a token with `extensions` is refused) nor
   * `principal` (it is logged only; the broker reads the principal from the token).
   * The dead-letter and transactional producers get their tokens from it too. Not supported
   * together with `rememberCompleted` (node-rdkafka's AdminClient cannot be given a token).
   */
  oauthBearerToken?: OAuthBearerTokenProvider;
  /**
   * The node-rdkafka-compatible module every client of this consumer is built from: the consumer,
   * the dead-letter producer, the transactional producer and the completed-offset store's clients.
   * For the companion build with batch conversion (README, "Fast path"):
   * `binding: require('reactive-rdkafka-fast-binding')`. A module without node-rdkafka's classes
   * is a `ConfigError`. `health().details.binding` names the one in use.
   * @default require('node-rdkafka')
   */
  binding?: KafkaBinding;
  /**
   * With a binding that converts batches (the companion build, README "Fast path"): message
   * values, keys and header values are views of shared buffers instead of copies of their own, so
   * no per-message copy at all.
   *
   * - `true`: one buffer per partition and batch. A value kept after its message finished keeps
   *   that partition's messages of the batch in memory (never another partition's), and
   *   `value.buffer` is the whole batch.
   * - a number of bytes (e.g. `8192`): buffers of at most that size, each holding messages of one
   *   partition (a larger message has a buffer of its own), so a kept value pins at most that many
   *   bytes beside its own: the trade-off of Node's Buffer pool, at about the speed of `true`.
   *
   * `value.byteOffset` may then be non-zero and `value.buffer` cannot be transferred to a worker
   * (it is marked untransferable). The buffer limits (and `bufferedBytes` in the metrics) count the
   * messages' own bytes, so a pipeline runs as with copies, while memory can exceed them by what
   * held messages pin: up to one consume batch of its partition (`consumeBatchSize` messages) per
   * held message with `true`, the bound per held message with a number. A binding without it is a
   * `ConfigError`.
   * @default false
   */
  sharedBatchBuffers?: boolean | number;
}

/** The library's tuning options with every default applied. */
export interface ConsumerSettings {
  readonly globalConfig: ConsumerGlobalConfig;
  readonly topicConfig: ConsumerTopicConfig;
  readonly topics: readonly string[];
  readonly groupId: string;
  /** `classic` or `consumer` (KIP-848). */
  readonly groupProtocol: 'classic' | 'consumer';
  readonly maxPollIntervalMs: number;
  readonly drainTimeoutMs: number;
  readonly commitIntervalMs: number;
  readonly commitTimeoutMs: number;
  readonly lateCommitWindowMs: number;
  /** 0: stall detection disabled. */
  readonly stallThresholdMs: number;
  readonly metricsIntervalMs: number;
  readonly closeTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly consumeBatchSize: number;
  readonly consumeTimeoutMs: number;
  readonly maxBufferedMessages: number;
  readonly maxBufferedBytes: number;
  readonly maxBufferedBytesTotal: number;
  readonly resumeThreshold: number;
  /** The start-position hook, if any (see {@link ReactiveConsumerOptions.onAssign}). */
  readonly onAssign: ReactiveConsumerOptions['onAssign'];
  /** The revoke hook, if any (see {@link ReactiveConsumerOptions.onRevoke}). */
  readonly onRevoke: ReactiveConsumerOptions['onRevoke'];
  /** Completed-offset memory, if enabled (see {@link ReactiveConsumerOptions.rememberCompleted}). */
  readonly rememberCompleted: { readonly topic: string; readonly maxRuns: number } | undefined;
  /** The OAUTHBEARER token provider, if any (see {@link ReactiveConsumerOptions.oauthBearerToken}). */
  readonly oauthBearerToken: OAuthBearerTokenProvider | undefined;
  /** The binding every client is built from (see {@link ReactiveConsumerOptions.binding}). */
  readonly binding: KafkaBinding;
  /** Values and keys are views of their batch's buffer (see {@link ReactiveConsumerOptions.sharedBatchBuffers}). */
  readonly sharedBatchBuffers: boolean | number;
}
