import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as Kafka from 'node-rdkafka';
import { ConfigError, ReactiveConsumer } from '../lib';
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
    });
    await consumer.close();
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
    });
    sub.unsubscribe();
    await consumer.close();
  });

  it("builds the transactional producer from the consumer's module, and refuses another", async () => {
    const { binding, built } = recordingBinding();
    const consumer = new ReactiveConsumer({ ...base, binding });
    const other = recordingBinding().binding;
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
});
