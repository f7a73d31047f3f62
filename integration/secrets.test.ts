import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import pino from 'pino';
import { AuthenticationError, ConnectError, ReactiveConsumer } from '../lib';
import type { OAuthBearerToken, ReactiveConsumerOptions } from '../lib';
import {
  SASL_PASSWORD,
  SASL_USER,
  TLS_DIR,
  createTopic,
  oauthBrokers,
  produce,
  saslSslBrokers,
  uniqueName,
  waitFor,
} from './helpers/kafka';

/**
 * Secrets never leave: SASL_SSL (SCRAM) and OAUTHBEARER consumers with a dead-letter producer and
 * a transactional producer, at the most verbose log levels (pino `trace`, librdkafka `debug` for
 * its configuration, security and protocol), with the right password and with a wrong one. Every
 * log line, error (message, stack, causes, inspect), event, metrics and health snapshot, and the
 * consumer's own inspect and JSON output are searched for each secret: none may appear.
 */
describe('secrets never leave (real broker, SASL_SSL and OAUTHBEARER)', function () {
  this.timeout(180_000);
  const CA = join(TLS_DIR, 'ca.pem');
  /** A password the broker does not know; as secret as the right one. */
  const WRONG_PASSWORD = `wrong-${SASL_PASSWORD}-${Date.now().toString(36)}`;
  const consumers: ReactiveConsumer[] = [];
  let lines: string[] = [];
  let seen: string[] = [];

  before(function () {
    if (!existsSync(CA)) {
      throw new Error(
        `no test CA in ${TLS_DIR}: the test cluster has no TLS listeners (kafka.sh generates them in jar mode)`,
      );
    }
  });
  beforeEach(() => {
    lines = [];
    seen = [];
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.close()));
  });

  /** A pino logger at `trace` whose every line is kept. */
  function recordingLogger() {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    });
    return pino({ level: 'trace' }, sink);
  }

  function make(options: Partial<ReactiveConsumerOptions> & { config: Record<string, unknown> }) {
    const c = new ReactiveConsumer({
      topicConfig: { 'auto.offset.reset': 'earliest' },
      topics: [],
      commitIntervalMs: 200,
      connectTimeoutMs: 20_000,
      logger: recordingLogger(),
      ...options,
      config: { debug: 'conf,security,protocol', ...options.config },
    } as ReactiveConsumerOptions);
    consumers.push(c);
    c.events$.subscribe((e) => seen.push(inspect(e, { depth: 8 }), safeJson(e)));
    return c;
  }

  /** Everything a user or an operator could see of a consumer now. */
  function snapshot(c: ReactiveConsumer): void {
    seen.push(inspect(c, { depth: 8 }), JSON.stringify(c), safeJson(c.settings));
    seen.push(safeJson(c.metrics()), safeJson(c.health()));
  }

  function errorText(err: unknown): string {
    const parts = [inspect(err, { depth: 8 }), safeJson(err)];
    for (let e: unknown = err; e instanceof Error; e = e.cause) {
      parts.push(e.message, e.stack ?? '');
    }
    return parts.join('\n');
  }

  function assertNoSecret(secrets: string[]): void {
    const everything = [...lines, ...seen];
    assert.ok(lines.length > 50, `only ${lines.length} log lines: the scan would prove little`);
    for (const secret of secrets) {
      const found = everything.find((text) => text.includes(secret));
      assert.equal(
        found,
        undefined,
        `a secret (${secret.length} characters) appears in: ${found?.slice(0, 300)}`,
      );
    }
  }

  const saslSsl = (password: string) => ({
    'bootstrap.servers': saslSslBrokers(),
    'security.protocol': 'sasl_ssl' as const,
    'sasl.mechanisms': 'SCRAM-SHA-512',
    'sasl.username': SASL_USER,
    'sasl.password': password,
    'ssl.ca.location': CA,
  });

  it('SASL_SSL: a consumer with a dead-letter producer and a transactional one, then a wrong password, show no password anywhere', async () => {
    const topic = uniqueName('secrets');
    const out = uniqueName('secrets-out');
    await createTopic(topic, 1);
    await createTopic(out, 1);
    await createTopic(`${topic}.dlq`, 1);
    await produce(
      topic,
      Array.from({ length: 6 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
    );

    // 1. process() with a dead-letter topic: one message fails for good and is written there.
    const dl = make({
      config: { ...saslSsl(SASL_PASSWORD), 'group.id': uniqueName('secrets-dl') },
      topics: [topic],
    });
    let dlError: unknown;
    let deadLettered = 0;
    dl.events$.subscribe((e) => e.type === 'dead-lettered' && (deadLettered += 1));
    const processed: number[] = [];
    dl.process(
      (m) => {
        if (m.offset === 2) throw new Error('a poison message');
        processed.push(m.offset);
      },
      { retry: 0, onFailure: 'dead-letter', deadLetter: { topic: `${topic}.dlq` } },
    ).subscribe({ error: (e: unknown) => (dlError = e) });
    await waitFor(() => processed.length === 5, { timeoutMs: 60_000, what: 'five processed' });
    await waitFor(() => deadLettered === 1, {
      timeoutMs: 30_000,
      what: 'the poison message dead-lettered',
    });
    snapshot(dl);
    await dl.close();
    assert.equal(dlError, undefined);

    // 2. processTransactional(): outputs and offsets in transactions, over the same credentials.
    const tx = make({
      config: { ...saslSsl(SASL_PASSWORD), 'group.id': uniqueName('secrets-tx') },
      topics: [topic],
    });
    let txError: unknown;
    let written = 0;
    tx.processTransactional((m) => [{ topic: out, key: m.key, value: m.value }]).subscribe({
      next: () => (written += 1),
      error: (e: unknown) => (txError = e),
    });
    await waitFor(() => written === 6, { timeoutMs: 60_000, what: 'six transactional outputs' });
    snapshot(tx);
    await tx.close();
    assert.equal(txError, undefined);

    // 3. A wrong password: the consumer ends with an AuthenticationError.
    const bad = make({
      config: { ...saslSsl(WRONG_PASSWORD), 'group.id': uniqueName('secrets-bad') },
      topics: [topic],
    });
    let badError: unknown;
    bad.process(() => undefined).subscribe({ error: (e: unknown) => (badError = e) });
    await waitFor(() => badError !== undefined, { timeoutMs: 60_000, what: 'the refusal' });
    // Refused credentials end it: an AuthenticationError, or (TLS and SCRAM over one connection)
    // a ConnectError when the broker closes the connection before saying why.
    assert.ok(
      badError instanceof AuthenticationError || badError instanceof ConnectError,
      errorText(badError).slice(0, 500),
    );
    seen.push(errorText(badError));
    snapshot(bad);

    assertNoSecret([SASL_PASSWORD, WRONG_PASSWORD]);
  });

  it('OAUTHBEARER: the token never appears, with a dead-letter producer and a transactional one', async () => {
    const topic = uniqueName('secrets-oauth');
    const out = uniqueName('secrets-oauth-out');
    await createTopic(topic, 1);
    await createTopic(out, 1);
    await produce(topic, [
      { key: 'a', value: '1' },
      { key: 'b', value: '2' },
    ]);
    const tokens: string[] = [];
    const token = (): OAuthBearerToken => {
      const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
      const iat = Date.now() / 1000;
      const exp = iat + 60;
      // A claim no log has any reason to hold: the scan looks for the whole token and for it.
      const value = `${b64({ alg: 'none' })}.${b64({ sub: 'alice', iat, exp, jti: `secret-${tokens.length}-${Date.now()}` })}.`;
      tokens.push(value);
      return { value, lifetimeMs: Math.floor(exp * 1000), principal: 'alice' };
    };
    const oauth = {
      'bootstrap.servers': oauthBrokers(),
      'security.protocol': 'sasl_plaintext' as const,
      'sasl.mechanisms': 'OAUTHBEARER',
    };
    const c = make({
      config: { ...oauth, 'group.id': uniqueName('secrets-oauth') },
      topics: [topic],
      oauthBearerToken: async () => token(),
    });
    let written = 0;
    let error: unknown;
    c.processTransactional((m) => [{ topic: out, key: m.key, value: m.value }]).subscribe({
      next: () => (written += 1),
      error: (e: unknown) => (error = e),
    });
    await waitFor(() => written === 2, { timeoutMs: 60_000, what: 'two transactional outputs' });
    snapshot(c);
    await c.close();
    assert.equal(error, undefined);

    const d = make({
      config: { ...oauth, 'group.id': uniqueName('secrets-oauth-dl') },
      topics: [topic],
      oauthBearerToken: async () => token(),
    });
    let dead = 0;
    d.process(
      () => {
        throw new Error('every message fails');
      },
      { retry: 0, onFailure: 'dead-letter', deadLetter: { topic: out } },
    ).subscribe({ error: (e: unknown) => (error = e) });
    d.events$.subscribe((e) => e.type === 'dead-lettered' && (dead += 1));
    await waitFor(() => dead === 2, { timeoutMs: 60_000, what: 'two dead-lettered' });
    snapshot(d);
    await d.close();
    assert.equal(error, undefined);

    assert.ok(tokens.length >= 2, `${tokens.length} tokens issued`);
    const claims = tokens.map((t) => Buffer.from(t.split('.')[1]!, 'base64url').toString('utf8'));
    const jtis = claims.map((c) => (JSON.parse(c) as { jti: string }).jti);
    assertNoSecret([...tokens, ...tokens.map((t) => t.split('.')[1]!), ...jtis]);
  });
});

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)) ?? '';
  } catch (err) {
    return `unserializable: ${String(err)}`;
  }
}
