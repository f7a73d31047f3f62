/**
 * SASL refusals while connecting, as librdkafka logs them (the error event only says
 * "authentication failure", the failed connect "broker transport failure"). Pure: no I/O.
 *
 * A line looks like `[thrd:sasl_plaintext://127.0.0.1:9094/bootstrap]:
 * sasl_plaintext://127.0.0.1:9094/bootstrap: SASL authentication error: Authentication failed
 * during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 316ms
 * in state AUTH_REQ)`. librdkafka retries such a login forever; a static password (PLAIN,
 * SCRAM-*) that a broker refused stays refused, so once every bootstrap broker refused it the
 * connect is given up at once instead of after `connectTimeoutMs`. A token (OAUTHBEARER) or a
 * Kerberos ticket (GSSAPI) can be renewed meanwhile: those wait for the timeout as before.
 */
import { addressOf } from './tls-handshake';

/** The broker's answer to a login it refused, or a mechanism it does not offer. */
const REFUSED =
  /(?:^|\]: )(\S+): SASL (?:authentication error: Authentication failed|\S+ mechanism handshake failed: Broker: Unsupported SASL mechanism)/i;

/** The broker name (`sasl_ssl://h:9096/bootstrap`) of a librdkafka log line saying it refused the login. */
export function parseSaslRefusal(message: string): string | undefined {
  return REFUSED.exec(message)?.[1];
}

/** Whether refusals under this `sasl.mechanisms` value are final (static credentials). */
export function staticCredentials(config: Record<string, unknown>): boolean {
  const protocol = String(config['security.protocol'] ?? '').toLowerCase();
  if (!protocol.startsWith('sasl')) return false;
  const mechanism = String(config['sasl.mechanisms'] ?? config['sasl.mechanism'] ?? 'GSSAPI');
  return /^(PLAIN|SCRAM-SHA-256|SCRAM-SHA-512)$/i.test(mechanism.trim());
}

/**
 * Collects the SASL refusals seen while connecting; final once every bootstrap broker refused the
 * static credentials (one broker refusing while another accepts is left to librdkafka).
 */
export class SaslRefusalWatch {
  private readonly refused = new Set<string>();
  /** The first refusing broker's line, for the error. */
  first: string | undefined;

  constructor(
    private readonly bootstrap: readonly string[],
    private readonly enabled: boolean,
  ) {}

  /** Feeds a librdkafka log line; returns true when the verdict just became final. */
  observe(log: { fac: string; message: string }): boolean {
    if (!this.enabled || this.final) return false;
    const broker = parseSaslRefusal(log.message);
    if (broker === undefined) return false;
    this.first ??= log.message;
    this.refused.add(addressOf(broker));
    return this.final;
  }

  /** Every bootstrap broker refused the credentials. */
  get final(): boolean {
    return this.bootstrap.length > 0 && this.bootstrap.every((a) => this.refused.has(a));
  }
}
