import assert from 'node:assert/strict';
import { AuthenticationError, FencedInstanceError, KafkaClientError } from '../../lib';
import type { ConsumerEvent, ReactiveConsumerOptions } from '../../lib';
import { Shutdown } from '../../lib/internal/loop/shutdown';
import { Conditions } from '../../lib/internal/loop/wait-conditions';
import { Incidents } from '../../lib/internal/loop/incident-handler';
import { Code } from '../../lib/internal/binding/rdkafka';
import { clientOverFake } from '../helpers/client';
import { until } from '../helpers/harness';

const T = 'orders';

const kafkaError = (kafkaCode: number, message = `error ${kafkaCode}`): KafkaClientError =>
  new KafkaClientError(message, { kafkaCode, fatal: kafkaCode === Code.FATAL });

/** A clock the test moves (Date.now() is what incidents read). */
class Clock {
  private readonly realNow = Date.now;
  now = this.realNow.call(Date);
  install(): void {
    Date.now = () => this.now;
  }
  uninstall(): void {
    Date.now = this.realNow;
  }
}

function setup(
  options: Partial<ReactiveConsumerOptions> = {},
  { staticInstanceId }: { staticInstanceId?: string } = {},
) {
  const { client, fake, settings, logger } = clientOverFake({
    topics: [T, 'payments'],
    connectTimeoutMs: 1000,
    ...options,
    config: {
      'bootstrap.servers': 'fake:9092',
      'group.id': 'g',
      'security.protocol': 'sasl_ssl',
      'sasl.mechanisms': 'SCRAM-SHA-512',
      'sasl.username': 'alice',
      'sasl.password': 'secret-password',
      ...(options.config ?? {}),
    },
  });
  const conditions = new Conditions();
  const published: ConsumerEvent[] = [];
  const failures: Error[] = [];
  let stage: 'connecting' | 'running' | 'other' = 'running';
  let progressAt = 0;
  const incidents = new Incidents({
    settings,
    logger,
    client,
    staticInstanceId,
    stage: () => stage,
    lastProgressAt: () => progressAt,
    conditions,
    publish: (e) => published.push(e),
    shutdown: new Shutdown(conditions, (err) => failures.push(err)),
    failing: () => failures.length > 0,
  });
  // Counts answered metadata requests (how topic availability is checked).
  let metadataChecks = 0;
  const getMetadata = fake().getMetadata.bind(fake());
  fake().getMetadata = (opts, cb) =>
    getMetadata(opts, (err, md) => {
      metadataChecks += 1;
      cb(err, md);
    });
  return {
    incidents,
    fake,
    metadataChecks: () => metadataChecks,
    published,
    failures,
    setStage: (s: typeof stage) => (stage = s),
    progressed: () => (progressAt = Date.now()),
    of: <K extends ConsumerEvent['type']>(type: K) =>
      published.filter((e): e is Extract<ConsumerEvent, { type: K }> => e.type === type),
  };
}

describe('Incidents', () => {
  describe('authentication refusals', () => {
    const clock = new Clock();
    beforeEach(() => clock.install());
    afterEach(() => clock.uninstall());

    it('keeps a refusal while connecting for the connect failure, and ends nothing itself', () => {
      const s = setup();
      s.setStage('connecting');
      s.incidents.authenticationRefused(
        kafkaError(Code.AUTHENTICATION, 'SASL authentication failed'),
      );
      s.incidents.authenticationRefused(kafkaError(Code.SASL_AUTHENTICATION_FAILED, 'again'));
      assert.equal(s.failures.length, 0);
      assert.deepEqual(s.published, []);
      const refusal = s.incidents.takeConnectRefusal();
      assert.ok(refusal instanceof AuthenticationError);
      assert.equal(refusal.kafkaCode, Code.AUTHENTICATION, 'the first refusal is kept');
      assert.match(refusal.message, /SASL authentication failed/);
      assert.equal(s.incidents.takeConnectRefusal(), undefined, 'taken once');
    });

    it('treats a refusal while running as transient until it lasts connectTimeoutMs without progress', () => {
      const s = setup({ connectTimeoutMs: 1000 });
      s.incidents.authenticationRefused(kafkaError(Code.AUTHENTICATION));
      clock.now += 999;
      s.incidents.authenticationRefused(kafkaError(Code.AUTHENTICATION));
      assert.equal(s.failures.length, 0);
      assert.equal(s.of('client-error').length, 2, 'reported as transient client errors');
      clock.now += 1;
      s.incidents.authenticationRefused(
        kafkaError(Code.AUTHENTICATION, 'SASL authentication failed'),
      );
      assert.equal(s.failures.length, 1);
      const failure = s.failures[0];
      assert.ok(failure instanceof AuthenticationError);
      assert.match(failure.message, /fake:9092/);
      assert.match(failure.message, /sasl\.mechanisms=SCRAM-SHA-512/);
      assert.match(failure.message, /sasl\.username=alice/);
      assert.match(failure.message, /security\.protocol=sasl_ssl/);
      assert.doesNotMatch(failure.message, /secret-password/);
      assert.equal(s.incidents.clientErrors, 3);
    });

    it('starts the window again after progress', () => {
      const s = setup({ connectTimeoutMs: 1000 });
      s.incidents.authenticationRefused(kafkaError(Code.AUTHENTICATION));
      clock.now += 600;
      s.progressed(); // a fetch or a confirmed commit: the credentials work
      clock.now += 600;
      s.incidents.authenticationRefused(kafkaError(Code.AUTHENTICATION));
      clock.now += 999;
      s.incidents.authenticationRefused(kafkaError(Code.AUTHENTICATION));
      assert.equal(s.failures.length, 0, '999 ms since the refusals started again');
      clock.now += 1;
      s.incidents.authenticationRefused(kafkaError(Code.AUTHENTICATION));
      assert.ok(s.failures[0] instanceof AuthenticationError);
    });
  });

  describe('fatal errors', () => {
    it('waits for the FATAL log line and ends with FencedInstanceError for FENCED_INSTANCE_ID', async () => {
      const s = setup({}, { staticInstanceId: 'member-1' });
      const err = kafkaError(Code.FATAL, 'Fatal error');
      s.incidents.fatal(err);
      await new Promise((r) => setImmediate(r));
      assert.equal(s.failures.length, 0, 'waits for the cause');
      s.incidents.fatalCauseIs(Code.FENCED_INSTANCE_ID);
      await until(() => s.failures.length > 0, 'the failure');
      const failure = s.failures[0];
      assert.ok(failure instanceof FencedInstanceError, String(failure));
      assert.equal(failure.cause, err, 'the fatal error is its cause');
      assert.equal(failure.kafkaCode, Code.FENCED_INSTANCE_ID);
      assert.equal(failure.groupInstanceId, 'member-1');
      assert.match(failure.message, /FENCED_INSTANCE_ID/);
    });

    it('names UNRELEASED_INSTANCE_ID as another member still holding the instance id', async () => {
      const s = setup({}, { staticInstanceId: 'member-1' });
      s.incidents.fatalCauseIs(Code.UNRELEASED_INSTANCE_ID); // the log line may come first
      s.incidents.fatal(kafkaError(Code.FATAL));
      await until(() => s.failures.length > 0, 'the failure');
      const failure = s.failures[0];
      assert.ok(failure instanceof FencedInstanceError);
      assert.equal(failure.kafkaCode, Code.UNRELEASED_INSTANCE_ID);
      assert.match(failure.message, /still used by another member/);
    });

    it('ends with the fatal error itself when the cause is another one, or never comes', async () => {
      const s = setup();
      const err = kafkaError(Code.FATAL);
      const startedAt = Date.now();
      s.incidents.fatal(err);
      await until(() => s.failures.length > 0, 'the failure', 3000);
      assert.equal(s.failures[0], err);
      assert.ok(Date.now() - startedAt >= 900, 'waited for the cause first');
      const other = setup();
      other.incidents.fatal(err);
      other.incidents.fatalCauseIs(Code.ILLEGAL_GENERATION);
      await until(() => other.failures.length > 0, 'the failure');
      assert.equal(other.failures[0], err);
    });

    it('maps a fatal error carrying its own code at once, and ends the consumer only once', async () => {
      const s = setup({}, { staticInstanceId: 'member-1' });
      s.incidents.fatal(kafkaError(Code.FENCED_INSTANCE_ID));
      s.incidents.fatal(kafkaError(Code.FENCED_INSTANCE_ID));
      await until(() => s.failures.length > 0, 'the failure', 500);
      assert.ok(s.failures[0] instanceof FencedInstanceError);
      s.incidents.fatal(kafkaError(Code.FATAL));
      await new Promise((r) => setImmediate(r));
      assert.equal(s.failures.length, 1);
    });
  });

  describe('unavailable topics', () => {
    it('publishes one event per missing topic, again only once it was assigned meanwhile', async () => {
      const s = setup();
      s.fake().produce(T, 0, 1); // the cluster knows `orders`, not `payments`
      const err = kafkaError(Code.UNKNOWN_TOPIC_OR_PART, 'Broker: Unknown topic or partition');
      s.incidents.topicUnavailable(err, 'unknown');
      await until(() => s.of('topic-unavailable').length === 1, 'the event');
      const [event] = s.of('topic-unavailable');
      assert.equal(event?.topic, 'payments');
      assert.equal(event?.reason, 'unknown');
      assert.equal(event?.kafkaCode, Code.UNKNOWN_TOPIC_OR_PART);
      // Repeated on every poll: one metadata check at a time, and no new event.
      const checks = s.metadataChecks();
      for (let i = 0; i < 3; i++) s.incidents.topicUnavailable(err, 'unknown');
      await until(() => s.metadataChecks() === checks + 1, 'one metadata check answered');
      await new Promise((r) => setImmediate(r));
      assert.equal(s.of('topic-unavailable').length, 1);
      s.incidents.topicUnavailable(kafkaError(Code.TOPIC_AUTHORIZATION_FAILED), 'not-authorized');
      await until(() => s.of('topic-unavailable').length === 2, 'the not-authorized event');
      assert.equal(s.of('topic-unavailable')[1]?.reason, 'not-authorized');
      s.incidents.topicsAvailable(['payments']); // assigned: it exists now
      s.incidents.topicUnavailable(err, 'unknown');
      await until(() => s.of('topic-unavailable').length === 3, 'reported again after recovery');
      assert.equal(s.of('topic-unavailable').filter((e) => e.reason === 'unknown').length, 2);
    });
  });

  describe('offset resets', () => {
    const reset = {
      topic: T,
      partition: 3,
      from: 42,
      reason: 'fetch failed due to requested offset not available on the broker',
    };

    it('publishes the records skipped by a reset to an explicit offset', () => {
      const s = setup();
      s.incidents.offsetReset({ ...reset, to: 120, resetTo: 'BEGINNING', logicalTo: undefined });
      const [event] = s.of('offset-reset');
      assert.deepEqual(
        { ...event, at: 0 },
        {
          type: 'offset-reset',
          topic: T,
          partition: 3,
          from: 42,
          to: 120,
          resetTo: 'earliest',
          reason: reset.reason,
          at: 0,
        },
      );
    });

    it('resolves a reset to a logical offset through the watermarks while running', async () => {
      const s = setup();
      s.fake().watermarks.set(`${T}[3]`, 500);
      s.incidents.offsetReset({ ...reset, to: undefined, resetTo: 'END', logicalTo: 'END' });
      s.incidents.offsetReset({
        ...reset,
        to: undefined,
        resetTo: 'BEGINNING',
        logicalTo: 'BEGINNING',
      });
      await until(() => s.of('offset-reset').length === 2, 'both events');
      const byTarget = new Map(s.of('offset-reset').map((e) => [e.resetTo, e.to]));
      assert.equal(byTarget.get('latest'), 500, 'the end offset now');
      assert.equal(byTarget.get('earliest'), 0, 'the log start now');
    });

    it('reports a logical reset without looking it up once the consumer is not running', () => {
      const s = setup();
      s.setStage('other');
      s.incidents.offsetReset({ ...reset, to: undefined, resetTo: 'END', logicalTo: 'END' });
      const [event] = s.of('offset-reset');
      assert.equal(event?.to, undefined);
      assert.equal(event?.resetTo, 'latest');
    });
  });

  it('counts and publishes transient client errors', () => {
    const s = setup();
    s.incidents.transient(kafkaError(Code.TRANSPORT, 'Broker transport failure'), 'client error');
    s.incidents.transient(kafkaError(Code.ALL_BROKERS_DOWN), 'client error');
    assert.deepEqual(
      s.of('client-error').map((e) => [e.kafkaCode, e.count]),
      [
        [Code.TRANSPORT, 1],
        [Code.ALL_BROKERS_DOWN, 2],
      ],
    );
    assert.equal(s.incidents.clientErrors, 2);
    assert.equal(s.failures.length, 0);
  });
});
