import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { AuthenticationError, ConnectError } from '../lib';
import type { ConsumerEvent, OAuthBearerToken, ReactiveConsumer } from '../lib';
import {
  SASL_PASSWORD,
  SASL_USER,
  TLS_DIR,
  committedOffsets,
  createTopic,
  oauthBrokers,
  produce,
  saslSslBrokers,
  sslBrokers,
  uniqueName,
  waitFor,
} from './helpers/kafka';
import { useConsumers } from './helpers/consumers';
import { useTestOutput } from './helpers/output';

/**
 * Connecting as to a managed cluster: TLS with certificate verification on (SSL and SASL_SSL with
 * SCRAM), a client that trusts the wrong CA, and OAUTHBEARER with tokens that expire and must be
 * refreshed. kafka.sh (jar mode) generates the CA and runs the listeners.
 */
describe('security: TLS and OAUTHBEARER (real broker)', function () {
  this.timeout(120_000);
  const output = useTestOutput();
  const { consumer, subs } = useConsumers(output);
  const CA = join(TLS_DIR, 'ca.pem');
  const WRONG_CA = join(TLS_DIR, 'untrusted-ca.pem');

  before(function () {
    if (!existsSync(CA) || !existsSync(WRONG_CA)) {
      throw new Error(
        `no test CA in ${TLS_DIR}: the test cluster has no TLS listeners (kafka.sh generates them in jar mode with KAFKA_TLS=1; the docker-compose path has none) — set KAFKA_TLS_DIR_TEST and KAFKA_SSL_BROKERS_TEST/KAFKA_SASL_SSL_BROKERS_TEST/KAFKA_OAUTH_BROKERS_TEST for another cluster`,
      );
    }
  });

  /** librdkafka verifies the certificate and the broker's host name (here its IP). */
  const verified = {
    'ssl.ca.location': CA,
    'enable.ssl.certificate.verification': true,
    'ssl.endpoint.identification.algorithm': 'https',
  } as const;

  function run(c: ReactiveConsumer) {
    const offsets: number[] = [];
    const events: ConsumerEvent[] = [];
    let error: unknown;
    subs.push(c.events$.subscribe((e) => events.push(e)));
    subs.push(
      c.process((m) => void offsets.push(m.offset)).subscribe({ error: (e) => (error = e) }),
    );
    return { offsets, events, error: () => error };
  }

  async function consumesAndCommits(name: string, config: Record<string, unknown>) {
    const topic = uniqueName(name);
    await createTopic(topic, 1);
    await produce(topic, [
      { key: 'a', value: '1' },
      { key: 'b', value: '2' },
      { key: 'c', value: '3' },
    ]);
    const groupId = uniqueName(`${name}-group`);
    const c = consumer(name, { config: { ...config, 'group.id': groupId }, topics: [topic] });
    const r = run(c);
    await waitFor(() => r.offsets.length === 3, {
      timeoutMs: 60_000,
      what: `3 records over ${name}`,
    });
    await waitFor(async () => (await committedOffsets(groupId, topic, 1))[0] === 3, {
      timeoutMs: 15_000,
      what: `the commit over ${name}`,
    });
    await c.close();
    assert.equal(r.error(), undefined);
    assert.deepEqual(r.offsets, [0, 1, 2]);
  }

  it('SSL with certificate and host name verification: consumes and commits', async () => {
    await consumesAndCommits('ssl', {
      'bootstrap.servers': sslBrokers(),
      'security.protocol': 'ssl',
      ...verified,
    });
  });

  it('SASL_SSL (SCRAM-SHA-512) with certificate verification: consumes and commits', async () => {
    await consumesAndCommits('sasl-ssl', {
      'bootstrap.servers': saslSslBrokers(),
      'security.protocol': 'sasl_ssl',
      'sasl.mechanisms': 'SCRAM-SHA-512',
      'sasl.username': SASL_USER,
      'sasl.password': SASL_PASSWORD,
      ...verified,
    });
  });

  for (const protocol of ['ssl', 'sasl_ssl'] as const) {
    it(`a CA that did not sign the broker's certificate (${protocol}): a ConnectError naming the TLS failure at once, not after connectTimeoutMs`, async () => {
      const topic = uniqueName('wrong-ca');
      const c = consumer(`wrong-ca-${protocol}`, {
        config: {
          'bootstrap.servers': protocol === 'ssl' ? sslBrokers() : saslSslBrokers(),
          'security.protocol': protocol,
          ...(protocol === 'sasl_ssl'
            ? {
                'sasl.mechanisms': 'SCRAM-SHA-512',
                'sasl.username': SASL_USER,
                'sasl.password': SASL_PASSWORD,
              }
            : {}),
          ...verified,
          'ssl.ca.location': WRONG_CA,
          'group.id': uniqueName('wrong-ca-group'),
        },
        topics: [topic],
        connectTimeoutMs: 20_000,
      });
      const t0 = Date.now();
      let calls = 0;
      let error: unknown;
      let endedAt = 0;
      subs.push(
        c
          .process(() => void (calls += 1))
          .subscribe({
            error: (e) => ((error = e), (endedAt = Date.now())),
          }),
      );
      await waitFor(() => error !== undefined, { timeoutMs: 30_000, what: 'process() to error' });
      const ms = endedAt - t0;
      console.log(`      wrong CA (${protocol}): ConnectError after ${ms} ms`);
      assert.ok(error instanceof ConnectError, String(error));
      assert.equal(error.retriable, false);
      assert.match(error.message, /TLS handshake with \S+ failed/);
      assert.match(error.message, /certificate verify failed/);
      assert.match(error.message, /untrusted-ca\.pem/);
      assert.doesNotMatch(error.message, new RegExp(SASL_PASSWORD));
      assert.ok(ms < 10_000, `the error came after ${ms} ms (connectTimeoutMs is 20000)`);
      assert.equal(calls, 0);
      // close() returns at once, too
      const c0 = Date.now();
      await c.close();
      assert.ok(Date.now() - c0 < 5000, `close() took ${Date.now() - c0} ms`);
    });
  }

  /** An unsecured JWS (RFC 7515 appendix A.5) as Kafka's unsecured validator accepts it. */
  function unsecuredJws(sub: string, lifetimeMs: number): OAuthBearerToken {
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const iat = Date.now() / 1000;
    const exp = iat + lifetimeMs / 1000;
    return {
      value: `${b64({ alg: 'none' })}.${b64({ sub, iat, exp })}.`,
      lifetimeMs: Math.floor(exp * 1000),
      principal: sub,
    };
  }

  const oauthConfig = () => ({
    'bootstrap.servers': oauthBrokers(),
    'security.protocol': 'sasl_plaintext' as const,
    'sasl.mechanisms': 'OAUTHBEARER',
  });

  it('OAUTHBEARER: short-lived tokens are refreshed; records produced after the first token expired are still consumed and committed', async () => {
    const topic = uniqueName('oauth');
    await createTopic(topic, 1);
    await produce(topic, [
      { key: 'a', value: '1' },
      { key: 'b', value: '2' },
    ]);
    const groupId = uniqueName('oauth-group');
    const LIFETIME = 5000;
    const issued: number[] = [];
    const c = consumer('oauth', {
      config: { ...oauthConfig(), 'group.id': groupId },
      topics: [topic],
      oauthBearerToken: async () => {
        await new Promise((r) => setTimeout(r, 5)); // an asynchronous token service
        issued.push(Date.now());
        return unsecuredJws('alice', LIFETIME);
      },
    });
    const r = run(c);
    await waitFor(() => r.offsets.length === 2, { timeoutMs: 60_000, what: '2 records' });
    const firstExpiry = (issued[0] ?? 0) + LIFETIME;
    // Past the first token's expiry, with two refreshes (at ~4 s and ~8 s).
    await waitFor(() => issued.length >= 3 && Date.now() > firstExpiry + 1000, {
      timeoutMs: 30_000,
      what: 'two token refreshes, past the first token expiry',
    });
    await produce(topic, [{ key: 'c', value: '3' }]);
    await waitFor(() => r.offsets.length === 3, {
      timeoutMs: 30_000,
      what: 'the record produced after the first token expired',
    });
    await waitFor(async () => (await committedOffsets(groupId, topic, 1))[0] === 3, {
      timeoutMs: 15_000,
      what: 'the commit after the refreshes',
    });
    await c.close();
    assert.equal(r.error(), undefined);
    const gaps = issued.slice(1).map((t, i) => t - (issued[i] ?? 0));
    console.log(`      ${issued.length} tokens issued, refresh gaps ${gaps.join(', ')} ms`);
    for (const g of gaps) assert.ok(g > 3000 && g < 5000, `refresh gaps ${gaps.join(', ')} ms`);
    assert.ok(
      !r.events.some((e) => e.type === 'client-error'),
      `client errors: ${JSON.stringify(r.events.filter((e) => e.type === 'client-error'))}`,
    );
  });

  it('OAUTHBEARER: a provider that fails on refresh is logged and retried; once the token expired the broker refuses re-authentication and the consumer ends with an AuthenticationError', async () => {
    const topic = uniqueName('oauth-fail');
    await createTopic(topic, 1);
    await produce(topic, [{ key: 'a', value: '1' }]);
    let calls = 0;
    const lines: string[] = [];
    const capture = pino(
      { level: 'debug' },
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          lines.push(chunk.toString());
          cb();
        },
      }),
    );
    const c = consumer('oauth-fail', {
      logger: capture,
      config: { ...oauthConfig(), 'group.id': uniqueName('oauth-fail-group') },
      topics: [topic],
      connectTimeoutMs: 3000,
      oauthBearerToken: () => {
        calls += 1;
        if (calls > 1) throw new Error('token service unavailable');
        return unsecuredJws('bob', 8000);
      },
    });
    const r = run(c);
    await waitFor(() => r.offsets.length === 1, { timeoutMs: 60_000, what: 'the record' });
    // The error comes ~35 s after the expiry (librdkafka's re-authentication retries).
    await waitFor(() => r.error() !== undefined, {
      timeoutMs: 90_000,
      what: 'the consumer to end once the token expired',
    });
    const err = r.error();
    assert.ok(err instanceof AuthenticationError, String(err));
    assert.match(err.message, /sasl\.mechanisms=OAUTHBEARER/);
    assert.ok(calls >= 2, `${calls} provider calls`);
    const failures = lines.filter((l) => /OAUTHBEARER token refresh failed/.test(l));
    assert.ok(failures.length >= 1, 'the failed refresh is logged');
    assert.match(failures[0] ?? '', /token service unavailable/);
    assert.match(failures[0] ?? '', /"level":50/);
  });

  it('OAUTHBEARER: a provider failing before the first connect ends the start with a ConnectError naming it', async () => {
    const c = consumer('oauth-none', {
      config: { ...oauthConfig(), 'group.id': uniqueName('oauth-none-group') },
      topics: [uniqueName('oauth-none')],
      oauthBearerToken: () => Promise.reject(new Error('no credentials for the token service')),
    });
    const r = run(c);
    await waitFor(() => r.error() !== undefined, { timeoutMs: 10_000, what: 'process() to error' });
    const err = r.error();
    assert.ok(err instanceof ConnectError, String(err));
    assert.match(err.message, /oauthBearerToken provider failed: no credentials/);
  });
});
