import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import { KafkaClientError } from '../../lib';
import {
  classifyClientError,
  classifyConsumeError,
  classifyLog,
  levelOf,
  parseOffsetReset,
} from '../../lib/internal/binding/client-error-classifier';
import { fatalCauseFromText } from '../../lib/internal/binding/rdkafka';

const E = Kafka.CODES.ERRORS;
const err = (kafkaCode: number, fatal = false) =>
  new KafkaClientError(`error ${kafkaCode}`, { kafkaCode, fatal });

describe('client events: librdkafka errors and log lines into verdicts', () => {
  it('takes max.poll exceeded from consume() as a lost membership', () => {
    const v = classifyConsumeError(err(E.ERR__MAX_POLL_EXCEEDED));
    assert.equal(v.kind, 'membership-lost');
  });

  it('takes fenced or unknown members reported as client errors as a lost membership', () => {
    for (const code of [
      E.ERR_FENCED_MEMBER_EPOCH,
      E.ERR_UNKNOWN_MEMBER_ID,
      E.ERR__MAX_POLL_EXCEEDED,
    ]) {
      assert.equal(classifyClientError(err(code)).kind, 'membership-lost', String(code));
    }
  });

  it('separates refused credentials, fatal errors and transient ones', () => {
    assert.equal(classifyConsumeError(err(E.ERR__AUTHENTICATION)).kind, 'authentication');
    assert.equal(classifyClientError(err(E.ERR_SASL_AUTHENTICATION_FAILED)).kind, 'authentication');
    assert.equal(classifyConsumeError(err(E.ERR__FATAL)).kind, 'fatal');
    assert.equal(classifyClientError(err(E.ERR__TRANSPORT, true)).kind, 'fatal');
    assert.equal(classifyClientError(err(E.ERR__TRANSPORT)).kind, 'transient');
    assert.equal(classifyClientError(err(E.ERR__ALL_BROKERS_DOWN)).kind, 'transient');
    assert.equal(classifyConsumeError(err(E.ERR__TRANSPORT)).kind, 'transient');
  });

  it('names unavailable topics and auto.offset.reset=error', () => {
    const unknown = classifyConsumeError(err(E.ERR_UNKNOWN_TOPIC_OR_PART));
    assert.ok(unknown.kind === 'topic-unavailable' && unknown.reason === 'unknown');
    const denied = classifyConsumeError(err(E.ERR_TOPIC_AUTHORIZATION_FAILED));
    assert.ok(denied.kind === 'topic-unavailable' && denied.reason === 'not-authorized');
    assert.equal(classifyConsumeError(err(E.ERR__AUTO_OFFSET_RESET)).kind, 'offset-out-of-range');
  });

  it('reads a lost membership from MAXPOLL and SESSTMOUT lines', () => {
    for (const fac of ['MAXPOLL', 'SESSTMOUT']) {
      const v = classifyLog({ severity: 4, fac, message: 'left the group' }, fatalCauseFromText);
      assert.ok(v.kind === 'membership-lost' && v.reason === `${fac}: left the group`);
    }
  });

  it('recovers the error behind a FATAL line', () => {
    const v = classifyLog(
      {
        severity: 0,
        fac: 'FATAL',
        message:
          'Fatal error: Broker: Static consumer fenced by other consumer with same group.instance.id',
      },
      fatalCauseFromText,
    );
    assert.ok(v.kind === 'fatal-cause' && v.code === E.ERR_FENCED_INSTANCE_ID, JSON.stringify(v));
  });

  it('parses offset resets to a numeric and to a logical offset', () => {
    const numeric = parseOffsetReset(
      'orders [3]: offset reset (at offset 42 (leader epoch 0), broker 1) to offset 120 (leader epoch -1): fetch failed due to requested offset not available on the broker: Broker: Offset out of range',
    );
    assert.deepEqual(numeric && { ...numeric }, {
      topic: 'orders',
      partition: 3,
      from: 42,
      to: 120,
      resetTo: 'offset',
      logicalTo: undefined,
      reason:
        'fetch failed due to requested offset not available on the broker: Broker: Offset out of range',
    });
    const logical = classifyLog(
      {
        severity: 4,
        fac: 'OFFSET',
        message:
          'orders [0]: offset reset (at offset 5 (leader epoch 0), broker 1) to offset BEGINNING (leader epoch -1): out of range',
      },
      fatalCauseFromText,
    );
    assert.ok(logical.kind === 'offset-reset' && logical.reset.logicalTo === 'BEGINNING');
    assert.equal(parseOffsetReset('orders [0]: fetch from offset 5'), undefined);
  });

  it('passes other lines through at the level their severity maps to', () => {
    const v = classifyLog(
      { severity: 6, fac: 'FAIL', message: 'disconnected' },
      fatalCauseFromText,
    );
    assert.ok(v.kind === 'log' && v.level === 'info');
    assert.deepEqual([0, 2, 3, 4, 5, 6, 7].map(levelOf), [
      'error',
      'error',
      'warn',
      'warn',
      'info',
      'info',
      'debug',
    ]);
  });
});
