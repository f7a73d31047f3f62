import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import * as Kafka from 'node-rdkafka';
import {
  ConfigError,
  NativeFeatureMissingError,
  ReactiveConsumer,
  assertNativeFeatures,
  nativeInfo,
} from '../lib';
import type { KafkaBinding } from '../lib';

/**
 * The `binding` option: every client a consumer creates comes from the module given (checked by
 * a module whose classes record what they were asked to build), a module that is not
 * node-rdkafka-shaped is a ConfigError naming what it lacks, a transactional producer of another
 * module is refused, and health() names the binding.
 */
describe('binding option', () => {
  const base = {
    config: { 'bootstrap.servers': '127.0.0.1:1', 'group.id': 'binding-spec' },
    topics: ['t'],
    connectTimeoutMs: 100,
  };
  const stockVersion = (
    JSON.parse(readFileSync(require.resolve('node-rdkafka/package.json'), 'utf8')) as {
      version: string;
    }
  ).version.replace(/^v/, '');

  /** A node-rdkafka-compatible module that records each client it builds. */
  function recordingBinding(): { binding: KafkaBinding; built: string[] } {
    const built: string[] = [];
    class KafkaConsumer extends Kafka.KafkaConsumer {
      constructor(...args: ConstructorParameters<typeof Kafka.KafkaConsumer>) {
        super(...args);
        built.push('consumer');
      }
    }
    class Producer extends Kafka.Producer {
      constructor(...args: ConstructorParameters<typeof Kafka.Producer>) {
        super(...args);
        const config = args[0] as Record<string, unknown>;
        built.push(config['transactional.id'] === undefined ? 'producer' : 'transactional');
      }
    }
    const binding: KafkaBinding = {
      KafkaConsumer,
      Producer,
      AdminClient: Kafka.AdminClient,
      librdkafkaVersion: Kafka.librdkafkaVersion,
      features: Kafka.features,
      name: 'recording-binding',
      version: '1.2.3',
    };
    return { binding, built };
  }

  it('defaults to node-rdkafka, and health() names it', async () => {
    const consumer = new ReactiveConsumer({ ...base });
    assert.equal(consumer.settings.binding.KafkaConsumer, Kafka.KafkaConsumer);
    assert.deepEqual(consumer.health().details.binding, {
      name: 'node-rdkafka',
      version: stockVersion,
      librdkafkaVersion: Kafka.librdkafkaVersion,
      batchConversion: false,
      sharedBatchBuffers: false,
    });
    await consumer.close();
  });

  it('sharedBatchBuffers: turned on in a binding that can share its batch buffers, refused by one that cannot', async () => {
    const calls: (boolean | number)[] = [];
    class SharingConsumer extends Kafka.KafkaConsumer {
      static readonly batchBufferBounds = true;
      setBatchBufferSharing(shared: boolean | number): void {
        calls.push(shared);
      }
    }
    const sharing: KafkaBinding = { ...Kafka, KafkaConsumer: SharingConsumer, name: 'sharing' };
    const consumer = new ReactiveConsumer({ ...base, binding: sharing, sharedBatchBuffers: true });
    assert.deepEqual(calls, [true]);
    assert.equal(consumer.health().details.binding.sharedBatchBuffers, true);
    await consumer.close();
    const bounded = new ReactiveConsumer({ ...base, binding: sharing, sharedBatchBuffers: 8192 });
    assert.deepEqual(calls, [true, 8192]);
    assert.equal(bounded.health().details.binding.sharedBatchBuffers, 8192);
    await bounded.close();
    const off = new ReactiveConsumer({ ...base, binding: sharing });
    assert.deepEqual(calls, [true, 8192], 'off by default');
    assert.equal(off.health().details.binding.sharedBatchBuffers, false);
    await off.close();
    // A build of the companion from before 0.2.0: views, but no bound.
    class OlderSharingConsumer extends Kafka.KafkaConsumer {
      setBatchBufferSharing(): void {}
    }
    const older: KafkaBinding = { ...Kafka, KafkaConsumer: OlderSharingConsumer, name: 'older' };
    for (const [options, message] of [
      [{ sharedBatchBuffers: true }, /needs a binding that converts batches.*node-rdkafka has not/],
      [{ sharedBatchBuffers: 4096 }, /needs a binding that converts batches.*node-rdkafka has not/],
      [
        { sharedBatchBuffers: 'yes' },
        /Expected `sharedBatchBuffers` to be false, true or a whole number of bytes ≥ 1, got "yes"/,
      ],
      [{ sharedBatchBuffers: 0 }, /a whole number of bytes ≥ 1, got 0/],
      [{ sharedBatchBuffers: 1.5 }, /a whole number of bytes ≥ 1, got 1\.5/],
      [
        { sharedBatchBuffers: 8192, binding: older },
        /`sharedBatchBuffers: 8192` needs a build of the binding that bounds.*older .* has not/,
      ],
    ] as const) {
      assert.throws(
        () => new ReactiveConsumer({ ...base, ...(options as object) }),
        (err: unknown) =>
          err instanceof ConfigError &&
          err.key === 'sharedBatchBuffers' &&
          message.test(err.message),
      );
    }
    const olderViews = new ReactiveConsumer({ ...base, binding: older, sharedBatchBuffers: true });
    assert.equal(olderViews.health().details.binding.sharedBatchBuffers, true);
    await olderViews.close();
  });

  it('node-rdkafka passed explicitly is named as the default', async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const required = require('node-rdkafka') as KafkaBinding;
    const consumer = new ReactiveConsumer({ ...base, binding: required });
    assert.equal(consumer.health().details.binding.name, 'node-rdkafka');
    await consumer.close();
  });

  it('builds the consumer and the dead-letter producer from the module given', async () => {
    const { binding, built } = recordingBinding();
    const consumer = new ReactiveConsumer({ ...base, binding });
    assert.deepEqual(built, ['consumer']);
    const sub = consumer
      .process(() => undefined, { onFailure: 'dead-letter', deadLetter: { topic: 'dlq' } })
      .subscribe({ error: () => undefined });
    assert.deepEqual(built, ['consumer', 'producer']);
    assert.deepEqual(consumer.health().details.binding, {
      name: 'recording-binding',
      version: '1.2.3',
      librdkafkaVersion: Kafka.librdkafkaVersion,
      batchConversion: false,
      sharedBatchBuffers: false,
    });
    sub.unsubscribe();
    await consumer.close();
  });

  it("builds the transactional producer from the consumer's module, and refuses another", async () => {
    const { binding, built } = recordingBinding();
    const consumer = new ReactiveConsumer({ ...base, binding });
    // Another build: its clients share a base of their own, not node-rdkafka's Client.
    class OtherClient extends EventEmitter {}
    const other = {
      ...Kafka,
      KafkaConsumer: class extends OtherClient {} as never,
      Producer: class extends OtherClient {} as never,
    };
    assert.throws(
      () => consumer.processTransactional(() => [], { binding: other }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.key === 'binding' &&
        /same module as the consumer/.test(e.message),
    );
    const sub = consumer
      .processTransactional(() => [], { binding, transactionalId: 'binding-spec-tx' })
      .subscribe({ error: () => undefined });
    assert.deepEqual(built, ['consumer', 'transactional']);
    sub.unsubscribe();
    await consumer.close();
  });

  const refused: [string, unknown, RegExp][] = [
    ['null', null, /got null/],
    ['a string', 'node-rdkafka', /got string/],
    ['an empty object', {}, /no KafkaConsumer, Producer, AdminClient, librdkafkaVersion, features/],
    [
      'a module without AdminClient',
      { ...Kafka, AdminClient: undefined },
      /it has no AdminClient$/,
    ],
  ];
  for (const [what, binding, pattern] of refused) {
    it(`refuses ${what} as binding, naming what is missing`, () => {
      assert.throws(
        () => new ReactiveConsumer({ ...base, binding: binding as KafkaBinding }),
        (e: unknown) => e instanceof ConfigError && e.key === 'binding' && pattern.test(e.message),
      );
    });
  }

  it('nativeInfo() and assertNativeFeatures() read the binding given, node-rdkafka by default', () => {
    const lacking = { librdkafkaVersion: '9.9.9', features: ['gzip', 'ssl'] };
    assert.deepEqual(nativeInfo(lacking), {
      librdkafkaVersion: '9.9.9',
      features: ['gzip', 'ssl'],
    });
    assert.equal(nativeInfo().librdkafkaVersion, Kafka.librdkafkaVersion);
    assert.throws(
      () => assertNativeFeatures(['zstd', 'ssl'], lacking),
      (e: unknown) =>
        e instanceof NativeFeatureMissingError &&
        /The binding's librdkafka 9\.9\.9 was built without zstd/.test(e.message) &&
        /libzstd-dev/.test(e.message),
    );
    assert.doesNotThrow(() => assertNativeFeatures(['ssl'], lacking));
  });

  it('reads an ES namespace of the CommonJS module through its default export (native ESM)', async () => {
    const { binding, built } = recordingBinding();
    const consumer = new ReactiveConsumer({ ...base, binding: { default: binding } as never });
    assert.deepEqual(built, ['consumer']);
    assert.equal(consumer.health().details.binding.name, 'recording-binding');
    await consumer.close();
  });

  it('refuses a module mixing two builds, and a transactional producer of another build', async () => {
    const { binding } = recordingBinding();
    class OtherClient extends EventEmitter {}
    class OtherProducer extends OtherClient {}
    const mixed = { ...binding, Producer: OtherProducer as never };
    assert.throws(
      () => new ReactiveConsumer({ ...base, binding: mixed }),
      (e: unknown) =>
        e instanceof ConfigError && e.key === 'binding' && /different modules/.test(e.message),
    );
    // A subclass of a module's consumer is still that module: its producer may send its offsets.
    class Sharing extends binding.KafkaConsumer {}
    const consumer = new ReactiveConsumer({
      ...base,
      binding: { ...binding, KafkaConsumer: Sharing },
    });
    const sub = consumer
      .processTransactional(() => [], { binding, transactionalId: 'binding-spec-sub' })
      .subscribe({ error: () => undefined });
    sub.unsubscribe();
    assert.throws(
      () =>
        consumer.processTransactional(() => [], {
          binding: {
            ...Kafka,
            Producer: OtherProducer as never,
            KafkaConsumer: OtherProducer as never,
          },
        }),
      (e: unknown) => e instanceof ConfigError && e.key === 'binding',
    );
    await consumer.close();
  });

  it('names a binding problem as such: a Promise, a throwing getter, a consumer that is not one', () => {
    const refusedWith = (binding: unknown, pattern: RegExp) =>
      assert.throws(
        () => new ReactiveConsumer({ ...base, binding: binding as KafkaBinding }),
        (e: unknown) => e instanceof ConfigError && e.key === 'binding' && pattern.test(e.message),
      );
    refusedWith(Promise.resolve(Kafka), /a Promise: `await import/);
    refusedWith(
      Object.defineProperty({ ...Kafka }, 'features', {
        get() {
          throw new Error('boom');
        },
      }),
      /reading it failed \(boom\)/,
    );
    const { binding } = recordingBinding();
    refusedWith(
      {
        ...binding,
        KafkaConsumer: class extends binding.KafkaConsumer {
          constructor(...args: ConstructorParameters<typeof Kafka.KafkaConsumer>) {
            super(...args);
            return {} as never;
          }
        },
      },
      /KafkaConsumer to build a node-rdkafka consumer/,
    );
  });

  it('keeps a snapshot of what it uses: no whole module in the settings or in JSON', async () => {
    const consumer = new ReactiveConsumer({ ...base });
    const json = JSON.stringify(consumer);
    assert.ok(!json.includes('CODES'), 'no module constants in the JSON');
    assert.ok(Object.isFrozen(consumer.settings.binding));
    await consumer.close();
  });
});
