import { ConfigError } from './errors';
import { showValue } from './internal/settings/show-value';
import type { Deserializer, DeserializerSpec } from './types';

/**
 * UTF-8 JSON, optionally checked by `validate` (for example a schema check): return `false` or
 * throw to reject the value. A type guard gives the value its type.
 */
function json<T>(validate: (value: unknown) => value is T): Deserializer<T | null>;
function json<T = unknown>(validate?: (value: unknown) => boolean | void): Deserializer<T | null>;
function json<T>(validate?: (value: unknown) => boolean | void): Deserializer<T | null> {
  return (data) => {
    if (data === null) return null;
    const value: unknown = JSON.parse(data.toString('utf8'));
    if (validate !== undefined && validate(value) === false) {
      throw new Error('the value failed validation');
    }
    return value as T;
  };
}

/**
 * Built-in deserializers for `process()`'s `key` and `value` options. A `null` payload (no key, a
 * tombstone) stays `null`; anything else that cannot be decoded throws, and the message follows the
 * failure policy with a `DeserializationError`.
 */
export const deserializers = {
  /** The bytes as they are. */
  buffer(): Deserializer<Buffer | null> {
    return (data) => data;
  },

  /** Text in the given encoding (UTF-8 by default). */
  string(encoding: BufferEncoding = 'utf8'): Deserializer<string | null> {
    return (data) => (data === null ? null : data.toString(encoding));
  },

  /**
   * UTF-8 JSON, optionally checked by `validate` (for example a schema check): return `false` or
   * throw to reject the value. A type guard gives the value its type.
   */
  json,
};

/** Resolves a {@link DeserializerSpec} (name or function); `undefined` when the bytes pass as they are. */
export function resolveDeserializer<T>(
  spec: DeserializerSpec<T> | undefined,
  option: 'key' | 'value',
): Deserializer<T> | undefined {
  if (spec === undefined || spec === 'buffer') return undefined;
  if (spec === 'string') return deserializers.string() as Deserializer<T>;
  if (spec === 'json') return deserializers.json() as Deserializer<T>;
  if (typeof spec === 'function') return spec;
  throw new ConfigError(
    `Expected \`${option}\` to be 'buffer', 'string', 'json' or a function (data, message) => value, got ${showValue(spec)}`,
    option,
  );
}
