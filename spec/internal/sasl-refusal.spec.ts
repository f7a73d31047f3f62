import assert from 'node:assert/strict';
import {
  SaslRefusalWatch,
  parseSaslRefusal,
  staticCredentials,
} from '../../lib/internal/binding/sasl-refusal';
import { bootstrapAddresses } from '../../lib/internal/binding/tls-handshake';

const line = (broker: string, error: string) => `[thrd:${broker}]: ${broker}: ${error}`;
const invalid =
  'SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 316ms in state AUTH_REQ)';

describe('sasl-refusal', () => {
  it("names the broker of librdkafka's line about a refused login or a mechanism it does not offer", () => {
    assert.equal(
      parseSaslRefusal(line('sasl_plaintext://127.0.0.1:9094/bootstrap', invalid)),
      'sasl_plaintext://127.0.0.1:9094/bootstrap',
    );
    assert.equal(
      parseSaslRefusal(
        line(
          'sasl_ssl://h:9096/1',
          'SASL authentication error: Authentication failed: Invalid username or password (after 3ms in state AUTH_REQ, 1 identical error(s) suppressed)',
        ),
      ),
      'sasl_ssl://h:9096/1',
    );
    assert.equal(
      parseSaslRefusal(
        line(
          'sasl_plaintext://h:9094/bootstrap',
          "SASL SCRAM-SHA-512 mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's supported mechanisms: PLAIN (after 1ms in state AUTH_HANDSHAKE)",
        ),
      ),
      'sasl_plaintext://h:9094/bootstrap',
    );
    assert.equal(
      parseSaslRefusal(
        line(
          'sasl_plaintext://h:9094/bootstrap',
          'SASL authentication error: SASL SCRAM server signature mismatch',
        ),
      ),
      undefined,
      "a failure of the client's own is not taken for the broker's refusal",
    );
    // a connection lost during the login is not a refusal
    assert.equal(
      parseSaslRefusal(
        line(
          'sasl_plaintext://h:9094/bootstrap',
          'SASL authentication error: SaslAuthenticateRequest failed: Local: Broker transport failure',
        ),
      ),
      undefined,
    );
  });

  it('takes refusals as final only for static credentials over SASL', () => {
    const sasl = { 'security.protocol': 'SASL_SSL' };
    assert.equal(staticCredentials({ ...sasl, 'sasl.mechanisms': 'SCRAM-SHA-256' }), true);
    assert.equal(staticCredentials({ ...sasl, 'sasl.mechanism': 'plain' }), true);
    assert.equal(staticCredentials({ ...sasl, 'sasl.mechanisms': 'OAUTHBEARER' }), false);
    assert.equal(staticCredentials(sasl), false, "librdkafka's default mechanism is GSSAPI");
    assert.equal(staticCredentials({ 'sasl.mechanisms': 'PLAIN' }), false, 'not over SASL');
  });

  it('is final once every bootstrap broker refused, reported once, never when disabled', () => {
    const brokers = bootstrapAddresses('sasl_plaintext://a:9094, b:9094');
    const watch = new SaslRefusalWatch(brokers, true);
    const refuse = (b: string) =>
      watch.observe({
        fac: 'FAIL',
        message: line(`sasl_plaintext://${b}:9094/bootstrap`, invalid),
      });
    assert.equal(refuse('a'), false);
    assert.equal(refuse('a'), false, 'the same broker twice is still one');
    assert.equal(watch.final, false);
    assert.equal(refuse('b'), true);
    assert.equal(refuse('b'), false, 'reported once');
    assert.match(watch.first ?? '', /a:9094/);
    const off = new SaslRefusalWatch(brokers, false);
    for (const b of ['a', 'b'])
      off.observe({ fac: 'FAIL', message: line(`sasl_plaintext://${b}:9094/bootstrap`, invalid) });
    assert.equal(off.final, false);
  });
});
