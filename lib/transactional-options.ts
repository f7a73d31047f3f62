/**
 * Options of `processTransactional()` (exactly-once consume → transform → produce), validated once,
 * with the producer settings exactly-once needs set and the conflicting ones refused.
 * See docs/exactly-once.md.
 */
import { randomUUID } from 'node:crypto';
import type { Observable } from 'rxjs';
import { checkSaslMechanism, connectionSettings } from './internal/settings/librdkafka-settings';
import { TRANSACTIONAL_SCOPE, checkedOptions, readOwn } from './internal/settings/option-names';
import { redactWhenShown } from './internal/settings/secrets';
import { showValue } from './internal/settings/show-value';
import type { ConsumerSettings } from './config';
import { ConfigError } from './errors';
import { resolveProcessOptions } from './process-options';
import type { ResolvedProcessOptions } from './process-options';
import type { DecodedMessage, ProcessOptions } from './types';
import type { KafkaBinding } from './binding';
import { assertSameBinding } from './internal/binding/binding';

/** One record a transactional handler writes. */
export interface OutputRecord {
  readonly topic: string;
  /** A string is written as UTF-8. */
  readonly value: Buffer | string | null;
  readonly key?: Buffer | string | null;
  /** Ordered `[key, value]` pairs, as on {@link KafkaMessage.headers}. */
  readonly headers?: readonly (readonly [string, Buffer | string])[];
  /** Without it, the producer's partitioner chooses (by key). */
  readonly partition?: number;
}

/**
 * The handler of `processTransactional()`: the records to write for one input message, as a plain
 * array, a Promise of one, or an Observable of records (or of arrays of records) that completes. An
 * empty array is fine: the message still counts.
 */
export type TransactionalHandler<K = Buffer | null, V = Buffer | null> = (
  message: DecodedMessage<K, V>,
) =>
  | readonly OutputRecord[]
  | Promise<readonly OutputRecord[]>
  | Observable<OutputRecord | readonly OutputRecord[]>;

// An option added here goes into its list in lib/internal/settings/option-names.ts too (the type
// check insists): a name missing there is refused as unknown.
/**
 * `processTransactional()`'s options: `process()`'s, without the dead-letter policy, plus the
 * transactional producer and the size of a transaction. Any other option name is a `ConfigError`
 * naming the closest known one.
 */
export interface TransactionalOptions<K = Buffer | null, V = Buffer | null> extends Omit<
  ProcessOptions<K, V>,
  'deadLetter' | 'onFailure'
> {
  /**
   * What a message that failed for good does: `'stop'` (the open transaction is committed up to
   * the message before it, then the consumer closes with a `HandlerError`), or `'skip'` (it counts
   * with no output). `'dead-letter'` is refused: a separate producer's write is not part of the
   * transaction. @default 'stop'
   */
  onFailure?: 'stop' | 'skip';
  /**
   * librdkafka producer settings of the transactional producer (the consumer's connection and
   * security settings are copied in). `enable.idempotence` is set, `acks` is `all`; settings that
   * contradict them are refused.
   */
  producerConfig?: Record<string, unknown>;
  /**
   * The producer's `transactional.id` (or set `producerConfig['transactional.id']`). It must be
   * unique among the live instances of the application (two producers with one id fence each
   * other) and should be the same across restarts of one instance (a restart then aborts what the
   * crashed one left open at once, instead of after `transaction.timeout.ms`).
   * See docs/exactly-once.md, "The cost of a crash".
   * @default `${transactionalIdPrefix}-${instanceId}`
   */
  transactionalId?: string;
  /** Prefix of the derived `transactional.id`. @default the consumer's `group.id` */
  transactionalIdPrefix?: string;
  /**
   * This instance's stable name in the derived `transactional.id`: unique among the live
   * instances with the same prefix, the same across restarts of one. Set it when the default is
   * not unique (StatefulSets of one name in two namespaces or clusters with the same `group.id`)
   * or not stable (a Deployment's pods: their names change at each restart).
   * @default `group.instance.id` when set; else, in Kubernetes (`KUBERNETES_SERVICE_HOST` set),
   * `HOSTNAME` when it is a StatefulSet pod name (`<name>-<ordinal>`); else a random id per
   * consumer (correct, but a crashed instance's open transaction then blocks `read_committed`
   * readers of the output partitions until `transaction.timeout.ms`)
   */
  instanceId?: string;
  /** Most input messages in one transaction. @default 500 */
  maxMessages?: number;
  /** Longest a transaction stays open before it is committed, in ms. @default 100 */
  maxMs?: number;
  /**
   * The module the transactional producer is built from. It must be the consumer's own `binding`
   * (`sendOffsetsToTransaction` hands the producer the consumer's native object, which another
   * build cannot read): any other module is a `ConfigError`. @default the consumer's `binding`
   */
  binding?: KafkaBinding;
}

/** Defaults of {@link TransactionalOptions}. */
export const TRANSACTIONAL_DEFAULTS = { maxMessages: 500, maxMs: 100 } as const;

/** {@link TransactionalOptions} validated, with every default applied. */
export interface ResolvedTransactionalOptions {
  readonly process: ResolvedProcessOptions;
  readonly transactionalId: string;
  readonly producerConfig: Record<string, unknown>;
  readonly maxMessages: number;
  readonly maxMs: number;
  /**
   * The producer's `transaction.timeout.ms` (the broker aborts a transaction open longer): the
   * user's, or derived from {@link transactionWindowMs} when unset.
   */
  readonly transactionTimeoutMs: number;
  /** Where the `transactional.id` (or its instance part) comes from. */
  readonly identity: TransactionalIdentity;
}

/**
 * Where a `transactional.id` comes from: given (`transactionalId`,
 * `producerConfig['transactional.id']` or `instanceId`), the consumer's `group.instance.id`, the
 * Kubernetes StatefulSet pod name in `HOSTNAME`, or a random id per consumer (not stable across
 * restarts).
 */
export type TransactionalIdentity = 'explicit' | 'group.instance.id' | 'statefulset' | 'random';

/**
 * A StatefulSet pod's name: `<statefulset>-<ordinal>` (a DNS label). A Deployment's pod
 * (`<name>-<hash>-<5 random characters>`) matches only when those five are all digits (rare; its
 * name is then unique among live pods, though not stable across restarts).
 */
const STATEFULSET_POD = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?-\d+$/;

/** librdkafka's most for `transaction.timeout.ms` (an int32). */
const MAX_TRANSACTION_TIMEOUT_MS = 2_147_483_647;

/**
 * The longest a periodic commit of a transaction takes from its first record, in ms: it stays open
 * up to `maxMs`; its commit goes on up to 2 × `commitTimeoutMs` (a partly written message taking
 * half of that); an abort after a failed commit takes up to `commitTimeoutMs`.
 * `transaction.timeout.ms` must be above it. Every commit call of a transaction — a revoke's final
 * commit included, whatever its drain deadline — ends before the transaction's own deadline
 * (`transaction.timeout.ms` after its first record), so the broker never aborts a transaction the
 * library still commits; a revoke whose commit cannot finish by then aborts it, and the next owner
 * redoes its inputs.
 */
export function transactionWindowMs(
  maxMs: number,
  settings: Pick<ConsumerSettings, 'commitTimeoutMs'>,
): number {
  return maxMs + 3 * settings.commitTimeoutMs;
}

/** `transaction.timeout.ms` when the user sets none: the window + 1 s, up to a whole second. */
export function derivedTransactionTimeoutMs(windowMs: number): number {
  return Math.ceil((windowMs + 1000) / 1000) * 1000;
}

/** Producer settings with the only value exactly-once allows. */
const REQUIRED: Record<string, readonly unknown[]> = {
  'enable.idempotence': [true, 'true'],
  acks: ['all', '-1', -1],
  'request.required.acks': ['all', '-1', -1],
};

function positiveInteger(value: unknown, key: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new ConfigError(`Expected \`${key}\` to be an integer ≥ 1, got ${showValue(value)}`, key);
  }
  return value;
}

/**
 * The instance part of a derived `transactional.id` and where it comes from: `instanceId`, else
 * `group.instance.id`, else a StatefulSet pod name (Kubernetes), else a random id.
 */
function instanceOf(
  instanceId: string | undefined,
  settings: ConsumerSettings,
  env: NodeJS.ProcessEnv,
): { readonly instance: string; readonly identity: TransactionalIdentity } {
  if (instanceId !== undefined) return { instance: instanceId, identity: 'explicit' };
  const staticId = (settings.globalConfig as Record<string, unknown>)['group.instance.id'];
  if (typeof staticId === 'string' && staticId !== '') {
    return { instance: staticId, identity: 'group.instance.id' };
  }
  const host = env.HOSTNAME;
  if (
    env.KUBERNETES_SERVICE_HOST !== undefined &&
    env.KUBERNETES_SERVICE_HOST !== '' &&
    host !== undefined &&
    STATEFULSET_POD.test(host)
  ) {
    return { instance: host, identity: 'statefulset' };
  }
  return { instance: randomUUID(), identity: 'random' };
}

/**
 * `producerConfig['transaction.timeout.ms']` checked against {@link transactionWindowMs}, or
 * derived from it when unset.
 */
function transactionTimeout(raw: unknown, maxMs: number, settings: ConsumerSettings): number {
  const key = 'producerConfig.transaction.timeout.ms';
  const windowMs = transactionWindowMs(maxMs, settings);
  const derived = derivedTransactionTimeoutMs(windowMs);
  if (raw === undefined) return derived;
  const value =
    typeof raw === 'number'
      ? raw
      : typeof raw === 'string' && /^\d+$/.test(raw)
        ? Number(raw)
        : NaN;
  if (!Number.isInteger(value) || value > MAX_TRANSACTION_TIMEOUT_MS) {
    throw new ConfigError(
      `Expected \`${key}\` to be an integer number of ms (a number or a string of digits, at most ${MAX_TRANSACTION_TIMEOUT_MS}), got ${showValue(raw)}`,
      key,
    );
  }
  if (value <= windowMs) {
    const commit = settings.commitTimeoutMs;
    throw new ConfigError(
      `Expected \`${key}\` to be above ${windowMs} (\`maxMs\` ${maxMs} + 2 × \`commitTimeoutMs\` ${2 * commit} for the commit + \`commitTimeoutMs\` ${commit} for an abort: the longest a periodic commit of a transaction may take), got ${value}: the broker would abort transactions before the library could commit them. Raise it, lower \`commitTimeoutMs\` or \`maxMs\`, or leave it unset to have it derived (${derived} with these settings)`,
      key,
    );
  }
  return value;
}

/**
 * Validates `processTransactional()`'s options against the consumer's settings. `env` is where a
 * StatefulSet pod name is looked for (`KUBERNETES_SERVICE_HOST`, `HOSTNAME`).
 */
export function resolveTransactionalOptions(
  input: TransactionalOptions<unknown, unknown>,
  settings: ConsumerSettings,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedTransactionalOptions {
  if (typeof input !== 'object' || input === null) {
    throw new ConfigError(
      `Expected the options to be an object, got ${showValue(input)}`,
      'options',
    );
  }
  if (Object.hasOwn(input, 'deadLetter')) {
    throw new ConfigError(
      '`deadLetter` cannot be used with processTransactional(): the dead-letter write would not be part of the transaction',
      'deadLetter',
    );
  }
  const {
    producerConfig: userInput = {},
    transactionalId,
    transactionalIdPrefix,
    instanceId,
    maxMessages = TRANSACTIONAL_DEFAULTS.maxMessages,
    maxMs = TRANSACTIONAL_DEFAULTS.maxMs,
    binding,
    ...rest
  } = checkedOptions(input, TRANSACTIONAL_SCOPE) as TransactionalOptions<unknown, unknown>;
  assertSameBinding(settings.binding, binding);
  const onFailure = (rest as { onFailure?: unknown }).onFailure;
  if (onFailure !== undefined && onFailure !== 'stop' && onFailure !== 'skip') {
    throw new ConfigError(
      `Expected \`onFailure\` to be 'stop' or 'skip' with processTransactional() (a dead-letter write would not be part of the transaction), got ${showValue(onFailure)}`,
      'onFailure',
    );
  }
  if (settings.rememberCompleted !== undefined) {
    throw new ConfigError(
      '`rememberCompleted` cannot be used with processTransactional(): offsets finished out of order are not committed, their outputs are written in offset order',
      'rememberCompleted',
    );
  }
  const isolation = (settings.globalConfig as Record<string, unknown>)['isolation.level'];
  if (isolation !== undefined && isolation !== 'read_committed') {
    throw new ConfigError(
      `Expected \`isolation.level\` to be 'read_committed' with processTransactional(), got ${showValue(isolation)}: the input may be another transactional pipeline's output, and aborted records must not be processed`,
      'isolation.level',
    );
  }
  if (typeof userInput !== 'object' || userInput === null) {
    throw new ConfigError(
      `Expected \`producerConfig\` to be an object of librdkafka settings, got ${showValue(userInput)}`,
      'producerConfig',
    );
  }
  const user = readOwn(userInput, 'producerConfig');
  checkSaslMechanism(user, 'producerConfig.');
  for (const [key, allowed] of Object.entries(REQUIRED)) {
    const value = user[key];
    if (value !== undefined && !allowed.includes(value)) {
      throw new ConfigError(
        `Expected \`producerConfig.${key}\` to be ${JSON.stringify(allowed[0])} with processTransactional() (exactly once needs an idempotent producer whose writes all replicas acknowledged), got ${showValue(value)}`,
        `producerConfig.${key}`,
      );
    }
  }
  for (const key of ['dr_cb', 'dr_msg_cb']) {
    if (user[key] !== undefined) {
      throw new ConfigError(
        `\`producerConfig.${key}\` cannot be set: a record's fate is the transaction's, reported by the commit`,
        `producerConfig.${key}`,
      );
    }
  }
  const configuredId = user['transactional.id'];
  if (
    configuredId !== undefined &&
    transactionalId !== undefined &&
    configuredId !== transactionalId
  ) {
    throw new ConfigError(
      'Set the transactional id once: `transactionalId` and `producerConfig.transactional.id` differ',
      'transactionalId',
    );
  }
  const explicit = transactionalId ?? configuredId;
  if (explicit !== undefined && (typeof explicit !== 'string' || explicit === '')) {
    throw new ConfigError(
      `Expected \`transactionalId\` to be a non-empty string, got ${showValue(explicit)}`,
      'transactionalId',
    );
  }
  for (const [key, v] of Object.entries({ transactionalIdPrefix, instanceId })) {
    if (v !== undefined && (typeof v !== 'string' || v === '')) {
      throw new ConfigError(
        `Expected \`${key}\` to be a non-empty string, got ${showValue(v)}`,
        key,
      );
    }
  }
  const source = explicit === undefined ? instanceOf(instanceId, settings, env) : undefined;
  const id =
    source === undefined
      ? (explicit as string)
      : `${transactionalIdPrefix ?? settings.groupId}-${source.instance}`;
  const messages = positiveInteger(maxMessages, 'maxMessages');
  const ms = positiveInteger(maxMs, 'maxMs');
  const transactionTimeoutMs = transactionTimeout(user['transaction.timeout.ms'], ms, settings);
  const producerConfig: Record<string, unknown> = {
    ...connectionSettings(settings.globalConfig as Record<string, unknown>),
    ...user,
    'transactional.id': id,
    'transaction.timeout.ms': transactionTimeoutMs,
    'enable.idempotence': true,
    acks: 'all',
  };
  delete producerConfig['request.required.acks'];
  const processOptions = resolveProcessOptions(rest as ProcessOptions<unknown, unknown>, settings);
  return {
    process: processOptions,
    transactionalId: id,
    producerConfig: redactWhenShown(producerConfig),
    maxMessages: messages,
    maxMs: ms,
    transactionTimeoutMs,
    identity: source?.identity ?? 'explicit',
  };
}
