/**
 * The schema-registry example (examples/schema-registry.ts) against an in-process HTTP server
 * speaking the registry's `GET /schemas/ids/{id}`: schemas are fetched once and cached, values the
 * registry cannot explain become DeserializationErrors that follow the failure policy.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Subscription } from 'rxjs';
import type { ConsumerEvent } from '../lib';
import { confluentJson, frame, requiredProperties } from '../examples/schema-registry';
import { T, committed, harness, tp, until } from './helpers/harness';
import type { Harness } from './helpers/harness';

/** Replaces the values of partition 0's messages. */
function values(h: Harness, vs: Buffer[]): void {
  const log = (
    h.fake() as unknown as { logs: Map<string, { value: Buffer; size: number }[]> }
  ).logs.get(`${T}[0]`);
  vs.forEach((v, i) => {
    const m = log?.[i];
    if (m) {
      m.value = v;
      m.size = v.length;
    }
  });
}

describe('schema-registry example (async deserializer)', () => {
  const subs: Subscription[] = [];
  let server: Server;
  let url = '';
  const requests: string[] = [];
  before(async () => {
    server = createServer((req, res) => {
      requests.push(req.url ?? '');
      if (req.url === '/schemas/ids/1') {
        res.writeHead(200, { 'content-type': 'application/vnd.schemaregistry.v1+json' });
        res.end(JSON.stringify({ schema: JSON.stringify({ type: 'object', required: ['id'] }) }));
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error_code: 40403, message: 'Schema not found' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('decodes framed values, caches the schema, and skips what the registry cannot explain', async () => {
    const h = harness();
    const events: ConsumerEvent[] = [];
    h.consumer.events$.subscribe((e) => events.push(e));
    const handled: { offset: number; value: unknown }[] = [];
    subs.push(
      h.consumer
        .process(
          (m: { offset: number; value: unknown }) =>
            void handled.push({ offset: m.offset, value: m.value }),
          {
            value: confluentJson(url, requiredProperties),
            onFailure: 'skip',
          },
        )
        .subscribe(),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 5);
    values(h, [
      frame(1, { id: 'a', amount: 3 }),
      frame(9, { id: 'b' }), // unknown schema id: 404
      frame(1, { amount: 4 }), // fails the schema's required properties
      Buffer.from('{"id":"c"}'), // not framed
      frame(1, { id: 'd' }),
    ]);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => committed(h) === 5, 'all five committed');
    assert.deepEqual(handled, [
      { offset: 0, value: { id: 'a', amount: 3 } },
      { offset: 4, value: { id: 'd' } },
    ]);
    assert.deepEqual(
      requests.filter((r) => r === '/schemas/ids/1'),
      ['/schemas/ids/1'],
      'schema 1 fetched once',
    );
    const skipped = events.flatMap((e) => (e.type === 'message-skipped' ? [e] : []));
    assert.deepEqual(
      skipped.map((e) => e.offset),
      [1, 2, 3],
    );
    assert.match((skipped[0]?.error as Error | undefined)?.message ?? '', /404 for schema id 9/);
    assert.equal((skipped[0]?.error as Error | undefined)?.name, 'DeserializationError');
    assert.match(
      (skipped[1]?.error as Error | undefined)?.message ?? '',
      /missing required property "id"/,
    );
    assert.match((skipped[2]?.error as Error | undefined)?.message ?? '', /Confluent wire format/);
    await h.consumer.close();
  });
});
