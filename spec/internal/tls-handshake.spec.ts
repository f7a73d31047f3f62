import assert from 'node:assert/strict';
import {
  TlsFailureWatch,
  bootstrapAddresses,
  describeTlsSettings,
  parseTlsHandshakeFailure,
} from '../../lib/internal/binding/tls-handshake';

const verifyFailed = (broker: string, suffix = ' (after 6ms in state SSL_HANDSHAKE)') =>
  `[thrd:${broker}]: ${broker}: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed (install ca-certificates package)${suffix}`;

describe('tls-handshake', () => {
  it("parses librdkafka's FAIL line about a certificate it could not verify", () => {
    const f = parseTlsHandshakeFailure(verifyFailed('ssl://127.0.0.1:9095/bootstrap'));
    assert.equal(f?.broker, 'ssl://127.0.0.1:9095/bootstrap');
    assert.equal(f?.certificateRejected, true);
    assert.match(f?.reason ?? '', /^error:0A000086:SSL routines::certificate verify failed: /);
    assert.doesNotMatch(f?.reason ?? '', /after 6ms/);
  });

  it('strips the suppressed-repeats note and tells other handshake failures apart', () => {
    const f = parseTlsHandshakeFailure(
      verifyFailed(
        'sasl_ssl://h:9096/1',
        ' (after 11ms in state SSL_HANDSHAKE, 1 identical error(s) suppressed)',
      ),
    );
    assert.equal(f?.broker, 'sasl_ssl://h:9096/1');
    assert.doesNotMatch(f?.reason ?? '', /suppressed/);
    const other = parseTlsHandshakeFailure(
      'ssl://h:9092/bootstrap: SSL handshake failed: error:0A00010B:SSL routines::wrong version number (after 1ms in state SSL_HANDSHAKE)',
    );
    assert.equal(other?.certificateRejected, false);
    assert.equal(
      parseTlsHandshakeFailure('ssl://h:9092/bootstrap: Connect to ipv4#1.2.3.4:9092 failed'),
      undefined,
    );
  });

  it('gives a final verdict only when every bootstrap broker rejected the certificate', () => {
    const watch = new TlsFailureWatch(bootstrapAddresses('ssl://a:9095, b:9095'));
    assert.equal(
      watch.observe({ fac: 'FAIL', message: verifyFailed('ssl://a:9095/bootstrap') }),
      false,
    );
    assert.equal(watch.final, false);
    assert.equal(
      watch.observe({ fac: 'BROKER', message: verifyFailed('ssl://b:9095/bootstrap') }),
      false,
    );
    assert.equal(
      watch.observe({ fac: 'FAIL', message: verifyFailed('ssl://b:9095/bootstrap') }),
      true,
    );
    assert.equal(watch.final, true);
    // reported once
    assert.equal(
      watch.observe({ fac: 'FAIL', message: verifyFailed('ssl://a:9095/bootstrap') }),
      false,
    );
  });

  it('names the TLS settings but never a key or a PEM', () => {
    const text = describeTlsSettings({
      'security.protocol': 'ssl',
      'ssl.ca.location': '/etc/ca.pem',
      'ssl.ca.pem': '-----BEGIN CERTIFICATE-----',
      'ssl.key.password': 'secret',
    });
    assert.equal(text, 'security.protocol=ssl, ssl.ca.location=/etc/ca.pem, ssl.ca.pem=(set)');
  });
});
