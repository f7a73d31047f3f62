/**
 * TLS handshake failures, as librdkafka reports them: only in its FAIL log lines (the error event
 * says "ssl error" and the failed connect "broker transport failure"). Pure: no I/O.
 *
 * A line looks like `[thrd:ssl://127.0.0.1:9095/bootstrap]: ssl://127.0.0.1:9095/bootstrap: SSL
 * handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate
 * could not be verified, verify that ssl.ca.location is correctly configured or root CA
 * certificates are installed (install ca-certificates package) (after 6ms in state SSL_HANDSHAKE)`.
 */

const HANDSHAKE_FAILED =
  /(?:^|\]: )(\S+): SSL handshake failed: (.*?)(?: \(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\))?$/;

/** One broker's failed TLS handshake. */
export interface TlsHandshakeFailure {
  /** librdkafka's name of the broker, e.g. `ssl://127.0.0.1:9095/bootstrap`. */
  readonly broker: string;
  /** OpenSSL's and librdkafka's explanation. */
  readonly reason: string;
  /**
   * The client refused the broker's certificate (unknown CA, expired, name mismatch): this does
   * not heal by retrying, only by changing `ssl.ca.location` or the broker's certificate.
   */
  readonly certificateRejected: boolean;
}

/** Parses a librdkafka FAIL line about a TLS handshake; undefined for any other line. */
export function parseTlsHandshakeFailure(message: string): TlsHandshakeFailure | undefined {
  const m = HANDSHAKE_FAILED.exec(message);
  if (!m) return undefined;
  const [, broker = '', reason = ''] = m;
  return {
    broker,
    reason,
    certificateRejected: /certificate verify failed/i.test(reason),
  };
}

/** The bootstrap brokers' `host:port`s of a `bootstrap.servers` value (scheme stripped). */
export function bootstrapAddresses(servers: unknown): string[] {
  if (typeof servers !== 'string') return [];
  return servers
    .split(',')
    .map((s) => s.trim().replace(/^[a-z_]+:\/\//i, ''))
    .filter((s) => s.length > 0);
}

/** `host:port` of a librdkafka broker name such as `ssl://127.0.0.1:9095/bootstrap` or `sasl_ssl://h:9096/1`. */
function addressOf(broker: string): string {
  return broker.replace(/^[a-z_]+:\/\//i, '').replace(/\/[^/]*$/, '');
}

/**
 * Collects the TLS failures seen while connecting. `verdict()` names a failure that will not heal
 * once every bootstrap broker has refused certificate verification (one broker with a bad
 * certificate while another answers is left to librdkafka).
 */
export class TlsFailureWatch {
  private readonly rejected = new Set<string>();
  private first: TlsHandshakeFailure | undefined;

  constructor(private readonly bootstrap: readonly string[]) {}

  /** Feeds a librdkafka log line; returns true when the verdict just became final. */
  observe(log: { fac: string; message: string }): boolean {
    if (log.fac !== 'FAIL') return false;
    const failure = parseTlsHandshakeFailure(log.message);
    if (!failure) return false;
    const wasFinal = this.final;
    if (
      this.first === undefined ||
      (failure.certificateRejected && !this.first.certificateRejected)
    ) {
      this.first = failure;
    }
    if (failure.certificateRejected) this.rejected.add(addressOf(failure.broker));
    return !wasFinal && this.final;
  }

  /** The most telling TLS failure seen, if any. */
  get failure(): TlsHandshakeFailure | undefined {
    return this.first;
  }

  /** Every bootstrap broker rejected by certificate verification. */
  get final(): boolean {
    return (
      this.bootstrap.length > 0 &&
      this.bootstrap.every((a) => this.rejected.has(a)) &&
      this.first?.certificateRejected === true
    );
  }
}

/** The TLS settings worth naming in an error (never a key or password). */
export function describeTlsSettings(config: Record<string, unknown>): string {
  const keys = [
    'security.protocol',
    'ssl.ca.location',
    'ssl.ca.pem',
    'enable.ssl.certificate.verification',
    'ssl.endpoint.identification.algorithm',
  ];
  return keys
    .filter((k) => config[k] !== undefined)
    .map((k) => (k === 'ssl.ca.pem' ? `${k}=(set)` : `${k}=${String(config[k])}`))
    .join(', ');
}
