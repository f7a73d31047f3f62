/**
 * Options of `processTransactional()` (exactly-once consume → transform → produce), validated once,
 * with the producer settings exactly-once needs set and the conflicting ones refused.
 * See docs/exactly-once.md.
 */
import { randomUUID } from 'node:crypto';
import type { Observable } from 'rxjs';
import { connectionSettings } from './config';
import type { ConsumerSettings } from './config';
import { ConfigError } from './errors';
import { resolveProcessOptions } from './process-options';
import type { ResolvedProcessOptions } from './process-options';
import type { DecodedMessage, ProcessOptions } from './types';

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

/**
 * `processTransactional()`'s options: `process()`'s, without the dead-letter policy, plus the
 * transactional producer and the size of a transaction.
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
   * @default `${transactionalIdPrefix}-${instanceId}`
   */
  transactionalId?: string;
  /** Prefix of the derived `transactional.id`. @default the consumer's `group.id` */
  transactionalIdPrefix?: string;
  /**
   * This instance's stable name in the derived `transactional.id` (a pod name, a StatefulSet
   * ordinal). @default `group.instance.id` when set, else a random id per consumer (correct, but a
   * crashed instance's open transaction then blocks `read_committed` readers of the output
   * partitions until `transaction.timeout.ms`)
   */
  instanceId?: string;
  /** Most input messages in one transaction. @default 500 */
  maxMessages?: number;
  /** Longest a transaction stays open before it is committed, in ms. @default 100 */
  maxMs?: number;
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
  /** The producer's `transaction.timeout.ms`: the broker aborts a transaction open longer. */
  readonly transactionTimeoutMs: number;
}

/** Producer settings with the only value exactly-once allows. */
const REQUIRED: Record<string, readonly unknown[]> = {
  'enable.idempotence': [true, 'true'],
  acks: ['all', '-1', -1],
  'request.required.acks': ['all', '-1', -1],
};

function positiveInteger(value: unknown, key: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new ConfigError(
      `Expected \`${key}\` to be an integer ≥ 1, got ${JSON.stringify(value) ?? String(value)}`,
      key,
    );
  }
  return value;
}

/** Validates `processTransactional()`'s options against the consumer's settings. */
export function resolveTransactionalOptions(
  options: TransactionalOptions<unknown, unknown>,
  settings: ConsumerSettings,
): ResolvedTransactionalOptions {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError('Expected the options to be an object', 'options');
  }
  const {
    producerConfig: user = {},
    transactionalId,
    transactionalIdPrefix,
    instanceId,
    maxMessages = TRANSACTIONAL_DEFAULTS.maxMessages,
    maxMs = TRANSACTIONAL_DEFAULTS.maxMs,
    ...rest
  } = options;
  if ((rest as { deadLetter?: unknown }).deadLetter !== undefined) {
    throw new ConfigError(
      '`deadLetter` cannot be used with processTransactional(): the dead-letter write would not be part of the transaction',
      'deadLetter',
    );
  }
  const onFailure = (rest as { onFailure?: unknown }).onFailure;
  if (onFailure !== undefined && onFailure !== 'stop' && onFailure !== 'skip') {
    throw new ConfigError(
      `Expected \`onFailure\` to be 'stop' or 'skip' with processTransactional() (a dead-letter write would not be part of the transaction), got ${JSON.stringify(onFailure)}`,
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
      `Expected \`isolation.level\` to be 'read_committed' with processTransactional(), got ${JSON.stringify(isolation)}: the input may be another transactional pipeline's output, and aborted records must not be processed`,
      'isolation.level',
    );
  }
  if (typeof user !== 'object' || user === null) {
    throw new ConfigError(
      'Expected `producerConfig` to be an object of librdkafka settings',
      'producerConfig',
    );
  }
  for (const [key, allowed] of Object.entries(REQUIRED)) {
    const value = user[key];
    if (value !== undefined && !allowed.includes(value)) {
      throw new ConfigError(
        `Expected \`producerConfig.${key}\` to be ${JSON.stringify(allowed[0])} with processTransactional() (exactly once needs an idempotent producer whose writes all replicas acknowledged), got ${JSON.stringify(value)}`,
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
      `Expected \`transactionalId\` to be a non-empty string, got ${JSON.stringify(explicit)}`,
      'transactionalId',
    );
  }
  for (const [key, v] of Object.entries({ transactionalIdPrefix, instanceId })) {
    if (v !== undefined && (typeof v !== 'string' || v === '')) {
      throw new ConfigError(
        `Expected \`${key}\` to be a non-empty string, got ${JSON.stringify(v)}`,
        key,
      );
    }
  }
  const staticId = (settings.globalConfig as Record<string, unknown>)['group.instance.id'];
  const instance =
    instanceId ?? (typeof staticId === 'string' && staticId !== '' ? staticId : randomUUID());
  const id =
    (explicit as string | undefined) ?? `${transactionalIdPrefix ?? settings.groupId}-${instance}`;
  const messages = positiveInteger(maxMessages, 'maxMessages');
  const ms = positiveInteger(maxMs, 'maxMs');
  const producerConfig: Record<string, unknown> = {
    ...connectionSettings(settings.globalConfig as Record<string, unknown>),
    ...user,
    'transactional.id': id,
    'enable.idempotence': true,
    acks: 'all',
  };
  delete producerConfig['request.required.acks'];
  const rawTimeout = producerConfig['transaction.timeout.ms'];
  const txnTimeout = rawTimeout === undefined ? 60_000 : Number(rawTimeout);
  if (!Number.isFinite(txnTimeout) || txnTimeout <= ms + settings.commitTimeoutMs) {
    throw new ConfigError(
      `Expected \`producerConfig.transaction.timeout.ms\` (${String(rawTimeout ?? 60_000)}) to be above \`maxMs\` + \`commitTimeoutMs\` (${ms + settings.commitTimeoutMs}): the broker would abort transactions the library still holds open`,
      'producerConfig.transaction.timeout.ms',
    );
  }
  const process = resolveProcessOptions(rest as ProcessOptions<unknown, unknown>, settings);
  return {
    process,
    transactionalId: id,
    producerConfig,
    maxMessages: messages,
    maxMs: ms,
    transactionTimeoutMs: txnTimeout,
  };
}
