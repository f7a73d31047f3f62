import { checkSaslMechanism, connectionSettings } from './internal/settings/librdkafka-settings';
import {
  DEAD_LETTER_SCOPE,
  PROCESS_SCOPE,
  RETRY_SCOPE,
  checkedOptions,
  readOwn,
} from './internal/settings/option-names';
import { redactWhenShown } from './internal/settings/secrets';
import { showValue } from './internal/settings/show-value';
import type { ConsumerSettings } from './config';
import { resolveDeserializer } from './deserializers';
import { ConfigError } from './errors';
import type {
  DeadLetterOptions,
  Deserializer,
  FailurePolicy,
  Ordering,
  ProcessOptions,
  RetryOptions,
} from './types';

/** Defaults of {@link ProcessOptions}. */
export const PROCESS_DEFAULTS = {
  concurrency: 64,
  partitionConcurrency: 1,
  onFailure: 'stop',
  retry: {
    count: 3,
    initialDelayMs: 100,
    maxDelayMs: 5000,
    factor: 2,
    jitter: 0.2,
    when: () => true,
  },
  /** Upper bound of the dead-letter producer's default `message.timeout.ms`. */
  deadLetterMessageTimeoutMs: 30_000,
} as const;

/** Defaults of `processBatch()`'s batching. */
export const BATCH_DEFAULTS = { maxSize: 100, maxWaitMs: 100 } as const;

/** {@link RetryOptions} with every default applied. */
export type ResolvedRetry = Required<RetryOptions>;

/** {@link ProcessOptions} validated, with every default applied. */
export interface ResolvedProcessOptions {
  readonly concurrency: number;
  readonly partitionConcurrency: number;
  readonly ordering: Ordering;
  readonly key: Deserializer<unknown> | undefined;
  readonly value: Deserializer<unknown> | undefined;
  readonly retry: ResolvedRetry;
  readonly onFailure: FailurePolicy;
  readonly deadLetter:
    (DeadLetterOptions & { readonly producerConfig: Record<string, unknown> }) | undefined;
}

const POLICIES: readonly FailurePolicy[] = ['stop', 'skip', 'dead-letter'];
const ORDERINGS: readonly Ordering[] = ['partition', 'key', 'none'];
/** Kafka's topic name rule. */
const TOPIC_NAME = /^[a-zA-Z0-9._-]{1,249}$/;
/** Producer settings the dead-letter writer owns. */
const OWNED_PRODUCER_SETTINGS = ['dr_cb', 'dr_msg_cb'] as const;

function fail(key: string, expected: string, got: unknown): never {
  throw new ConfigError(`Expected \`${key}\` to be ${expected}, got ${showValue(got)}`, key);
}

function integer(value: unknown, key: string, min: number, allowInfinity = false): number {
  if (allowInfinity && value === Infinity) return Infinity;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    fail(key, `an integer ≥ ${min}`, value);
  }
  return value;
}

function resolveRetry(input: ProcessOptions['retry']): ResolvedRetry {
  const d = PROCESS_DEFAULTS.retry;
  if (input === undefined) return { ...d };
  if (input === false) return { ...d, count: 0 };
  if (typeof input === 'number') return { ...d, count: integer(input, 'retry', 0) };
  if (typeof input !== 'object' || input === null) {
    fail(
      'retry',
      'a retry count, false, or { count, initialDelayMs, maxDelayMs, factor, jitter }',
      input,
    );
  }
  const retry = checkedOptions(input, RETRY_SCOPE) as RetryOptions;
  const count = integer(retry.count ?? d.count, 'retry.count', 0);
  const initialDelayMs = integer(
    retry.initialDelayMs ?? d.initialDelayMs,
    'retry.initialDelayMs',
    0,
  );
  const maxDelayMs = integer(retry.maxDelayMs ?? d.maxDelayMs, 'retry.maxDelayMs', 0);
  if (maxDelayMs < initialDelayMs) {
    fail('retry.maxDelayMs', `≥ retry.initialDelayMs (${initialDelayMs})`, maxDelayMs);
  }
  const factor = retry.factor ?? d.factor;
  if (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 1) {
    fail('retry.factor', 'a number ≥ 1', factor);
  }
  const jitter = retry.jitter ?? d.jitter;
  if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)) {
    fail('retry.jitter', 'a number in [0, 1]', jitter);
  }
  const when = retry.when ?? d.when;
  if (typeof when !== 'function')
    fail('retry.when', 'a function (error, message) => boolean', when);
  return { count, initialDelayMs, maxDelayMs, factor, jitter, when };
}

/** Does `topic` collide with one of the subscribed topics or patterns? */
function subscribedTo(topic: string, topics: readonly string[]): boolean {
  return topics.some((t) => {
    if (!t.startsWith('^')) return t === topic;
    try {
      return new RegExp(t).test(topic);
    } catch {
      return false;
    }
  });
}

function resolveDeadLetter(
  input: DeadLetterOptions,
  settings: ConsumerSettings,
): DeadLetterOptions & { readonly producerConfig: Record<string, unknown> } {
  if (typeof input !== 'object' || input === null) {
    fail('deadLetter', 'an object { topic, producerConfig? }', input);
  }
  const deadLetter = checkedOptions(input, DEAD_LETTER_SCOPE) as Partial<DeadLetterOptions>;
  const { topic } = deadLetter;
  if (typeof topic !== 'string' || !TOPIC_NAME.test(topic)) {
    fail('deadLetter.topic', 'a valid topic name ([a-zA-Z0-9._-], 1–249 characters)', topic);
  }
  if (subscribedTo(topic, settings.topics)) {
    throw new ConfigError(
      `\`deadLetter.topic\` "${topic}" is one of the consumer's own topics: failed messages would be consumed again`,
      'deadLetter.topic',
    );
  }
  const userInput = deadLetter.producerConfig ?? {};
  if (typeof userInput !== 'object' || userInput === null) {
    fail('deadLetter.producerConfig', 'an object of librdkafka producer settings', userInput);
  }
  const user = readOwn(userInput, 'deadLetter.producerConfig');
  checkSaslMechanism(user, 'deadLetter.producerConfig.');
  for (const key of OWNED_PRODUCER_SETTINGS) {
    if (user[key] !== undefined) {
      throw new ConfigError(
        `\`deadLetter.producerConfig.${key}\` cannot be set: the library needs the delivery reports to confirm each dead-letter write`,
        `deadLetter.producerConfig.${key}`,
      );
    }
  }
  const producerConfig: Record<string, unknown> = {
    // The consumer's connection and security settings.
    ...connectionSettings(settings.globalConfig as Record<string, unknown>),
    'enable.idempotence': true,
    'message.timeout.ms': Math.min(
      PROCESS_DEFAULTS.deadLetterMessageTimeoutMs,
      Math.max(1, Math.floor(settings.drainTimeoutMs / 2)),
    ),
    ...user,
    dr_cb: true,
  };
  for (const key of ['message.timeout.ms', 'delivery.timeout.ms']) {
    const raw = user[key];
    if (raw === undefined) continue;
    const ms = typeof raw === 'string' ? Number(raw) : raw;
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 1) {
      fail(`deadLetter.producerConfig.${key}`, 'a positive number of ms', raw);
    }
    if (ms >= settings.drainTimeoutMs) {
      throw new ConfigError(
        `Expected \`deadLetter.producerConfig.${key}\` (${ms}) to be below \`drainTimeoutMs\` (${settings.drainTimeoutMs}): a dead-letter write must be confirmed or fail before a revoke's deadline`,
        `deadLetter.producerConfig.${key}`,
      );
    }
  }
  return { topic, producerConfig: redactWhenShown(producerConfig) };
}

/**
 * Validates `process()` options against the consumer's settings; throws {@link ConfigError}, for
 * an unknown option name too (naming the closest known one).
 */
export function resolveProcessOptions(
  input: ProcessOptions<unknown, unknown>,
  settings: ConsumerSettings,
): ResolvedProcessOptions {
  if (typeof input !== 'object' || input === null) fail('options', 'an object', input);
  const options = checkedOptions(input, PROCESS_SCOPE) as ProcessOptions<unknown, unknown>;
  const concurrency = integer(
    options.concurrency ?? PROCESS_DEFAULTS.concurrency,
    'concurrency',
    1,
    true,
  );
  const partitionConcurrency = integer(
    options.partitionConcurrency ?? PROCESS_DEFAULTS.partitionConcurrency,
    'partitionConcurrency',
    1,
    true,
  );
  const ordering: Ordering =
    options.ordering ?? (partitionConcurrency === 1 ? 'partition' : 'none');
  if (!ORDERINGS.includes(ordering)) {
    fail('ordering', `one of ${ORDERINGS.map((o) => `'${o}'`).join(', ')}`, ordering);
  }
  if (ordering === 'partition' && partitionConcurrency !== 1) {
    throw new ConfigError(
      `\`ordering: 'partition'\` processes one message at a time per partition, but \`partitionConcurrency\` is ${partitionConcurrency}: use ordering 'key' or 'none', or partitionConcurrency 1`,
      'ordering',
    );
  }
  const onFailure =
    options.onFailure ??
    (options.deadLetter !== undefined ? 'dead-letter' : PROCESS_DEFAULTS.onFailure);
  if (!POLICIES.includes(onFailure)) {
    fail('onFailure', `one of ${POLICIES.map((p) => `'${p}'`).join(', ')}`, onFailure);
  }
  if (onFailure === 'dead-letter' && options.deadLetter === undefined) {
    throw new ConfigError(
      "`onFailure: 'dead-letter'` needs `deadLetter: { topic }` naming the dead-letter topic",
      'deadLetter',
    );
  }
  if (onFailure !== 'dead-letter' && options.deadLetter !== undefined) {
    throw new ConfigError(
      `\`deadLetter\` is set but \`onFailure\` is '${onFailure}': no message would ever be dead-lettered; remove one of them`,
      'deadLetter',
    );
  }
  return {
    concurrency,
    partitionConcurrency,
    ordering,
    key: resolveDeserializer(options.key, 'key'),
    value: resolveDeserializer(options.value, 'value'),
    retry: resolveRetry(options.retry),
    onFailure,
    deadLetter:
      options.deadLetter === undefined
        ? undefined
        : resolveDeadLetter(options.deadLetter, settings),
  };
}

/** The delay before retry number `retry` (1-based), with jitter from `random` in [0, 1). */
export function backoffDelay(retry: ResolvedRetry, n: number, random: () => number): number {
  const base = Math.min(retry.maxDelayMs, retry.initialDelayMs * retry.factor ** (n - 1));
  const spread = base * retry.jitter;
  return Math.min(retry.maxDelayMs, Math.max(0, Math.round(base - spread + 2 * spread * random())));
}
