import assert from 'node:assert/strict';
import {
  AlreadySubscribedError,
  AuthenticationError,
  ClosedError,
  CommitError,
  ConfigError,
  ConnectError,
  DeadLetterError,
  DeserializationError,
  ErrorCode,
  FencedInstanceError,
  HandlerError,
  KafkaClientError,
  NotAssignedError,
  StartPositionError,
  NativeFeatureMissingError,
  ProducerFencedError,
  TransactionError,
  ReactiveKafkaError,
  TimeoutError,
  hasErrorCode,
} from '../lib';

describe('errors', () => {
  const cases: [ReactiveKafkaError, string][] = [
    [new ConfigError('m', 'group.id'), ErrorCode.Config],
    [new NativeFeatureMissingError('m', ['zstd']), ErrorCode.NativeFeatureMissing],
    [new ConnectError('m'), ErrorCode.Connect],
    [new KafkaClientError('m', { kafkaCode: -195 }), ErrorCode.Kafka],
    [new CommitError('m', 27, []), ErrorCode.Commit],
    [new AlreadySubscribedError('m'), ErrorCode.AlreadySubscribed],
    [new ClosedError('m'), ErrorCode.Closed],
    [new HandlerError('m', { topic: 't', partition: 0, offset: 1 }), ErrorCode.Handler],
    [new TimeoutError('m', 'drain', 10), ErrorCode.Timeout],
    [new AuthenticationError('m', -169), ErrorCode.Authentication],
    [
      new DeserializationError('m', { topic: 't', partition: 0, offset: 1 }, 'value'),
      ErrorCode.Deserialization,
    ],
    [
      new DeadLetterError('m', { topic: 't', partition: 0, offset: 1 }, 'dlq', new Error('x')),
      ErrorCode.DeadLetter,
    ],
    [new StartPositionError('m', { topic: 't', partition: 0 }), ErrorCode.StartPosition],
    [new NotAssignedError('m', { topic: 't', partition: 0 }), ErrorCode.NotAssigned],
    [new FencedInstanceError('m', 111, 'worker-1'), ErrorCode.FencedInstance],
    [new ProducerFencedError('m', 'txn-1', -144), ErrorCode.ProducerFenced],
    [new TransactionError('m', 'txn-1', 53), ErrorCode.Transaction],
  ];
  const expectedCodes: Record<string, string> = {
    ConfigError: 'ERR_RKC_CONFIG',
    NativeFeatureMissingError: 'ERR_RKC_NATIVE_FEATURE_MISSING',
    ConnectError: 'ERR_RKC_CONNECT',
    KafkaClientError: 'ERR_RKC_KAFKA',
    CommitError: 'ERR_RKC_COMMIT',
    AlreadySubscribedError: 'ERR_RKC_ALREADY_SUBSCRIBED',
    ClosedError: 'ERR_RKC_CLOSED',
    HandlerError: 'ERR_RKC_HANDLER',
    TimeoutError: 'ERR_RKC_TIMEOUT',
    AuthenticationError: 'ERR_RKC_AUTHENTICATION',
    DeserializationError: 'ERR_RKC_DESERIALIZATION',
    DeadLetterError: 'ERR_RKC_DEAD_LETTER',
    StartPositionError: 'ERR_RKC_START_POSITION',
    NotAssignedError: 'ERR_RKC_NOT_ASSIGNED',
    FencedInstanceError: 'ERR_RKC_FENCED_INSTANCE',
    ProducerFencedError: 'ERR_RKC_PRODUCER_FENCED',
    TransactionError: 'ERR_RKC_TRANSACTION',
  };

  it('keeps each class on its documented code string (the contract users match on)', () => {
    for (const [err] of cases) assert.equal(err.code, expectedCodes[err.name], err.name);
    assert.equal(Object.keys(expectedCodes).length, cases.length);
  });

  it('gives every error class its own stable code', () => {
    for (const [err, code] of cases) {
      assert.equal(err.code, code, err.name);
      assert.ok(hasErrorCode(err, code as ErrorCode));
      assert.ok(err instanceof ReactiveKafkaError);
      assert.ok(err instanceof Error);
    }
    assert.equal(new Set(cases.map(([e]) => e.code)).size, Object.keys(ErrorCode).length);
  });

  it('names the class and keeps the cause', () => {
    const cause = new Error('boom');
    const err = new HandlerError(
      'handler failed',
      { topic: 't', partition: 2, offset: 7 },
      { cause },
    );
    assert.equal(err.name, 'HandlerError');
    assert.equal(err.cause, cause);
    assert.deepEqual(err.coordinates, { topic: 't', partition: 2, offset: 7 });
    assert.equal(err.retriable, false);
  });

  it('does not match plain errors or other codes', () => {
    assert.equal(hasErrorCode(new Error('x'), ErrorCode.Config), false);
    assert.equal(hasErrorCode(null, ErrorCode.Config), false);
    assert.equal(hasErrorCode(new ClosedError('x'), ErrorCode.Config), false);
  });
});
