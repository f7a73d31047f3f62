/**
 * A SIGTERM's close({ timeoutMs }) arriving after an earlier, longer close() reached its disconnect
 * (the last consume call still out, librdkafka's close slow): the shorter deadline holds for the
 * waits that are left.
 */
import assert from 'node:assert/strict';
import { FakeConsumer } from './fakes/fake-consumer';
import type { FakeOptions } from './fakes/fake-consumer';
import { harness, until } from './helpers/harness';

describe('close(): a shorter close() once the close is disconnecting', () => {
  it('close({timeoutMs: 1000}) while the loop stops still bounds the disconnect wait', async function () {
    this.timeout(60_000);
    let created: FakeConsumer | undefined;
    let inSlowConsume = false;
    const fakeOptions: FakeOptions = {};
    const h = harness({}, fakeOptions, {
      consumerFactory: ((g: Record<string, unknown>) => {
        const f = new FakeConsumer(g, fakeOptions);
        const consume = f.consume.bind(f);
        // consume() waits 3 s for a libuv pool thread once the close began (the pool busy).
        f.consume = ((n: number, cb: never) => {
          inSlowConsume = true;
          setTimeout(() => {
            inSlowConsume = false;
            consume(n, cb);
          }, 3000);
        }) as never;
        const disconnect = f.disconnect.bind(f);
        // librdkafka's close takes long (a LeaveGroup the coordinator does not answer, say).
        f.disconnect = ((cb?: () => void) => {
          setTimeout(() => disconnect(cb), 20_000).unref();
          return f;
        }) as never;
        created = f;
        return f;
      }) as never,
    });
    const sub = h.consumer.process(() => undefined).subscribe({ error: () => undefined });
    await until(() => created !== undefined && created.isConnected(), 'connect');
    void h.consumer.close({ timeoutMs: 30_000 });
    const engine = (h.consumer as unknown as { engine: { base: { shutdown: { stage: string } } } })
      .engine;
    await until(
      () => engine.base.shutdown.stage === 'disconnecting' && inSlowConsume,
      'disconnecting while the last consume call is still out',
    );
    const t0 = Date.now();
    await h.consumer.close({ timeoutMs: 1000 }); // SIGTERM
    const took = Date.now() - t0;
    sub.unsubscribe();
    assert.ok(took < 6000, `the second, 1 s close took ${took} ms`);
  });
});
