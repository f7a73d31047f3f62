import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import { ConfigError } from '../lib';
import type { ReactiveConsumerOptions, TransactionalOptions } from '../lib';
import { resolveSettings } from '../lib/internal/settings/resolve-settings';
import { resolveTransactionalOptions } from '../lib/transactional-options';

const KEY = 'producerConfig.transaction.timeout.ms';
const RANDOM_ID = /^g-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Consumer settings as the ReactiveConsumer resolves them, with `options` on top. */
const settingsWith = (options: Partial<ReactiveConsumerOptions> = {}) =>
  resolveSettings({
    topics: ['orders'],
    ...options,
    config: { 'bootstrap.servers': 'fake:9092', 'group.id': 'g', ...(options.config ?? {}) },
  });

const resolve = (
  options: TransactionalOptions<unknown, unknown>,
  consumer: Partial<ReactiveConsumerOptions> = {},
  env: NodeJS.ProcessEnv = {},
) => resolveTransactionalOptions(options, settingsWith(consumer), env);

const timeoutOf = (
  options: TransactionalOptions<unknown, unknown>,
  consumer: Partial<ReactiveConsumerOptions> = {},
): number => {
  const resolved = resolve(options, consumer);
  assert.equal(resolved.producerConfig['transaction.timeout.ms'], resolved.transactionTimeoutMs);
  return resolved.transactionTimeoutMs;
};

/** Asserts a ConfigError on `transaction.timeout.ms` whose message matches every pattern. */
const refusesTimeout = (
  value: unknown,
  consumer: Partial<ReactiveConsumerOptions> = {},
  ...patterns: RegExp[]
) =>
  assert.throws(
    () => resolve({ producerConfig: { 'transaction.timeout.ms': value } }, consumer),
    (e: unknown) =>
      e instanceof ConfigError && e.key === KEY && patterns.every((p) => p.test(e.message)),
    `refuses ${JSON.stringify(value)}`,
  );

describe('resolveTransactionalOptions', () => {
  describe('transaction.timeout.ms', () => {
    it('is derived when unset: maxMs + 3 × commitTimeoutMs, plus 1 s, up to a whole second — below librdkafka’s 60 s with the defaults, whatever the drain deadline', () => {
      // Defaults: maxMs 100, commitTimeoutMs 10000: 30100 → 32000 (drainTimeoutMs 180000 plays
      // no part: a revoke's commit ends by the transaction's own deadline).
      assert.equal(timeoutOf({}), 32_000);
      assert.equal(timeoutOf({}, { drainTimeoutMs: 10_000 }), 32_000);
      // 500 + 6000 = 6500 → 8000.
      assert.equal(timeoutOf({ maxMs: 500 }, { commitTimeoutMs: 2000 }), 8000);
      // A window of whole seconds still gets its margin: 1000 + 9000 = 10000 → 11000.
      assert.equal(timeoutOf({ maxMs: 1000 }, { commitTimeoutMs: 3000 }), 11_000);
    });

    it('refuses a value at or below the longest a periodic commit may take, and takes one 1 ms above it — librdkafka’s 60000 with the defaults included', () => {
      // Defaults: 100 + 3 × 10000 = 30100.
      for (const value of [30_100, 20_000, 1000]) {
        refusesTimeout(
          value,
          {},
          /above 30100/,
          /`maxMs` 100/,
          /2 × `commitTimeoutMs` 20000/,
          /`commitTimeoutMs` 10000/,
          /got /,
          /derived \(32000/,
        );
      }
      assert.equal(timeoutOf({ producerConfig: { 'transaction.timeout.ms': 30_101 } }), 30_101);
      assert.equal(timeoutOf({ producerConfig: { 'transaction.timeout.ms': 60_000 } }), 60_000);
      const short = { drainTimeoutMs: 12_000, commitTimeoutMs: 4000 };
      refusesTimeout(12_100, short, /above 12100/);
      assert.equal(
        timeoutOf({ producerConfig: { 'transaction.timeout.ms': 12_101 } }, short),
        12_101,
      );
      // maxMs counts: 5000 + 12000 = 17000.
      assert.throws(
        () => resolve({ maxMs: 5000, producerConfig: { 'transaction.timeout.ms': 17_000 } }, short),
        (e: unknown) => e instanceof ConfigError && e.key === KEY && /above 17000/.test(e.message),
      );
      assert.doesNotThrow(() =>
        resolve({ maxMs: 3000, producerConfig: { 'transaction.timeout.ms': 17_000 } }, short),
      );
    });

    it('takes a string of digits (librdkafka takes strings) and refuses anything that is not an integer', () => {
      assert.equal(timeoutOf({ producerConfig: { 'transaction.timeout.ms': '30101' } }), 30_101);
      refusesTimeout('30100', {}, /above 30100/);
      for (const value of [
        '200000.5',
        '2e5',
        ' 200000',
        '200s',
        '',
        200_000.5,
        Number.NaN,
        true,
        null,
        2 ** 31,
      ]) {
        refusesTimeout(value, {}, /integer number of ms/);
      }
    });
  });

  describe('identity', () => {
    const k8s = (hostname: string): NodeJS.ProcessEnv => ({
      KUBERNETES_SERVICE_HOST: '10.96.0.1',
      HOSTNAME: hostname,
    });

    it('uses a StatefulSet pod name in Kubernetes when neither instanceId nor group.instance.id is set', () => {
      for (const pod of ['enricher-0', 'enricher-12', 'orders-etl-3']) {
        const r = resolve({}, {}, k8s(pod));
        assert.equal(r.transactionalId, `g-${pod}`);
        assert.equal(r.producerConfig['transactional.id'], `g-${pod}`);
        assert.equal(r.identity, 'statefulset');
      }
      assert.equal(
        resolve({ transactionalIdPrefix: 'etl' }, {}, k8s('enricher-1')).transactionalId,
        'etl-enricher-1',
      );
    });

    it('uses a random id for a Deployment pod name, outside Kubernetes, and for a host name that is no pod name', () => {
      for (const env of [
        k8s('app-7d9f8b6c4-x2k9z'),
        k8s('enricher'),
        k8s('Enricher-1'),
        k8s('enricher-1.example'),
        { HOSTNAME: 'enricher-1' },
        { KUBERNETES_SERVICE_HOST: '', HOSTNAME: 'enricher-1' },
        { KUBERNETES_SERVICE_HOST: '10.96.0.1' },
      ]) {
        const r = resolve({}, {}, env);
        assert.match(r.transactionalId, RANDOM_ID, JSON.stringify(env));
        assert.equal(r.identity, 'random');
      }
    });

    it('prefers instanceId, then group.instance.id, over the pod name; a given transactional id over all', () => {
      const env = k8s('enricher-1');
      const explicit = resolve(
        { instanceId: 'pod-x' },
        { config: { 'group.instance.id': 'w-7' } as never },
        env,
      );
      assert.equal(explicit.transactionalId, 'g-pod-x');
      assert.equal(explicit.identity, 'explicit');
      const member = resolve({}, { config: { 'group.instance.id': 'w-7' } as never }, env);
      assert.equal(member.transactionalId, 'g-w-7');
      assert.equal(member.identity, 'group.instance.id');
      for (const options of [
        { transactionalId: 'tx-1' },
        { producerConfig: { 'transactional.id': 'tx-1' } },
        { transactionalId: 'tx-1', instanceId: 'pod-x' },
      ]) {
        const r = resolve(options, {}, env);
        assert.equal(r.transactionalId, 'tx-1');
        assert.equal(r.identity, 'explicit');
      }
    });
  });

  describe('option names', () => {
    const refuses = (options: unknown, key: string, pattern?: RegExp) =>
      assert.throws(
        () => resolve(options as TransactionalOptions<unknown, unknown>),
        (e: unknown) => {
          assert.ok(e instanceof ConfigError, String(e));
          assert.equal(e.key, key);
          if (pattern) assert.match(e.message, pattern);
          return true;
        },
      );

    it('accepts every option of TransactionalOptions', () => {
      const every: Required<TransactionalOptions<unknown, unknown>> = {
        concurrency: 4,
        partitionConcurrency: 2,
        ordering: 'none',
        key: 'string',
        value: 'json',
        retry: { count: 1 },
        onFailure: 'skip',
        producerConfig: { 'linger.ms': 5 },
        transactionalId: 'tx-1',
        transactionalIdPrefix: 'etl',
        instanceId: 'pod-1',
        maxMessages: 10,
        maxMs: 50,
        binding: Kafka,
      };
      const r = resolve(every);
      assert.equal(r.transactionalId, 'tx-1');
      assert.equal(r.maxMessages, 10);
      assert.equal(r.process.concurrency, 4);
    });

    it('refuses a misspelt option, naming the closest known one', () => {
      refuses({ maxMessage: 10 }, 'maxMessage', /did you mean `maxMessages`\?/);
      refuses({ transactionalID: 'x' }, 'transactionalID', /did you mean `transactionalId`\?/);
      refuses({ concurency: 2 }, 'concurency', /did you mean `concurrency`\?/);
      refuses({ retry: { cout: 1 } }, 'retry.cout', /did you mean `count`\?/);
    });

    it('says which call takes an option given to the wrong one', () => {
      refuses({ maxSize: 10 }, 'maxSize', /processBatch\(\)/);
      refuses({ commitIntervalMs: 10 }, 'commitIntervalMs', /constructor/);
      refuses({ deadLetter: { topic: 'dlq' } }, 'deadLetter', /not be part of the transaction/);
    });

    it('refuses a SASL mechanism librdkafka does not support in the transactional producer', () => {
      refuses(
        { producerConfig: { 'sasl.mechanisms': 'PLAINTEXT' } },
        'producerConfig.sasl.mechanisms',
        /GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER/,
      );
    });
  });

  describe('option values of unexpected types', () => {
    it('refuses a BigInt where a number is expected, showing it as 10n', () => {
      assert.throws(
        () => resolve({ maxMessages: 10n as never }),
        (e: unknown) =>
          e instanceof ConfigError && e.key === 'maxMessages' && /got 10n$/.test(e.message),
      );
      assert.throws(
        () => resolve({ producerConfig: { 'transaction.timeout.ms': 40_000n } }),
        (e: unknown) => e instanceof ConfigError && e.key === KEY && /got 40000n$/.test(e.message),
      );
    });

    it('answers any odd value in any option with a ConfigError', () => {
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      const odd: unknown[] = [
        10n,
        Symbol('x'),
        cyclic,
        {
          toJSON() {
            throw new Error('toJSON');
          },
        },
        {
          toString() {
            throw new Error('toString');
          },
        },
        Object.create(null),
      ];
      const keys = [
        'onFailure',
        'producerConfig',
        'transactionalId',
        'transactionalIdPrefix',
        'instanceId',
        'maxMessages',
        'maxMs',
        'concurrency',
        'value',
      ];
      for (const value of odd) {
        const attempts: [unknown, Partial<ReactiveConsumerOptions>][] = [
          ...keys.map((k): [unknown, Partial<ReactiveConsumerOptions>] => [{ [k]: value }, {}]),
          ...['acks', 'enable.idempotence', 'transactional.id', 'transaction.timeout.ms'].map(
            (k): [unknown, Partial<ReactiveConsumerOptions>] => [
              { producerConfig: { [k]: value } },
              {},
            ],
          ),
          [{}, { config: { 'isolation.level': value } as never }],
          [value, {}],
        ];
        for (const [options, consumer] of attempts) {
          try {
            resolve(options as never, consumer);
          } catch (err) {
            assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
          }
        }
      }
    });
  });
});
