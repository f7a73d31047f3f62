import type { LoggerLike } from './logger';
import type { HandlerTracer } from './tracing';
import type { ConsumerGlobalConfig, ConsumerTopicConfig } from 'node-rdkafka';
import { ConfigError } from './errors';
import type { AssignedPartition, StartPosition } from './types';
import type { OAuthBearerTokenProvider } from './internal/oauth-bearer';

/** librdkafka settings the library owns; a conflicting user value is rejected, never overridden. */
const OWNED_SETTINGS: Record<string, { allowed: unknown; why: string }> = {
  'enable.auto.commit': {
    allowed: false,
    why: 'the library commits offsets itself, only after handlers succeed',
  },
  'enable.auto.offset.store': {
    allowed: false,
    why: 'librdkafka would store offsets before the handler ran, so a commit could skip unprocessed work',
  },
  rebalance_cb: {
    allowed: undefined,
    why: 'the library must own assignment to drain and commit before unassigning',
  },
  offset_commit_cb: {
    allowed: undefined,
    why: 'the library awaits each commit result itself',
  },
  event_cb: {
    allowed: true,
    why: "without librdkafka's events the library cannot see a lost membership, a fatal or authentication error, or an offset reset",
  },
};

/**
 * librdkafka's `log_level` must let through warnings (syslog level 4): the library learns of a
 * dropped membership (MAXPOLL, SESSTMOUT), the error behind a fatal one and offset resets only
 * from those lines.
 */
const MIN_LOG_LEVEL = 4;

/** Settings librdkafka refuses with `group.protocol=consumer` (KIP-848 moves them to the broker). */
const CLASSIC_ONLY_SETTINGS = [
  'session.timeout.ms',
  'heartbeat.interval.ms',
  'partition.assignment.strategy',
  'group.protocol.type',
] as const;

/**
 * Options of a {@link ReactiveConsumer}. Only `config` (with `bootstrap.servers` and `group.id`)
 * and `topics` are required; every tuning option has a documented default.
 */
export interface ReactiveConsumerOptions {
  /**
   * librdkafka global configuration. Must contain `bootstrap.servers` and `group.id`.
   * `enable.auto.commit` and `enable.auto.offset.store` may only be `false`; `rebalance_cb` and
   * `offset_commit_cb` must be absent: the library owns them.
   */
  config: ConsumerGlobalConfig;
  /** librdkafka topic configuration, e.g. `{ 'auto.offset.reset': 'earliest' }`. */
  topicConfig?: ConsumerTopicConfig;
  /** Topics to subscribe to. A name starting with `^` is a regular expression (librdkafka syntax). */
  topics: readonly string[] | string;
  /**
   * A pino logger, or any logger with pino's calling convention (`info(fields, message)`,
   * `child(bindings)`; see {@link LoggerLike}); the library logs through child loggers of it.
   * @default a silent pino logger
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
  /** Buffered (not yet started) messages per partition above which the partition is paused. @default 500 */
  maxBufferedMessages?: number;
  /** Buffered payload bytes per partition above which the partition is paused. @default 16777216 (16 MiB) */
  maxBufferedBytes?: number;
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
   * Not supported together with `rememberCompleted`, and a dead-letter producer gets no token
   * (give it its own `deadLetter.producerConfig` credentials).
   */
  oauthBearerToken?: OAuthBearerTokenProvider;
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
  readonly resumeThreshold: number;
  /** The start-position hook, if any (see {@link ReactiveConsumerOptions.onAssign}). */
  readonly onAssign: ReactiveConsumerOptions['onAssign'];
  /** Completed-offset memory, if enabled (see {@link ReactiveConsumerOptions.rememberCompleted}). */
  readonly rememberCompleted: { readonly topic: string; readonly maxRuns: number } | undefined;
  /** The OAUTHBEARER token provider, if any (see {@link ReactiveConsumerOptions.oauthBearerToken}). */
  readonly oauthBearerToken: OAuthBearerTokenProvider | undefined;
}

/** librdkafka's default `max.poll.interval.ms`. */
export const LIBRDKAFKA_MAX_POLL_INTERVAL_MS = 300_000;
/** Fraction of `max.poll.interval.ms` used as the default drain deadline. */
export const DEFAULT_DRAIN_FRACTION = 0.6;

/** Library defaults that do not depend on other settings. */
export const DEFAULTS = {
  commitIntervalMs: 1000,
  commitTimeoutMs: 10_000,
  lateCommitWindowMs: 5000,
  stallThresholdMs: 30_000,
  metricsIntervalMs: 5000,
  connectTimeoutMs: 30_000,
  consumeBatchSize: 500,
  consumeTimeoutMs: 100,
  maxBufferedMessages: 500,
  maxBufferedBytes: 16 * 1024 * 1024,
  resumeThreshold: 0.5,
  closeTimeoutMs: 25_000,
} as const;

/**
 * librdkafka prefetch bounds applied when the user sets none: librdkafka's own defaults
 * (64 MiB and 100k messages per partition queue) would dwarf the library's buffer limits.
 */
export const DEFAULT_PREFETCH: Readonly<Record<string, number>> = {
  'queued.max.messages.kbytes': 16_384,
  'queued.min.messages': 10_000,
  // With the bounds above, librdkafka's default backoff (1000 ms) idles a partition for a second
  // every time its queue fills: measured at 0.35× the raw binding (100 B) and 0.06× (1 KiB).
  'fetch.queue.backoff.ms': 10,
};

function fail(key: string, expected: string, got: unknown): never {
  throw new ConfigError(`Expected \`${key}\` to be ${expected}, got ${formatValue(got)}`, key);
}

function formatValue(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function readNumber(config: Record<string, unknown>, key: string): number | undefined {
  const raw = config[key];
  if (raw === undefined) return undefined;
  const n = typeof raw === 'string' ? Number(raw) : raw;
  if (typeof n !== 'number' || !Number.isFinite(n)) fail(key, 'a number', raw);
  return n;
}

function positiveInt(
  options: Record<string, unknown>,
  key: string,
  fallback: number,
  min = 1,
): number {
  const value = options[key];
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    fail(key, `an integer ≥ ${min}`, value);
  }
  return value;
}

function normaliseTopics(topics: unknown): string[] {
  const list = typeof topics === 'string' ? [topics] : topics;
  if (!Array.isArray(list) || list.length === 0) {
    fail('topics', 'a non-empty list of topic names or ^regex patterns', topics);
  }
  for (const topic of list) {
    if (typeof topic !== 'string' || topic.length === 0) {
      fail('topics', 'a list of non-empty strings', topics);
    }
  }
  return [...(list as string[])];
}

/**
 * Validates user options once, at construction, and returns the resolved settings.
 * Throws {@link ConfigError} naming the offending key. librdkafka's own per-key checks run when the
 * client is constructed (see `createConsumerClient`); this adds the cross-key rules librdkafka only
 * checks at connect time and the library's own rules.
 */
export function resolveSettings(options: ReactiveConsumerOptions): ConsumerSettings {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError('Expected an options object', 'options');
  }
  const config = options.config as Record<string, unknown> | undefined;
  if (typeof config !== 'object' || config === null) {
    fail('config', 'an object of librdkafka settings', config);
  }
  const topicConfig = (options.topicConfig ?? {}) as Record<string, unknown>;
  if (typeof topicConfig !== 'object' || topicConfig === null) {
    fail('topicConfig', 'an object of librdkafka topic settings', options.topicConfig);
  }
  if (!config['bootstrap.servers'] && !config['metadata.broker.list']) {
    fail(
      'bootstrap.servers',
      'a broker list such as "127.0.0.1:9092"',
      config['bootstrap.servers'],
    );
  }
  const groupId = config['group.id'];
  if (typeof groupId !== 'string' || groupId.length === 0) {
    fail('group.id', 'a non-empty string', groupId);
  }
  const logLevel = config.log_level;
  if (logLevel !== undefined && !(Number(logLevel) >= MIN_LOG_LEVEL)) {
    throw new ConfigError(
      `Expected \`log_level\` to be at least ${MIN_LOG_LEVEL} (warnings): the library detects lost group membership, fatal errors and offset resets from librdkafka's warning lines; got ${formatValue(logLevel)} (filter librdkafka's lines in your pino logger instead)`,
      'log_level',
    );
  }
  for (const [key, rule] of Object.entries(OWNED_SETTINGS)) {
    const value = config[key];
    if (value === undefined) continue;
    const ok =
      typeof rule.allowed === 'boolean'
        ? value === rule.allowed || value === String(rule.allowed)
        : rule.allowed === value;
    if (!ok) {
      throw new ConfigError(
        `Expected \`${key}\` to be ${rule.allowed === undefined ? 'unset' : `unset or ${String(rule.allowed)}`}: ${rule.why}; got ${formatValue(value)}`,
        key,
      );
    }
  }

  const protocolRaw = config['group.protocol'] ?? 'classic';
  if (protocolRaw !== 'classic' && protocolRaw !== 'consumer') {
    fail('group.protocol', '"classic" or "consumer"', protocolRaw);
  }
  const groupProtocol = protocolRaw;
  if (groupProtocol === 'consumer') {
    for (const key of CLASSIC_ONLY_SETTINGS) {
      if (config[key] !== undefined) {
        throw new ConfigError(
          `\`${key}\` cannot be set with \`group.protocol=consumer\` (KIP-848): the broker owns it ` +
            `(group.consumer.* broker settings); remove it or use group.protocol=classic`,
          key,
        );
      }
    }
  }

  const maxPollIntervalMs =
    readNumber(config, 'max.poll.interval.ms') ?? LIBRDKAFKA_MAX_POLL_INTERVAL_MS;
  if (!Number.isInteger(maxPollIntervalMs) || maxPollIntervalMs < 1) {
    throw new ConfigError(
      `Expected \`max.poll.interval.ms\` to be a positive integer (ms), got ${String(maxPollIntervalMs)}`,
      'max.poll.interval.ms',
    );
  }
  const sessionTimeoutMs = readNumber(config, 'session.timeout.ms');
  if (groupProtocol === 'classic' && sessionTimeoutMs !== undefined) {
    if (maxPollIntervalMs < sessionTimeoutMs) {
      throw new ConfigError(
        `Expected \`max.poll.interval.ms\` (${maxPollIntervalMs}) to be ≥ \`session.timeout.ms\` (${sessionTimeoutMs})`,
        'max.poll.interval.ms',
      );
    }
  }

  const opts = options as unknown as Record<string, unknown>;
  const drainTimeoutMs = positiveInt(
    opts,
    'drainTimeoutMs',
    Math.floor(maxPollIntervalMs * DEFAULT_DRAIN_FRACTION),
  );
  if (drainTimeoutMs >= maxPollIntervalMs) {
    throw new ConfigError(
      `Expected \`drainTimeoutMs\` to be below \`max.poll.interval.ms\` (${maxPollIntervalMs}), got ${drainTimeoutMs}`,
      'drainTimeoutMs',
    );
  }
  const lateCommitWindowMs = positiveInt(
    opts,
    'lateCommitWindowMs',
    Math.min(DEFAULTS.lateCommitWindowMs, Math.floor(drainTimeoutMs / 2)),
    0,
  );
  if (lateCommitWindowMs >= drainTimeoutMs) {
    throw new ConfigError(
      `Expected \`lateCommitWindowMs\` to be below \`drainTimeoutMs\` (${drainTimeoutMs}), got ${lateCommitWindowMs}`,
      'lateCommitWindowMs',
    );
  }
  const resumeThreshold = options.resumeThreshold ?? DEFAULTS.resumeThreshold;
  if (typeof resumeThreshold !== 'number' || !(resumeThreshold >= 0 && resumeThreshold < 1)) {
    fail('resumeThreshold', 'a number in [0, 1)', resumeThreshold);
  }
  if (
    options.signal !== undefined &&
    (typeof options.signal !== 'object' ||
      options.signal === null ||
      typeof (options.signal as { aborted?: unknown }).aborted !== 'boolean' ||
      typeof (options.signal as { addEventListener?: unknown }).addEventListener !== 'function')
  ) {
    fail('signal', 'an AbortSignal', options.signal);
  }
  if (
    options.tracing !== undefined &&
    (typeof options.tracing !== 'object' ||
      options.tracing === null ||
      typeof (options.tracing as { around?: unknown }).around !== 'function')
  ) {
    fail('tracing', 'a HandlerTracer (an object with around(trace, run))', options.tracing);
  }
  if (options.logger !== undefined) {
    const logger = options.logger as unknown as Record<string, unknown>;
    const methods = ['child', 'error', 'warn', 'info', 'debug'];
    if (
      typeof logger !== 'object' ||
      logger === null ||
      methods.some((m) => typeof logger[m] !== 'function')
    ) {
      fail('logger', `a pino-compatible logger (with ${methods.join(', ')})`, options.logger);
    }
  }

  const rememberCompleted = resolveRememberCompleted(options.rememberCompleted);
  const oauthBearerToken = resolveOAuthBearer(options.oauthBearerToken, config, rememberCompleted);
  const metricsIntervalMs = positiveInt(opts, 'metricsIntervalMs', DEFAULTS.metricsIntervalMs);
  const globalConfig: Record<string, unknown> = {
    ...DEFAULT_PREFETCH,
    'statistics.interval.ms': metricsIntervalMs,
    ...config,
  };
  globalConfig['enable.auto.commit'] = false;
  globalConfig['enable.auto.offset.store'] = false;

  return {
    globalConfig: globalConfig as ConsumerGlobalConfig,
    topicConfig: { ...topicConfig } as ConsumerTopicConfig,
    topics: normaliseTopics(options.topics),
    groupId,
    groupProtocol,
    maxPollIntervalMs,
    drainTimeoutMs,
    commitIntervalMs: positiveInt(opts, 'commitIntervalMs', DEFAULTS.commitIntervalMs),
    commitTimeoutMs: positiveInt(opts, 'commitTimeoutMs', DEFAULTS.commitTimeoutMs),
    lateCommitWindowMs,
    stallThresholdMs: positiveInt(
      opts,
      'stallThresholdMs',
      Math.min(DEFAULTS.stallThresholdMs, drainTimeoutMs),
      0,
    ),
    metricsIntervalMs,
    closeTimeoutMs: positiveInt(opts, 'closeTimeoutMs', DEFAULTS.closeTimeoutMs),
    connectTimeoutMs: positiveInt(opts, 'connectTimeoutMs', DEFAULTS.connectTimeoutMs),
    consumeBatchSize: positiveInt(opts, 'consumeBatchSize', DEFAULTS.consumeBatchSize),
    consumeTimeoutMs: positiveInt(opts, 'consumeTimeoutMs', DEFAULTS.consumeTimeoutMs, 0),
    maxBufferedMessages: positiveInt(opts, 'maxBufferedMessages', DEFAULTS.maxBufferedMessages),
    maxBufferedBytes: positiveInt(opts, 'maxBufferedBytes', DEFAULTS.maxBufferedBytes),
    resumeThreshold,
    onAssign: resolveOnAssign(options.onAssign),
    rememberCompleted,
    oauthBearerToken,
  };
}

/**
 * The OAUTHBEARER provider, checked against the SASL settings: node-rdkafka ignores a function
 * under librdkafka's `oauthbearer_token_refresh_cb` key, so without the provider (or librdkafka's
 * OIDC or unsecured-JWT handlers) an OAUTHBEARER client never gets a token and every connect times
 * out.
 */
function resolveOAuthBearer(
  provider: unknown,
  config: Record<string, unknown>,
  rememberCompleted: unknown,
): OAuthBearerTokenProvider | undefined {
  if (config.oauthbearer_token_refresh_cb !== undefined) {
    throw new ConfigError(
      'Expected `oauthbearer_token_refresh_cb` to be unset: node-rdkafka does not call it (the token would never be set); use the `oauthBearerToken` option',
      'oauthbearer_token_refresh_cb',
    );
  }
  const mechanism = config['sasl.mechanisms'] ?? config['sasl.mechanism'];
  const oauth = typeof mechanism === 'string' && mechanism.toUpperCase() === 'OAUTHBEARER';
  const unsecureJwt =
    config['enable.sasl.oauthbearer.unsecure.jwt'] === true ||
    config['enable.sasl.oauthbearer.unsecure.jwt'] === 'true';
  const oidc = config['sasl.oauthbearer.method'] === 'oidc';
  if (provider === undefined) {
    if (oauth && !unsecureJwt && !oidc) {
      throw new ConfigError(
        "Expected `oauthBearerToken` (a token provider) with `sasl.mechanisms=OAUTHBEARER`: node-rdkafka does not run librdkafka's token refresh callback, so without it the client has no token (or set `sasl.oauthbearer.method=oidc` for librdkafka's own OIDC client)",
        'oauthBearerToken',
      );
    }
    return undefined;
  }
  if (typeof provider !== 'function') {
    fail('oauthBearerToken', 'a function () => { value, lifetimeMs, principal? }', provider);
  }
  if (!oauth) {
    fail('sasl.mechanisms', '"OAUTHBEARER" when `oauthBearerToken` is set', mechanism);
  }
  if (unsecureJwt || oidc) {
    const key = unsecureJwt ? 'enable.sasl.oauthbearer.unsecure.jwt' : 'sasl.oauthbearer.method';
    throw new ConfigError(
      `\`${key}\` makes librdkafka produce its own tokens; it cannot be combined with \`oauthBearerToken\``,
      key,
    );
  }
  if (rememberCompleted !== undefined) {
    throw new ConfigError(
      '`rememberCompleted` cannot be combined with `oauthBearerToken` yet: its producer and reader would get no token',
      'rememberCompleted',
    );
  }
  return provider as OAuthBearerTokenProvider;
}

/** Defaults of the completed-offset memory. */
export const REMEMBER_COMPLETED_DEFAULTS = {
  topic: 'reactive-rdkafka.completed-offsets',
  maxRuns: 512,
} as const;

function resolveRememberCompleted(
  value: unknown,
): { readonly topic: string; readonly maxRuns: number } | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return { ...REMEMBER_COMPLETED_DEFAULTS };
  if (typeof value !== 'object' || value === null) {
    fail('rememberCompleted', 'a boolean or { topic?, maxRuns? }', value);
  }
  const v = value as { topic?: unknown; maxRuns?: unknown };
  const topic = v.topic ?? REMEMBER_COMPLETED_DEFAULTS.topic;
  if (typeof topic !== 'string' || !/^[a-zA-Z0-9._-]{1,249}$/.test(topic)) {
    fail('rememberCompleted.topic', 'a valid topic name', topic);
  }
  const maxRuns = v.maxRuns ?? REMEMBER_COMPLETED_DEFAULTS.maxRuns;
  if (
    typeof maxRuns !== 'number' ||
    !Number.isInteger(maxRuns) ||
    maxRuns < 1 ||
    maxRuns > 100_000
  ) {
    fail('rememberCompleted.maxRuns', 'an integer in [1, 100000]', maxRuns);
  }
  return { topic, maxRuns };
}

/** Consumer settings a helper client (producer, reader) inherits: connection and security. */
export function connectionSettings(globalConfig: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(globalConfig)) {
    if (
      [
        'bootstrap.servers',
        'metadata.broker.list',
        'security.protocol',
        'client.id',
        'client.rack',
        'broker.address.family',
      ].includes(key) ||
      ['sasl.', 'ssl.', 'socket.'].some((p) => key.startsWith(p))
    ) {
      out[key] = value;
    }
  }
  return out;
}

function resolveOnAssign(hook: unknown): ReactiveConsumerOptions['onAssign'] {
  if (hook === undefined) return undefined;
  if (typeof hook !== 'function') fail('onAssign', 'a function (partition) => StartPosition', hook);
  return hook as ReactiveConsumerOptions['onAssign'];
}

/**
 * Translates an error thrown by librdkafka's configuration checks (node-rdkafka's constructor)
 * into a {@link ConfigError} naming the key.
 */
export function translateLibrdkafkaConfigError(err: unknown): ConfigError {
  const message = err instanceof Error ? err.message : String(err);
  const key = /configuration property:? "?([\w.-]+)/.exec(message)?.[1] ?? 'config';
  return new ConfigError(`librdkafka rejected the configuration: ${message}`, key, { cause: err });
}
