/**
 * The librdkafka settings the library owns or refuses, the prefetch bounds it applies, what helper
 * clients inherit, and librdkafka's configuration errors as {@link ConfigError}s.
 */
import { ConfigError } from '../../errors';
import { closestName } from './option-names';
import { showValue } from './show-value';

/** librdkafka settings the library owns; a conflicting user value is rejected, never overridden. */
export const OWNED_SETTINGS: Record<string, { allowed: unknown; why: string }> = {
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
export const MIN_LOG_LEVEL = 4;

/** Settings librdkafka refuses with `group.protocol=consumer` (KIP-848 moves them to the broker). */
export const CLASSIC_ONLY_SETTINGS = [
  'session.timeout.ms',
  'heartbeat.interval.ms',
  'partition.assignment.strategy',
  'group.protocol.type',
] as const;

/**
 * The SASL mechanisms librdkafka supports, spelt as it compares them (exactly: `plain` is refused
 * when it connects).
 */
export const SASL_MECHANISMS = [
  'GSSAPI',
  'PLAIN',
  'SCRAM-SHA-256',
  'SCRAM-SHA-512',
  'OAUTHBEARER',
] as const;

/**
 * Refuses a `sasl.mechanisms` (or its alias `sasl.mechanism`) librdkafka does not support: it
 * accepts any string when the client is built and refuses it only when it connects. `prefix` is
 * where `config` sits in the options (`deadLetter.producerConfig.`).
 */
export function checkSaslMechanism(config: Record<string, unknown>, prefix = ''): void {
  for (const key of ['sasl.mechanisms', 'sasl.mechanism']) {
    const value = config[key];
    if (value === undefined || (SASL_MECHANISMS as readonly unknown[]).includes(value)) continue;
    const closest = typeof value === 'string' ? closestName(value, SASL_MECHANISMS) : undefined;
    throw new ConfigError(
      `Expected \`${prefix}${key}\` to be one of ${SASL_MECHANISMS.join(', ')} (librdkafka's names, in capitals), got ${showValue(value)}${closest === undefined ? '' : `: did you mean \`${closest}\`?`}`,
      `${prefix}${key}`,
    );
  }
}

/**
 * librdkafka prefetch bounds applied when the user sets none: librdkafka's own defaults
 * (64 MiB and 100k messages per partition queue) would dwarf the library's buffer limits.
 */
export const DEFAULT_PREFETCH: Readonly<Record<string, number>> = {
  'queued.max.messages.kbytes': 8192,
  'queued.min.messages': 10_000,
  // With the bounds above, librdkafka's default backoff (1000 ms) idles a partition for a second
  // every time its queue fills: measured at 0.35× the raw binding (100 B) and 0.06× (1 KiB).
  'fetch.queue.backoff.ms': 10,
};

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

/**
 * Translates an error thrown by librdkafka's configuration checks (node-rdkafka's constructor)
 * into a {@link ConfigError} naming the key.
 */
export function translateLibrdkafkaConfigError(err: unknown): ConfigError {
  const message = err instanceof Error ? err.message : String(err);
  const key = /configuration property:? "?([\w.-]+)/.exec(message)?.[1] ?? 'config';
  return new ConfigError(`librdkafka rejected the configuration: ${message}`, key, { cause: err });
}
