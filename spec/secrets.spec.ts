import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import type { Subscription } from 'rxjs';
import type { ReactiveConsumer } from '../lib';
import type { KafkaMessage } from '../lib';
import { T, harness, tp, until } from './helpers/harness';

/** Secret values, each recognisable in any output. */
const SECRETS = {
  'sasl.password': 'pw-5f1c2e',
  'sasl.oauthbearer.client.secret': 'client-secret-8d2a',
  'sasl.oauthbearer.config': 'principal=svc secret=oauth-cfg-91be',
  'ssl.key.password': 'keypw-77c3',
  'ssl.key.pem': '-----BEGIN PRIVATE KEY-----pem-4e0d',
  'ssl.keystore.password': 'keystorepw-b6a1',
};
const leaked = (text: string): string[] =>
  Object.values(SECRETS).filter((secret) => text.includes(secret));

const everyView = (consumer: ReactiveConsumer): string =>
  [
    inspect(consumer, { depth: Infinity, showHidden: true }),
    inspect(consumer.settings, { depth: Infinity }),
    JSON.stringify(consumer),
    JSON.stringify(consumer.settings),
    String(consumer),
    `${consumer.settings.globalConfig}`,
  ].join('\n');

describe('secrets never leave through the consumer', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('util.inspect and JSON.stringify of the consumer and its settings show every secret-bearing setting as [redacted]', () => {
    // The fake binding: a real one refuses the OIDC settings when built without libcurl.
    const consumer = harness({ config: { ...SECRETS } }).consumer;
    const text = everyView(consumer);
    assert.deepEqual(leaked(text), []);
    assert.equal(
      (JSON.parse(JSON.stringify(consumer.settings)) as { globalConfig: Record<string, unknown> })
        .globalConfig['sasl.password'],
      '[redacted]',
    );
    // What is not secret stays readable.
    assert.match(text, /'sasl\.password': '\[redacted\]'/);
    assert.match(text, /bootstrap\.servers/);
  });

  it('the binding still gets the real values, and a running consumer shows none of them, before and after close()', async () => {
    const h = harness({ config: { ...SECRETS } });
    const seen: number[] = [];
    subs.push(
      h.consumer
        .process((m: KafkaMessage) => {
          seen.push(m.offset);
        })
        .subscribe({ error: () => undefined }),
    );
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().rebalanceAssign([tp(0)]);
    await until(() => seen.length === 3, 'three messages processed');
    assert.equal(h.fake().config['sasl.password'], SECRETS['sasl.password']);
    assert.equal(h.fake().config['ssl.key.pem'], SECRETS['ssl.key.pem']);
    assert.deepEqual(leaked(everyView(h.consumer)), []);
    await h.consumer.close({ timeoutMs: 2000 });
    assert.deepEqual(leaked(everyView(h.consumer)), []);
  });
});
