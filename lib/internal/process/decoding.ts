/**
 * Decoding a message's key and value with `process()`'s deserializers, and the small helpers the
 * per-message path shares.
 */
import { DeserializationError } from '../../errors';
import type { KafkaCoordinates } from '../../errors';
import type { ResolvedProcessOptions } from '../../process-options';
import type { DecodedMessage, KafkaMessage } from '../../types';
import { errorMessage } from '../binding/rdkafka';

export const coordinatesOf = (m: KafkaMessage): KafkaCoordinates => ({
  topic: m.topic,
  partition: m.partition,
  offset: m.offset,
});

export const describe = errorMessage;

export const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  value !== null &&
  typeof value === 'object' &&
  typeof (value as PromiseLike<unknown>).then === 'function';

/**
 * Decodes key and value. Synchronous deserializers give the message at once; an async one (a
 * schema-registry lookup) gives a Promise. Either way a failure is a DeserializationError.
 */
export function decodeMessage<K, V>(
  message: KafkaMessage,
  options: Pick<ResolvedProcessOptions, 'key' | 'value'>,
): DecodedMessage<K, V> | Promise<DecodedMessage<K, V>> {
  if (options.key === undefined && options.value === undefined) {
    return message as unknown as DecodedMessage<K, V>;
  }
  return decodeWith<K, V>(message, options);
}

/**
 * {@link decodeMessage} with at least one deserializer. A function of its own: its closures make
 * V8 allocate a context at every call, which the common path (no deserializers) must not pay.
 */
function decodeWith<K, V>(
  message: KafkaMessage,
  options: Pick<ResolvedProcessOptions, 'key' | 'value'>,
): DecodedMessage<K, V> | Promise<DecodedMessage<K, V>> {
  const { key: keyOf, value: valueOf } = options;
  const failed = (part: 'key' | 'value', err: unknown): DeserializationError =>
    new DeserializationError(
      `Could not decode the ${part} of ${message.topic}[${message.partition}]@${message.offset}: ${describe(err)}`,
      coordinatesOf(message),
      part,
      { cause: err },
    );
  const run = (part: 'key' | 'value', fn: typeof keyOf, data: Buffer | null): unknown => {
    if (fn === undefined) return data;
    let out: unknown;
    try {
      out = fn(data, message);
    } catch (err) {
      throw failed(part, err);
    }
    return isPromiseLike(out)
      ? Promise.resolve(out).catch((err: unknown) => {
          throw failed(part, err);
        })
      : out;
  };
  const key = run('key', keyOf, message.key);
  const value = run('value', valueOf, message.value);
  if (!isPromiseLike(key) && !isPromiseLike(value)) {
    return { ...message, key: key as K, value: value as V };
  }
  const decoded = Promise.all([key, value]).then(([k, v]) => ({
    ...message,
    key: k as K,
    value: v as V,
  }));
  // Its failure is handled where the unit runs; a unit dropped before it runs (a revoke) must
  // not leave an unhandled rejection behind.
  decoded.catch(() => undefined);
  return decoded;
}
