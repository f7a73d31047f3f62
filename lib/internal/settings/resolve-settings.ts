/**
 * `ReactiveConsumerOptions` → `ConsumerSettings`: every option checked (a {@link ConfigError}
 * naming the key and what was expected), defaults applied, librdkafka's settings merged with the
 * ones the library owns.
 */
import type { ConsumerGlobalConfig, ConsumerTopicConfig } from 'node-rdkafka';
import type { ConsumerSettings, ReactiveConsumerOptions } from '../../config';
import { ConfigError } from '../../errors';
import type { OAuthBearerTokenProvider } from '../../oauth';
import {
  CLASSIC_ONLY_SETTINGS,
  DEFAULT_PREFETCH,
  MIN_LOG_LEVEL,
  OWNED_SETTINGS,
  checkSaslMechanism,
} from './librdkafka-settings';
import { CONSUMER_SCOPE, REMEMBER_COMPLETED_SCOPE, checkedOptions, readOwn } from './option-names';
import { redactWhenShown } from './secrets';
import { showValue } from './show-value';
import { resolveBinding, resolveSharedBatchBuffers } from '../binding/binding';

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
  maxBufferedMessages: 200,
  maxBufferedBytes: 16 * 1024 * 1024,
  maxBufferedBytesTotal: 32 * 1024 * 1024,
  resumeThreshold: 0.5,
  closeTimeoutMs: 25_000,
} as const;

function fail(key: string, expected: string, got: unknown): never {
  throw new ConfigError(`Expected \`${key}\` to be ${expected}, got ${showValue(got)}`, key);
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
 * Throws {@link ConfigError} naming the offending key: an unknown option name (naming the closest
 * known one), a value of the wrong type or out of range. librdkafka's own per-key checks run when
 * the client is constructed (see `createConsumerClient`); this adds the cross-key rules librdkafka
 * only checks at connect time and the library's own rules.
 */
export function resolveSettings(input: ReactiveConsumerOptions): ConsumerSettings {
  if (typeof input !== 'object' || input === null) {
    fail('options', 'an options object', input);
  }
  const options = checkedOptions(input, CONSUMER_SCOPE) as unknown as ReactiveConsumerOptions;
  const configInput = options.config as unknown;
  if (typeof configInput !== 'object' || configInput === null) {
    fail('config', 'an object of librdkafka settings', configInput);
  }
  const config = readOwn(configInput, 'config');
  const topicConfigInput = (options.topicConfig ?? {}) as unknown;
  if (typeof topicConfigInput !== 'object' || topicConfigInput === null) {
    fail('topicConfig', 'an object of librdkafka topic settings', topicConfigInput);
  }
  const topicConfig = readOwn(topicConfigInput, 'topicConfig');
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
  if (
    logLevel !== undefined &&
    !(
      (typeof logLevel === 'number' || typeof logLevel === 'string') &&
      Number(logLevel) >= MIN_LOG_LEVEL
    )
  ) {
    throw new ConfigError(
      `Expected \`log_level\` to be at least ${MIN_LOG_LEVEL} (warnings): the library detects lost group membership, fatal errors and offset resets from librdkafka's warning lines; got ${showValue(logLevel)} (filter librdkafka's lines in your pino logger instead)`,
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
        `Expected \`${key}\` to be ${rule.allowed === undefined ? 'unset' : `unset or ${String(rule.allowed)}`}: ${rule.why}; got ${showValue(value)}`,
        key,
      );
    }
  }
  checkSaslMechanism(config);

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
      typeof (options.tracing as { around?: unknown }).around !== 'function' ||
      !['undefined', 'function'].includes(
        typeof (options.tracing as { transaction?: unknown }).transaction,
      ))
  ) {
    fail(
      'tracing',
      'a HandlerTracer (an object with around(trace, run), and optionally transaction(trace))',
      options.tracing,
    );
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
  const binding = resolveBinding(options.binding);
  return {
    globalConfig: redactWhenShown(globalConfig) as ConsumerGlobalConfig,
    topicConfig: redactWhenShown({ ...topicConfig }) as ConsumerTopicConfig,
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
    maxBufferedBytesTotal: positiveInt(
      opts,
      'maxBufferedBytesTotal',
      DEFAULTS.maxBufferedBytesTotal,
    ),
    resumeThreshold,
    onAssign: resolveOnAssign(options.onAssign),
    onRevoke: resolveOnRevoke(options.onRevoke),
    rememberCompleted,
    oauthBearerToken,
    binding,
    sharedBatchBuffers: resolveSharedBatchBuffers(options.sharedBatchBuffers, binding),
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
  const v = checkedOptions(value, REMEMBER_COMPLETED_SCOPE) as {
    topic?: unknown;
    maxRuns?: unknown;
  };
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

function resolveOnAssign(hook: unknown): ReactiveConsumerOptions['onAssign'] {
  if (hook === undefined) return undefined;
  if (typeof hook !== 'function') fail('onAssign', 'a function (partition) => StartPosition', hook);
  return hook as ReactiveConsumerOptions['onAssign'];
}

function resolveOnRevoke(hook: unknown): ReactiveConsumerOptions['onRevoke'] {
  if (hook === undefined) return undefined;
  if (typeof hook !== 'function') {
    fail('onRevoke', 'a function (partitions, { signal, deadline }) => void | Promise<void>', hook);
  }
  return hook as ReactiveConsumerOptions['onRevoke'];
}
