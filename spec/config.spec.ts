import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import * as Kafka from 'node-rdkafka';
import { ConfigError, ErrorCode, ReactiveConsumer } from '../lib';
import { DEFAULT_DRAIN_FRACTION, resolveSettings } from '../lib/internal/settings/resolve-settings';
import type { ReactiveConsumerOptions } from '../lib';
import { ConsumerClient } from '../lib/internal/binding/consumer-client';

const base = (
  extra: Record<string, unknown> = {},
  options: Partial<ReactiveConsumerOptions> = {},
) =>
  ({
    config: { 'bootstrap.servers': '127.0.0.1:9092', 'group.id': 'g', ...extra },
    topics: ['t'],
    ...options,
  }) as ReactiveConsumerOptions;

function rejects(options: ReactiveConsumerOptions, key: string, pattern?: RegExp): void {
  assert.throws(
    () => resolveSettings(options),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
      assert.equal(err.key, key);
      if (pattern) assert.match(err.message, pattern);
      return true;
    },
  );
}

describe('resolveSettings', () => {
  it('applies documented defaults', () => {
    const s = resolveSettings(base());
    assert.equal(s.maxPollIntervalMs, 300_000);
    assert.equal(s.drainTimeoutMs, 300_000 * DEFAULT_DRAIN_FRACTION);
    assert.equal(s.groupProtocol, 'classic');
    assert.equal(s.globalConfig['enable.auto.commit'], false);
    assert.equal(s.globalConfig['enable.auto.offset.store'], false);
    assert.equal(s.globalConfig['queued.max.messages.kbytes'], 8192);
    assert.deepEqual(s.topics, ['t']);
  });

  it('derives the drain deadline from max.poll.interval.ms', () => {
    const s = resolveSettings(
      base({ 'max.poll.interval.ms': 20_000, 'session.timeout.ms': 10_000 }),
    );
    assert.equal(s.drainTimeoutMs, 12_000);
  });

  it('keeps the user prefetch bounds', () => {
    const s = resolveSettings(base({ 'queued.max.messages.kbytes': 1024 }));
    assert.equal(s.globalConfig['queued.max.messages.kbytes'], 1024);
  });

  it('accepts a single topic string', () => {
    assert.deepEqual(resolveSettings(base({}, { topics: 'orders' })).topics, ['orders']);
  });

  it('requires bootstrap.servers', () => {
    rejects(
      { config: { 'group.id': 'g' }, topics: ['t'] } as ReactiveConsumerOptions,
      'bootstrap.servers',
    );
  });

  it('requires group.id', () => {
    rejects(
      { config: { 'bootstrap.servers': 'x' }, topics: ['t'] } as ReactiveConsumerOptions,
      'group.id',
    );
  });

  it('requires topics', () => {
    rejects(base({}, { topics: [] }), 'topics');
    rejects(base({}, { topics: [''] }), 'topics');
  });

  it('rejects auto commit, which would commit unprocessed work', () => {
    rejects(base({ 'enable.auto.commit': true }), 'enable.auto.commit', /library commits/);
  });

  it('rejects the automatic offset store', () => {
    rejects(base({ 'enable.auto.offset.store': true }), 'enable.auto.offset.store');
  });

  it('allows the owned settings at their safe value', () => {
    const s = resolveSettings(
      base({ 'enable.auto.commit': false, 'enable.auto.offset.store': 'false' }),
    );
    assert.equal(s.globalConfig['enable.auto.commit'], false);
  });

  it('rejects a user rebalance_cb and offset_commit_cb', () => {
    rejects(base({ rebalance_cb: () => undefined }), 'rebalance_cb', /own assignment/);
    rejects(base({ offset_commit_cb: true }), 'offset_commit_cb');
  });

  it('rejects event_cb: false, which would silently disable lost, fatal, auth and offset-reset detection', () => {
    rejects(base({ event_cb: false } as never), 'event_cb', /lost membership/);
    assert.equal(resolveSettings(base({ event_cb: true } as never)).globalConfig.event_cb, true);
  });

  it('rejects a log_level that hides the warnings the library relies on', () => {
    rejects(base({ log_level: 3 }), 'log_level', /at least 4/);
    assert.equal(resolveSettings(base({ log_level: 4 })).globalConfig.log_level, 4);
  });

  it('gives close() a default deadline inside a 30 s SIGTERM grace period', () => {
    assert.equal(resolveSettings(base()).closeTimeoutMs, 25_000);
  });

  for (const key of [
    'session.timeout.ms',
    'heartbeat.interval.ms',
    'partition.assignment.strategy',
    'group.protocol.type',
  ]) {
    it(`rejects ${key} with group.protocol=consumer`, () => {
      const value =
        key === 'partition.assignment.strategy'
          ? 'range'
          : key === 'group.protocol.type'
            ? 'consumer'
            : 6000;
      rejects(base({ 'group.protocol': 'consumer', [key]: value }), key, /KIP-848/);
    });
  }

  it('rejects an unknown group.protocol', () => {
    rejects(base({ 'group.protocol': 'streams' }), 'group.protocol');
  });

  it('rejects a max.poll.interval.ms that is not a positive integer, naming it', () => {
    for (const bad of [0, -5, 1.5])
      rejects(base({ 'max.poll.interval.ms': bad }), 'max.poll.interval.ms');
  });

  it('rejects max.poll.interval.ms below session.timeout.ms', () => {
    rejects(
      base({ 'max.poll.interval.ms': 5000, 'session.timeout.ms': 6000 }),
      'max.poll.interval.ms',
    );
  });

  it('rejects a drain deadline at or above max.poll.interval.ms', () => {
    rejects(
      base({}, { drainTimeoutMs: 300_000 }),
      'drainTimeoutMs',
      /below `max.poll.interval.ms` \(300000\), got 300000/,
    );
  });

  for (const key of [
    'drainTimeoutMs',
    'commitIntervalMs',
    'commitTimeoutMs',
    'closeTimeoutMs',
    'connectTimeoutMs',
    'consumeBatchSize',
    'maxBufferedMessages',
    'maxBufferedBytes',
    'maxBufferedBytesTotal',
  ]) {
    it(`rejects a non-positive or fractional ${key}`, () => {
      rejects(base({}, { [key]: 0 }), key);
      rejects(base({}, { [key]: 1.5 }), key);
      rejects(base({}, { [key]: '10' as unknown as number }), key);
    });
  }

  it('rejects a late-commit window at or above the drain deadline, and keeps the default below it', () => {
    rejects(
      base({}, { drainTimeoutMs: 4000, lateCommitWindowMs: 4000 }),
      'lateCommitWindowMs',
      /below `drainTimeoutMs` \(4000\), got 4000/,
    );
    rejects(base({}, { lateCommitWindowMs: -1 }), 'lateCommitWindowMs');
    rejects(base({}, { lateCommitWindowMs: 2 ** 31 }), 'lateCommitWindowMs');
    assert.equal(resolveSettings(base({}, { drainTimeoutMs: 3000 })).lateCommitWindowMs, 1500);
    assert.equal(resolveSettings(base({})).lateCommitWindowMs, 5000);
    assert.equal(resolveSettings(base({}, { lateCommitWindowMs: 0 })).lateCommitWindowMs, 0);
  });

  it('rejects a resume threshold outside [0, 1)', () => {
    rejects(base({}, { resumeThreshold: 1 }), 'resumeThreshold');
    rejects(base({}, { resumeThreshold: -0.1 }), 'resumeThreshold');
  });

  it('rejects a logger that is not a pino logger', () => {
    rejects(base({}, { logger: {} as never }), 'logger');
  });

  it('rejects a non-numeric max.poll.interval.ms', () => {
    rejects(base({ 'max.poll.interval.ms': 'soon' }), 'max.poll.interval.ms');
  });

  describe('oauthBearerToken', () => {
    const oauth = { 'security.protocol': 'sasl_ssl', 'sasl.mechanisms': 'OAUTHBEARER' };
    const provider = () => ({ value: 'x', lifetimeMs: Date.now() + 60_000 });

    it('keeps the provider with sasl.mechanisms=OAUTHBEARER', () => {
      assert.equal(
        resolveSettings(base(oauth, { oauthBearerToken: provider })).oauthBearerToken,
        provider,
      );
      assert.equal(resolveSettings(base()).oauthBearerToken, undefined);
    });

    it('requires it with OAUTHBEARER unless librdkafka makes its own tokens', () => {
      rejects(
        base(oauth),
        'oauthBearerToken',
        /node-rdkafka does not run librdkafka's token refresh callback/,
      );
      assert.ok(resolveSettings(base({ ...oauth, 'sasl.oauthbearer.method': 'oidc' })));
      assert.ok(resolveSettings(base({ ...oauth, 'enable.sasl.oauthbearer.unsecure.jwt': true })));
    });

    it('rejects what cannot work with it', () => {
      rejects(base(oauth, { oauthBearerToken: 'token' as never }), 'oauthBearerToken');
      rejects(base({}, { oauthBearerToken: provider }), 'sasl.mechanisms', /"OAUTHBEARER"/);
      rejects(
        base({ ...oauth, 'sasl.oauthbearer.method': 'oidc' }, { oauthBearerToken: provider }),
        'sasl.oauthbearer.method',
      );
      rejects(
        base(oauth, { oauthBearerToken: provider, rememberCompleted: true }),
        'rememberCompleted',
      );
      rejects(
        base(
          { ...oauth, oauthbearer_token_refresh_cb: () => undefined },
          { oauthBearerToken: provider },
        ),
        'oauthbearer_token_refresh_cb',
        /node-rdkafka does not call it/,
      );
    });
  });
});

/** Values of unexpected types: none of them may make the error's formatting throw. */
const cyclic = (): Record<string, unknown> => {
  const o: Record<string, unknown> = { a: 1 };
  o.self = o;
  return o;
};
const oddValues = (): [string, unknown][] => [
  ['a BigInt', 10n],
  ['a Symbol', Symbol('x')],
  ['a cyclic object', cyclic()],
  [
    'an object whose toJSON throws',
    {
      toJSON() {
        throw new Error('toJSON');
      },
    },
  ],
  [
    'an object whose getter throws',
    {
      get a() {
        throw new Error('getter');
      },
    },
  ],
  [
    'an object whose toString throws',
    {
      toString() {
        throw new Error('toString');
      },
    },
  ],
  ['an object without a prototype', Object.assign(Object.create(null) as object, { a: 1 })],
  ['an array holding a BigInt', [1n]],
];

/** Every option of the consumer, each with a value it accepts. */
const everyOption: Required<ReactiveConsumerOptions> = {
  config: { 'bootstrap.servers': '127.0.0.1:9092', 'group.id': 'g' },
  topicConfig: { 'auto.offset.reset': 'earliest' },
  topics: ['t'],
  logger: pino({ level: 'silent' }),
  stallThresholdMs: 1000,
  metricsIntervalMs: 1000,
  drainTimeoutMs: 10_000,
  commitIntervalMs: 500,
  commitTimeoutMs: 2000,
  lateCommitWindowMs: 1000,
  closeTimeoutMs: 5000,
  signal: new AbortController().signal,
  tracing: { around: (_trace, run) => run() },
  connectTimeoutMs: 1000,
  consumeBatchSize: 10,
  consumeTimeoutMs: 10,
  maxBufferedMessages: 10,
  maxBufferedBytes: 1024,
  maxBufferedBytesTotal: 4096,
  resumeThreshold: 0.25,
  binding: Kafka,
  sharedBatchBuffers: false, // true needs the companion binding (spec/binding.spec.ts)
  onAssign: () => 'committed',
  onRevoke: () => undefined,
  rememberCompleted: { topic: 'memories', maxRuns: 8 } satisfies Required<
    Exclude<ReactiveConsumerOptions['rememberCompleted'], boolean | undefined>
  >,
  oauthBearerToken: () => ({ value: 'x', lifetimeMs: Date.now() + 60_000 }),
};

describe('option names', () => {
  it('accepts every option of ReactiveConsumerOptions', () => {
    // oauthBearerToken and rememberCompleted cannot go together (yet): one at a time.
    const s = resolveSettings({ ...everyOption, oauthBearerToken: undefined });
    assert.equal(s.commitIntervalMs, 500);
    assert.deepEqual(s.rememberCompleted, { topic: 'memories', maxRuns: 8 });
    const oauth = resolveSettings({
      ...everyOption,
      rememberCompleted: undefined,
      config: {
        ...everyOption.config,
        'security.protocol': 'sasl_ssl',
        'sasl.mechanisms': 'OAUTHBEARER',
      },
    });
    assert.equal(oauth.oauthBearerToken, everyOption.oauthBearerToken);
  });

  it("accepts every option the README's options table documents", () => {
    const readme = readFileSync(join(__dirname, '../README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Options'));
    const table = section.slice(0, section.indexOf('\n\n', section.indexOf('\n|')));
    const documented = [...table.matchAll(/^\| `(\w+)`/gm)].map((m) => m[1]);
    assert.ok(documented.length > 15, `found ${documented.length} options in the README`);
    for (const name of documented) assert.ok(name! in everyOption, `${name} is documented`);
  });

  it("the README's options table lists every option, and its errors every error code", () => {
    const readme = readFileSync(join(__dirname, '../README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Options'));
    const table = section.slice(0, section.indexOf('\n\n', section.indexOf('\n|')));
    const documented = new Set([...table.matchAll(/^\| `(\w+)`/gm)].map((m) => m[1]));
    const missing = Object.keys(everyOption).filter((name) => !documented.has(name));
    assert.deepEqual(missing, [], 'options missing from the README table');
    const errors = readme.slice(
      readme.indexOf('\n## Errors'),
      readme.indexOf('\n## Documentation'),
    );
    const undocumented = Object.values(ErrorCode).filter((code) => !errors.includes(`\`${code}\``));
    assert.deepEqual(undocumented, [], 'error codes missing from the README');
  });

  it('refuses a misspelt option, naming the closest known one', () => {
    rejects(
      base({}, { comitIntervalMs: 500 } as never),
      'comitIntervalMs',
      /Unknown option `comitIntervalMs`.*did you mean `commitIntervalMs`\?/,
    );
    rejects(base({}, { drainTimeout: 5000 } as never), 'drainTimeout', /`drainTimeoutMs`/);
    rejects({ config: base().config, topic: 't' } as never, 'topic', /did you mean `topics`\?/);
    rejects({ ...base(), confg: {} } as never, 'confg', /did you mean `config`\?/);
  });

  it('compares names without regard to case', () => {
    rejects(
      base({}, { CommitIntervalMS: 500 } as never),
      'CommitIntervalMS',
      /did you mean `commitIntervalMs`\?/,
    );
    rejects(base({}, { topicconfig: {} } as never), 'topicconfig', /did you mean `topicConfig`\?/);
  });

  it('names no option when none is close, and lists the known ones', () => {
    assert.throws(
      () => resolveSettings(base({}, { frobnicate: true } as never)),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.key === 'frobnicate' &&
        !/did you mean/.test(err.message) &&
        /commitIntervalMs/.test(err.message) &&
        /rememberCompleted/.test(err.message),
    );
  });

  it('says where an option of process() or a librdkafka setting given to the constructor belongs', () => {
    rejects(base({}, { concurrency: 4 } as never), 'concurrency', /process\(\)/);
    rejects(base({}, { maxWaitMs: 4 } as never), 'maxWaitMs', /processBatch\(\)/);
    rejects(base({}, { maxMessages: 4 } as never), 'maxMessages', /processTransactional\(\)/);
    rejects(base({}, { 'group.instance.id': 'a' } as never), 'group.instance.id', /`config`/);
  });

  it('refuses an unknown setting of rememberCompleted, by its dotted path', () => {
    rejects(
      base({}, { rememberCompleted: { topik: 'memories' } as never }),
      'rememberCompleted.topik',
      /did you mean `topic`\?/,
    );
    rejects(
      base({}, { rememberCompleted: { maxRun: 3 } as never }),
      'rememberCompleted.maxRun',
      /did you mean `maxRuns`\?/,
    );
  });

  it("leaves librdkafka's own keys in config and topicConfig to librdkafka", () => {
    const s = resolveSettings(
      base({ 'no.such.key': 1 }, { topicConfig: { 'no.such': 1 } as never }),
    );
    assert.equal((s.globalConfig as Record<string, unknown>)['no.such.key'], 1);
  });

  it('refuses a misspelt option at construction', () => {
    assert.throws(
      () => new ReactiveConsumer(base({}, { comitIntervalMs: 5 } as never)),
      (err: unknown) => err instanceof ConfigError && err.key === 'comitIntervalMs',
    );
  });
});

describe('option values of unexpected types', () => {
  it('refuses a BigInt where a number is expected, showing it as 10n', () => {
    rejects(base({}, { commitIntervalMs: 10n as never }), 'commitIntervalMs', /got 10n$/);
    rejects(base({}, { resumeThreshold: 1n as never }), 'resumeThreshold', /got 1n$/);
    rejects(base({ 'max.poll.interval.ms': 10n }), 'max.poll.interval.ms', /got 10n$/);
    rejects(
      base({}, { rememberCompleted: { maxRuns: 10n } as never }),
      'rememberCompleted.maxRuns',
      /got 10n$/,
    );
  });

  it('shows a Symbol, a cyclic object and an object that cannot be serialised safely', () => {
    rejects(
      base({}, { commitIntervalMs: Symbol('x') as never }),
      'commitIntervalMs',
      /got Symbol\(x\)$/,
    );
    rejects(
      base({}, { resumeThreshold: cyclic() as never }),
      'resumeThreshold',
      /got \[object with a cycle\]$/,
    );
    rejects(
      base({}, { commitIntervalMs: new Number(8192) as never }),
      'commitIntervalMs',
      /got a Number object \(8192\)$/,
    );
    rejects(base({ log_level: Symbol('x') }), 'log_level', /Symbol\(x\)/);
    rejects(base({ log_level: 1n }), 'log_level', /1n/);
    rejects(base({}, { topics: [1n] as never }), 'topics', /\[1n\]/);
  });

  for (const [what, value] of oddValues()) {
    it(`answers ${what} in any option, or a setting the library reads, with a ConfigError or accepts it`, () => {
      const attempts: ReactiveConsumerOptions[] = [
        ...Object.keys(everyOption).map((key) => base({}, { [key]: value })),
        ...[
          'bootstrap.servers',
          'group.id',
          'group.protocol',
          'log_level',
          'max.poll.interval.ms',
          'session.timeout.ms',
          'sasl.mechanisms',
          'enable.auto.commit',
          'oauthbearer_token_refresh_cb',
          'enable.sasl.oauthbearer.unsecure.jwt',
          'sasl.oauthbearer.method',
        ].map((key) => base({ [key]: value })),
        base({}, { rememberCompleted: { topic: value, maxRuns: value } as never }),
      ];
      for (const options of attempts) {
        try {
          resolveSettings(options);
        } catch (err) {
          assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
          assert.equal(typeof err.message, 'string');
        }
      }
    });
  }
});

describe('sasl.mechanisms', () => {
  for (const mechanism of ['GSSAPI', 'PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512']) {
    it(`accepts ${mechanism}`, () => {
      const s = resolveSettings(
        base({ 'security.protocol': 'sasl_ssl', 'sasl.mechanisms': mechanism }),
      );
      assert.equal(s.globalConfig['sasl.mechanisms'], mechanism);
    });
  }

  it('refuses a mechanism librdkafka does not support, at construction, naming the valid ones', () => {
    for (const bad of ['SCRAM-SHA-1', 'KERBEROS', 'PLAIN,SCRAM-SHA-256', '', 5]) {
      rejects(
        base({ 'security.protocol': 'sasl_ssl', 'sasl.mechanisms': bad }),
        'sasl.mechanisms',
        /GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER/,
      );
    }
    assert.throws(
      () =>
        new ReactiveConsumer(base({ 'security.protocol': 'sasl_ssl', 'sasl.mechanisms': 'NOPE' })),
      (err: unknown) => err instanceof ConfigError && err.key === 'sasl.mechanisms',
    );
  });

  it('takes the names as librdkafka does, in capitals, and suggests the right spelling', () => {
    rejects(
      base({ 'sasl.mechanisms': 'scram-sha-256' }),
      'sasl.mechanisms',
      /did you mean `SCRAM-SHA-256`\?/,
    );
    rejects(base({ 'sasl.mechanisms': 'Plain' }), 'sasl.mechanisms', /did you mean `PLAIN`\?/);
    rejects(base({ 'sasl.mechanisms': 'SCRAM-SHA256' }), 'sasl.mechanisms', /`SCRAM-SHA-256`/);
  });

  it('checks the alias sasl.mechanism too, by its own name', () => {
    rejects(base({ 'sasl.mechanism': 'SCRAM' }), 'sasl.mechanism', /SCRAM-SHA-512/);
    assert.ok(resolveSettings(base({ 'sasl.mechanism': 'PLAIN' })));
  });
});

describe('librdkafka config checks', () => {
  const logger = pino({ level: 'silent' });
  const create = (extra: Record<string, unknown>, topicConfig: Record<string, unknown> = {}) =>
    new ConsumerClient(resolveSettings(base(extra, { topicConfig })), logger, () => undefined);

  it('names an unknown key', () => {
    assert.throws(
      () => create({ 'no.such.key': 1 }),
      (err: unknown) => err instanceof ConfigError && err.key === 'no.such.key',
    );
  });

  it('names a key with a bad value', () => {
    assert.throws(
      () => create({ 'fetch.wait.max.ms': 'abc' }),
      (err: unknown) => err instanceof ConfigError && err.key === 'fetch.wait.max.ms',
    );
  });

  it('names a topic key with a bad value', () => {
    assert.throws(
      () => create({}, { 'auto.offset.reset': 'bogus' }),
      (err: unknown) => err instanceof ConfigError && err.key === 'auto.offset.reset',
    );
  });

  it('accepts a valid configuration', () => {
    assert.ok(create({ 'fetch.wait.max.ms': 100 }).raw);
  });
});
