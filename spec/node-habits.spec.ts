/**
 * Node habits: `await using` closes the consumer, an AbortSignal closes it, and any logger with
 * pino's calling convention is accepted.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import { ConfigError } from '../lib';
import type { KafkaMessage, LoggerLike } from '../lib';
import { consumersRunning } from '../lib/internal/binding/thread-pool';
import { T, committed, harness, tp, until } from './helpers/harness';

describe('Node habits', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('await using: leaving the scope closes the consumer gracefully (final offset committed)', async () => {
    let h!: ReturnType<typeof harness>;
    let handled = 0;
    {
      await using scoped = (h = harness({ commitIntervalMs: 60_000 })).consumer;
      subs.push(scoped.process(() => void (handled += 1)).subscribe());
      await until(() => h.fake().isConnected(), 'connect');
      h.fake().produce(T, 0, 4);
      h.fake().rebalanceAssign([tp(0)]);
      await until(() => handled === 4, 'handled');
      assert.equal(committed(h), undefined, 'no periodic commit yet');
    }
    assert.equal(committed(h), 4, 'every processed message committed by the close');
    assert.ok(
      h.events.some((e) => e.type === 'revoked'),
      'revoked through the protocol',
    );
    assert.equal(h.fake().isConnected(), false, 'disconnected');
  });

  it('a consumer counts toward the libuv pool warning only while it runs (closed or failed ones leave)', async () => {
    const before = consumersRunning();
    for (let i = 0; i < 6; i++) {
      const h = harness();
      subs.push(h.consumer.process(() => undefined).subscribe({ error: () => undefined }));
      await until(() => h.fake().isConnected(), 'connect');
      assert.equal(consumersRunning(), before + 1, `consumer ${i} counted while it runs`);
      await h.consumer.close();
      assert.equal(consumersRunning(), before, `consumer ${i} no longer counted once closed`);
    }
    const failing = harness({}, { connectError: 'Broker transport failure' });
    let failed = false;
    subs.push(
      failing.consumer.process(() => undefined).subscribe({ error: () => (failed = true) }),
    );
    await until(() => failed, 'the consumer fails');
    assert.equal(consumersRunning(), before, 'a failed consumer is no longer counted');
  });

  it('an AbortSignal closes the consumer; an aborted one closes it at once', async () => {
    const controller = new AbortController();
    const h = harness({ signal: controller.signal });
    let completed = false;
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => m.offset)
        .subscribe({ complete: () => (completed = true) }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 3, 'processed');
    controller.abort();
    await until(() => completed, 'the pipeline completes after the abort');
    assert.ok(h.events.some((e) => e.type === 'revoked'));

    const early = harness({ signal: AbortSignal.abort() });
    let error: unknown;
    subs.push(early.consumer.process(() => undefined).subscribe({ error: (e) => (error = e) }));
    await until(() => error !== undefined, 'subscribing to a consumer closed by its signal fails');
    assert.equal((error as Error).name, 'ClosedError');
  });

  it('rejects a signal that is not an AbortSignal', () => {
    assert.throws(
      () => harness({ signal: {} as AbortSignal }),
      (e: unknown) => e instanceof ConfigError && /signal/.test(e.message),
    );
  });

  it('accepts a structural (non-pino) logger and logs through its children', async () => {
    const lines: { level: string; bindings: Record<string, unknown>; message?: string }[] = [];
    const make = (bindings: Record<string, unknown>): LoggerLike => {
      const at =
        (level: string) =>
        (fields: object | string, message?: string): void => {
          lines.push({
            level,
            bindings,
            message: typeof fields === 'string' ? fields : message,
          });
        };
      return {
        child: (more) => make({ ...bindings, ...more }),
        error: at('error'),
        warn: at('warn'),
        info: at('info'),
        debug: at('debug'),
      };
    };
    const h = harness({ logger: make({ app: 'test' }) });
    subs.push(h.consumer.process(() => undefined).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    await h.consumer.close();
    const closed = lines.find((l) => l.message === 'closed');
    assert.ok(closed, 'the close was logged');
    assert.equal(closed.bindings.app, 'test');
    assert.equal(closed.bindings.component, 'reactive-rdkafka');
    assert.throws(
      () => harness({ logger: { child: () => undefined } as unknown as LoggerLike }),
      (e: unknown) => e instanceof ConfigError && /logger/.test(e.message),
    );
  });
});
