import assert from 'node:assert/strict';
import { DeserializationError } from '../../lib';
import type { KafkaMessage } from '../../lib';
import { decodeMessage } from '../../lib/internal/process/decoding';

const message = (value: string | null, key: string | null = 'k'): KafkaMessage =>
  ({
    topic: 'orders',
    partition: 2,
    offset: 7,
    key: key === null ? null : Buffer.from(key),
    value: value === null ? null : Buffer.from(value),
  }) as unknown as KafkaMessage;

describe('decodeMessage (process() deserializers)', () => {
  it('hands the message itself over when no deserializer is set', () => {
    const m = message('v');
    assert.equal(decodeMessage(m, { key: undefined, value: undefined }), m);
  });

  it('decodes key and value synchronously, keeping the coordinates', () => {
    const out = decodeMessage<string, unknown>(message('{"a":1}'), {
      key: (b) => b?.toString() ?? null,
      value: (b) => JSON.parse(String(b)) as unknown,
    });
    assert.ok(!(out instanceof Promise));
    assert.deepEqual([out.key, out.value, out.offset, out.partition], ['k', { a: 1 }, 7, 2]);
  });

  it('turns a throwing deserializer into a DeserializationError naming the part and the message', () => {
    assert.throws(
      () =>
        decodeMessage(message('not json'), {
          key: undefined,
          value: (b) => JSON.parse(String(b)) as unknown,
        }),
      (err: unknown) =>
        err instanceof DeserializationError &&
        err.part === 'value' &&
        err.coordinates.offset === 7 &&
        err.message.includes('orders[2]@7'),
    );
  });

  it('waits for an async deserializer, and rejects with a DeserializationError when it fails', async () => {
    const ok = decodeMessage<string, string>(message('v'), {
      key: async (b) => `key:${String(b)}`,
      value: undefined,
    });
    assert.ok(ok instanceof Promise);
    assert.equal((await ok).key, 'key:k');
    const bad = decodeMessage(message('v'), {
      key: () => Promise.reject(new Error('registry down')),
      value: undefined,
    });
    await assert.rejects(
      bad as Promise<unknown>,
      (err: unknown) =>
        err instanceof DeserializationError &&
        err.part === 'key' &&
        /registry down/.test(err.message),
    );
  });
});
