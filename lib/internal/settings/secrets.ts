/**
 * Secret-bearing librdkafka settings never leave the process through the library: the settings'
 * `toJSON` and `util.inspect` show them as `[redacted]` (the objects handed to node-rdkafka keep
 * them: these hooks are non-enumerable, so copies and the binding see only the real keys).
 */
import { inspect } from 'node:util';

/** What a redacted value reads as. */
export const REDACTED = '[redacted]';

/** librdkafka's own sensitive properties (rdkafka_conf.c), besides what the patterns below catch. */
const SENSITIVE = new Set([
  'sasl.username',
  'sasl.oauthbearer.config',
  'sasl.oauthbearer.extensions',
  'ssl.key.location',
  'ssl.key.pem',
  'ssl_key',
  'ssl.ca.pem',
]);

/**
 * Whether a librdkafka setting carries a secret: librdkafka's sensitive properties, and any key
 * naming a password, a secret, a private key or a keystore.
 */
export function isSecretKey(key: string): boolean {
  return SENSITIVE.has(key) || /password|secret|private\.key|^ssl\.keystore\./i.test(key);
}

/** A copy of `config` with every secret value replaced by {@link REDACTED}. */
export function redacted(config: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    out[key] = isSecretKey(key) && value !== undefined ? REDACTED : value;
  }
  return out;
}

/**
 * Gives `config` a non-enumerable `toJSON` and `util.inspect` hook that show it redacted; returns
 * it (the same object: node-rdkafka still gets the real values).
 */
export function redactWhenShown<T extends object>(config: T): T {
  const show = (): Record<string, unknown> => redacted(config as Record<string, unknown>);
  Object.defineProperty(config, 'toJSON', { value: show, enumerable: false });
  Object.defineProperty(config, inspect.custom, {
    value: (_depth: number, options: object) => inspect(show(), options),
    enumerable: false,
  });
  return config;
}
