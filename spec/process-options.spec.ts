import assert from 'node:assert/strict';
import { ConfigError } from '../lib';
import { resolveSettings } from '../lib/internal/settings/resolve-settings';
import { PROCESS_DEFAULTS, resolveProcessOptions } from '../lib/process-options';
import type { BatchProcessOptions, DeadLetterOptions, ProcessOptions, RetryOptions } from '../lib';
import { harness } from './helpers/harness';

const settings = resolveSettings({
  config: {
    'bootstrap.servers': 'b:9092',
    'group.id': 'g',
    'security.protocol': 'sasl_plaintext',
    'sasl.mechanisms': 'SCRAM-SHA-512',
    'sasl.username': 'u',
    'sasl.password': 'p',
    'max.poll.interval.ms': 100_000,
  },
  topics: ['orders', '^audit\\..*'],
});

function rejects(options: ProcessOptions<unknown, unknown>, key: string, pattern?: RegExp): void {
  assert.throws(
    () => resolveProcessOptions(options, settings),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      assert.equal(err.key, key);
      if (pattern) assert.match(err.message, pattern);
      return true;
    },
  );
}

describe('process() options', () => {
  it('applies the documented defaults: stop, three retries with backoff', () => {
    const r = resolveProcessOptions({}, settings);
    assert.equal(r.onFailure, 'stop');
    assert.deepEqual(r.retry, PROCESS_DEFAULTS.retry);
    assert.equal(r.concurrency, 64);
    assert.equal(r.partitionConcurrency, 1);
    assert.equal(r.deadLetter, undefined);
    assert.equal(r.key, undefined);
    assert.equal(r.value, undefined);
  });

  it('implies dead-letter when deadLetter is set, and builds the producer config from the consumer', () => {
    const r = resolveProcessOptions({ deadLetter: { topic: 'orders.dlq' } }, settings);
    assert.equal(r.onFailure, 'dead-letter');
    const c = r.deadLetter?.producerConfig ?? {};
    assert.equal(c['bootstrap.servers'], 'b:9092');
    assert.equal(c['sasl.username'], 'u');
    assert.equal(c['security.protocol'], 'sasl_plaintext');
    assert.equal(c['enable.idempotence'], true);
    assert.equal(c.dr_cb, true);
    // Half the drain deadline (60 s), capped at 30 s.
    assert.equal(c['message.timeout.ms'], 30_000);
    assert.equal(c['group.id'], undefined);
  });

  it('accepts a retry count, false, and backoff settings', () => {
    assert.equal(resolveProcessOptions({ retry: 0 }, settings).retry.count, 0);
    assert.equal(resolveProcessOptions({ retry: false }, settings).retry.count, 0);
    assert.equal(resolveProcessOptions({ retry: 7 }, settings).retry.count, 7);
    const r = resolveProcessOptions({ retry: { count: 2, initialDelayMs: 5 } }, settings).retry;
    assert.deepEqual(r, { ...PROCESS_DEFAULTS.retry, count: 2, initialDelayMs: 5 });
  });

  it('rejects a concurrency that is not an integer ≥ 1', () => {
    rejects({ concurrency: 0 }, 'concurrency');
    rejects({ concurrency: 1.5 }, 'concurrency');
  });

  it('rejects a partitionConcurrency that is not an integer ≥ 1', () => {
    rejects({ partitionConcurrency: -1 }, 'partitionConcurrency');
  });

  it('rejects an unknown failure policy', () => {
    rejects({ onFailure: 'ignore' as never }, 'onFailure', /'stop', 'skip', 'dead-letter'/);
  });

  it('rejects dead-letter without a dead-letter topic', () => {
    rejects({ onFailure: 'dead-letter' }, 'deadLetter', /deadLetter: \{ topic \}/);
  });

  it('rejects a dead-letter topic combined with another policy', () => {
    rejects({ onFailure: 'skip', deadLetter: { topic: 'dlq' } }, 'deadLetter', /'skip'/);
  });

  it('rejects an invalid dead-letter topic name', () => {
    rejects({ deadLetter: { topic: 'bad topic!' } }, 'deadLetter.topic');
    rejects({ deadLetter: { topic: '' } }, 'deadLetter.topic');
  });

  it('rejects a dead-letter topic the consumer itself reads (name or pattern)', () => {
    rejects({ deadLetter: { topic: 'orders' } }, 'deadLetter.topic', /consumed again/);
    rejects({ deadLetter: { topic: 'audit.dlq' } }, 'deadLetter.topic', /consumed again/);
  });

  it('rejects producer settings the dead-letter writer owns', () => {
    rejects(
      { deadLetter: { topic: 'dlq', producerConfig: { dr_cb: false } } },
      'deadLetter.producerConfig.dr_cb',
    );
    rejects(
      { deadLetter: { topic: 'dlq', producerConfig: { dr_msg_cb: true } } },
      'deadLetter.producerConfig.dr_msg_cb',
    );
  });

  it('rejects a dead-letter message timeout at or above the drain deadline', () => {
    rejects(
      { deadLetter: { topic: 'dlq', producerConfig: { 'message.timeout.ms': 60_000 } } },
      'deadLetter.producerConfig.message.timeout.ms',
      /below `drainTimeoutMs` \(60000\)/,
    );
    rejects(
      { deadLetter: { topic: 'dlq', producerConfig: { 'delivery.timeout.ms': 'x' } } },
      'deadLetter.producerConfig.delivery.timeout.ms',
    );
  });

  it('rejects a negative or fractional retry count', () => {
    rejects({ retry: -1 }, 'retry');
    rejects({ retry: { count: 1.5 } }, 'retry.count');
  });

  it('rejects unknown retry settings', () => {
    rejects({ retry: { attempts: 3 } as never }, 'retry.attempts');
    rejects({ retry: 'often' as never }, 'retry');
  });

  it('rejects a backoff whose maximum is below its first delay', () => {
    rejects({ retry: { initialDelayMs: 500, maxDelayMs: 100 } }, 'retry.maxDelayMs');
    rejects({ retry: { initialDelayMs: -1 } }, 'retry.initialDelayMs');
  });

  it('rejects a backoff factor below 1 and a jitter outside [0, 1]', () => {
    rejects({ retry: { factor: 0.5 } }, 'retry.factor');
    rejects({ retry: { jitter: 2 } }, 'retry.jitter');
  });

  it('rejects an unknown deserializer', () => {
    rejects({ value: 'avro' as never }, 'value', /'buffer', 'string', 'json'/);
    rejects({ key: 42 as never }, 'key');
  });

  it('rejects a handler that is not a function, at the process() call', () => {
    const h = harness();
    assert.throws(
      () => h.consumer.process(undefined as never),
      (e: unknown) => e instanceof ConfigError && e.key === 'handler',
    );
  });

  it('names the librdkafka producer setting it rejects, at the process() call', () => {
    const h = harness();
    assert.throws(
      () =>
        h.consumer.process(() => undefined, {
          deadLetter: { topic: 'dlq', producerConfig: { 'no.such.setting': 1 } },
        }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.key === 'deadLetter.producerConfig.no.such.setting' &&
        /no\.such\.setting/.test(e.message),
    );
  });

  describe('option names', () => {
    it('accepts every option of ProcessOptions, RetryOptions and DeadLetterOptions', () => {
      const retry: Required<RetryOptions> = {
        count: 2,
        initialDelayMs: 10,
        maxDelayMs: 100,
        factor: 3,
        jitter: 0.1,
        when: () => true,
      };
      const deadLetter: Required<DeadLetterOptions> = {
        topic: 'orders.dlq',
        producerConfig: { 'linger.ms': 5 },
      };
      const every: Required<ProcessOptions<unknown, unknown>> = {
        concurrency: 8,
        partitionConcurrency: 2,
        ordering: 'key',
        key: 'string',
        value: 'json',
        retry,
        onFailure: 'dead-letter',
        deadLetter,
      };
      const r = resolveProcessOptions(every, settings);
      assert.deepEqual(r.retry, retry);
      assert.equal(r.deadLetter?.producerConfig['linger.ms'], 5);
    });

    it('accepts every option of BatchProcessOptions at the processBatch() call', () => {
      const every: Required<BatchProcessOptions<unknown, unknown>> = {
        concurrency: 8,
        partitionConcurrency: 1,
        ordering: 'partition',
        key: 'buffer',
        value: 'string',
        retry: 1,
        onFailure: 'skip',
        deadLetter: undefined as never,
        maxSize: 10,
        maxWaitMs: 5,
      };
      const { deadLetter: _, ...options } = every;
      assert.doesNotThrow(() => harness().consumer.processBatch(() => undefined, options));
    });

    it('refuses a misspelt option, naming the closest known one', () => {
      rejects(
        { concurency: 4 } as never,
        'concurency',
        /Unknown option `concurency`.*did you mean `concurrency`\?/,
      );
      rejects({ onfailure: 'skip' } as never, 'onfailure', /did you mean `onFailure`\?/);
      rejects(
        { PartitionConcurrency: 2 } as never,
        'PartitionConcurrency',
        /`partitionConcurrency`/,
      );
      rejects({ retries: 2, ordering: 'none' } as never, 'retries', /`retry`/);
    });

    it('names no option when none is close, and lists the known ones', () => {
      assert.throws(
        () => resolveProcessOptions({ frobnicate: 1 } as never, settings),
        (err: unknown) =>
          err instanceof ConfigError &&
          err.key === 'frobnicate' &&
          !/did you mean/.test(err.message) &&
          /partitionConcurrency/.test(err.message),
      );
    });

    it('says which call takes an option given to the wrong one', () => {
      rejects({ maxSize: 10 } as never, 'maxSize', /processBatch\(\)/);
      rejects({ maxWait: 10 } as never, 'maxWait', /did you mean `maxWaitMs`.*processBatch\(\)/);
      rejects({ maxMessages: 10 } as never, 'maxMessages', /processTransactional\(\)/);
      rejects({ commitIntervalMs: 10 } as never, 'commitIntervalMs', /constructor/);
    });

    it('refuses an unknown setting of retry and deadLetter, by its dotted path', () => {
      rejects({ retry: { cout: 3 } } as never, 'retry.cout', /did you mean `count`\?/);
      rejects({ retry: { maxDelay: 3 } } as never, 'retry.maxDelay', /did you mean `maxDelayMs`\?/);
      rejects(
        { deadLetter: { topc: 'orders.dlq' } } as never,
        'deadLetter.topc',
        /did you mean `topic`\?/,
      );
      rejects(
        { deadLetter: { topic: 'orders.dlq', producerConf: {} } } as never,
        'deadLetter.producerConf',
        /did you mean `producerConfig`\?/,
      );
    });

    it('refuses a misspelt option at the process() and processBatch() calls', () => {
      const h = harness();
      assert.throws(
        () => h.consumer.process(() => undefined, { concurency: 4 } as never),
        (e: unknown) => e instanceof ConfigError && e.key === 'concurency',
      );
      assert.throws(
        () => h.consumer.processBatch(() => undefined, { maxWaitMS: 4 } as never),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.key === 'maxWaitMS' &&
          /did you mean `maxWaitMs`/.test(e.message),
      );
    });

    it('refuses a SASL mechanism librdkafka does not support in the dead-letter producer', () => {
      rejects(
        { deadLetter: { topic: 'dlq', producerConfig: { 'sasl.mechanisms': 'scram-sha-512' } } },
        'deadLetter.producerConfig.sasl.mechanisms',
        /did you mean `SCRAM-SHA-512`\?/,
      );
    });
  });

  describe('option values of unexpected types', () => {
    it('refuses a BigInt or a Symbol as a deserializer, showing it', () => {
      rejects({ value: 10n as never }, 'value', /got 10n$/);
      rejects({ key: Symbol('k') as never }, 'key', /got Symbol\(k\)$/);
    });

    it('refuses a BigInt where a number is expected, showing it as 10n', () => {
      rejects({ concurrency: 10n as never }, 'concurrency', /got 10n$/);
      rejects({ retry: 3n as never }, 'retry', /got 3n$/);
      rejects({ retry: { count: 3n } as never }, 'retry.count', /got 3n$/);
      rejects(
        { deadLetter: { topic: 'dlq', producerConfig: { 'message.timeout.ms': 10n } } },
        'deadLetter.producerConfig.message.timeout.ms',
        /got 10n$/,
      );
    });

    it('shows a cyclic object', () => {
      const o: Record<string, unknown> = {};
      o.self = o;
      rejects({ ordering: o as never }, 'ordering', /got \[object with a cycle\]$/);
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
          get a() {
            throw new Error('getter');
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
        'concurrency',
        'partitionConcurrency',
        'ordering',
        'key',
        'value',
        'retry',
        'onFailure',
        'deadLetter',
      ];
      for (const value of odd) {
        const attempts: unknown[] = [
          ...keys.map((k) => ({ [k]: value })),
          { retry: { count: value, initialDelayMs: value, factor: value, jitter: value } },
          { deadLetter: { topic: value } },
          { deadLetter: { topic: 'dlq', producerConfig: value } },
          { deadLetter: { topic: 'dlq', producerConfig: { 'delivery.timeout.ms': value } } },
          value,
        ];
        for (const options of attempts) {
          try {
            resolveProcessOptions(options as never, settings);
          } catch (err) {
            assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
          }
        }
      }
    });
  });
});
