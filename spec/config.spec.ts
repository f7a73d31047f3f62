import assert from 'node:assert/strict';
import pino from 'pino';
import { ConfigError } from '../lib';
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
    assert.equal(s.globalConfig['queued.max.messages.kbytes'], 16_384);
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
