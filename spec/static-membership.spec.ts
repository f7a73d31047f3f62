import assert from 'node:assert/strict';
import { lastValueFrom, toArray } from 'rxjs';
import type { Subscription } from 'rxjs';
import * as Kafka from 'node-rdkafka';
import { ErrorCode, FencedInstanceError, KafkaClientError, hasErrorCode } from '../lib';
import { fatalCauseFromText } from '../lib/internal/binding/rdkafka';
import { T, harness, tp, until } from './helpers/harness';

const E = Kafka.CODES.ERRORS;

/** librdkafka's FATAL log line for a KIP-848 duplicate `group.instance.id` (librdkafka 2.12). */
const UNRELEASED_LOG =
  '[thrd:main]: Fatal error: Broker: The instance ID is still used by another member in the consumer group: ConsumerGroupHeartbeat fatal error: Broker: The instance ID is still used by another member in the consumer group';

describe('static membership (group.instance.id)', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  describe('fatalCauseFromText', () => {
    it('recovers the error behind ERR__FATAL from librdkafka fatal-error text', () => {
      assert.equal(fatalCauseFromText(UNRELEASED_LOG), E.ERR_UNRELEASED_INSTANCE_ID);
      assert.equal(
        fatalCauseFromText(
          'Fatal error: Broker: Static consumer fenced by other consumer with same group.instance.id: Fatal consumer error: Broker: Static consumer fenced by other consumer with same group.instance.id',
        ),
        E.ERR_FENCED_INSTANCE_ID,
      );
    });

    it('returns undefined for text without a known description', () => {
      assert.equal(fatalCauseFromText('Local: Fatal error'), undefined);
      assert.equal(fatalCauseFromText('Fatal error: something new: details'), undefined);
      assert.equal(fatalCauseFromText('Broker: Unknown member'), undefined);
    });
  });

  it('ends with a FencedInstanceError when the fatal error is a contested instance id', async () => {
    const h = harness({ config: { 'group.instance.id': 'worker-1' } });
    const result = lastValueFrom(h.consumer.process(() => undefined).pipe(toArray())).catch(
      (e: unknown) => e,
    );
    await until(() => h.fake().isConnected(), 'connect');
    // As librdkafka does it: the error event carries only ERR__FATAL; the FATAL log line that
    // names the cause comes just after, on another path.
    h.fake().emit(
      'event.error',
      Object.assign(new Error('Local: Fatal error'), { code: E.ERR__FATAL, isFatal: true }),
    );
    h.fake().emit('event.log', { severity: 0, fac: 'FATAL', message: UNRELEASED_LOG });
    const err = await result;
    assert.ok(err instanceof FencedInstanceError, String(err));
    assert.ok(hasErrorCode(err, ErrorCode.FencedInstance));
    assert.equal(err.kafkaCode, E.ERR_UNRELEASED_INSTANCE_ID);
    assert.equal(err.groupInstanceId, 'worker-1');
    assert.ok(err.cause instanceof KafkaClientError);
  });

  it('maps FENCED_INSTANCE_ID reported with its own code too', async () => {
    const h = harness({ config: { 'group.instance.id': 'worker-2' } });
    const result = lastValueFrom(h.consumer.process(() => undefined).pipe(toArray())).catch(
      (e: unknown) => e,
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().emit(
      'event.error',
      Object.assign(new Error('Broker: Static consumer fenced by other consumer'), {
        code: E.ERR_FENCED_INSTANCE_ID,
      }),
    );
    const err = await result;
    assert.ok(err instanceof FencedInstanceError, String(err));
    assert.equal(err.kafkaCode, E.ERR_FENCED_INSTANCE_ID);
  });

  it('classic: close() revokes locally through drain → commit → unassign, never unsubscribes, and says the partitions were not handed over', async () => {
    const h = harness({ config: { 'group.instance.id': 'worker-1' } }, { protocol: 'EAGER' });
    const seen: number[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.offset)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 4);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 4, 'processed');
    await h.consumer.close();
    assert.ok(!h.fake().ops().includes('unsubscribe'), h.fake().ops().join(' '));
    assert.ok(h.fake().ops().includes('unassign'));
    assert.equal(h.fake().commits.get(`${T}[0]`), 4);
    assert.deepEqual(
      h.events.map((e) => e.type),
      ['assigned', 'revoking', 'drained', 'committed', 'revoked'],
    );
    const revoked = h.events.find((e) => e.type === 'revoked');
    assert.ok(revoked?.type === 'revoked' && revoked.handedOver === false);
  });

  it('a dynamic member unsubscribes on close() and hands its partitions over', async () => {
    const h = harness({}, { protocol: 'EAGER' });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'assigned'), 'assigned');
    await h.consumer.close();
    assert.ok(h.fake().ops().includes('unsubscribe'));
    const revoked = h.events.find((e) => e.type === 'revoked');
    assert.ok(revoked?.type === 'revoked' && revoked.handedOver === true);
  });

  it('KIP-848: a static member still unsubscribes on close() (librdkafka leaves with epoch -2, keeping the assignment)', async () => {
    const h = harness(
      { config: { 'group.instance.id': 'worker-1', 'group.protocol': 'consumer' } },
      { protocol: 'COOPERATIVE' },
    );
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => h.events.some((e) => e.type === 'assigned'), 'assigned');
    await h.consumer.close();
    assert.ok(h.fake().ops().includes('unsubscribe'));
    const revoked = h.events.find((e) => e.type === 'revoked');
    assert.ok(revoked?.type === 'revoked' && revoked.handedOver === false);
  });
});
