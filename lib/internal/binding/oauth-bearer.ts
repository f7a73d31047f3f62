/**
 * OAUTHBEARER tokens from the user's provider, kept fresh on a node-rdkafka client.
 *
 * node-rdkafka 3.x does not wire librdkafka's `oauthbearer_token_refresh_cb` (a function under
 * that key is silently ignored) nor `rd_kafka_oauthbearer_set_token_failure`; its only entry point
 * is `setOauthBearerToken(value)`, which sets the token with an unlimited lifetime and no
 * principal or extensions. So the schedule librdkafka would run is run here: the first token is
 * set before connecting, each next one at 80% of the current one's remaining lifetime (librdkafka's
 * own rule), and a failed refresh is logged and retried while the current token stays in use.
 * librdkafka re-authenticates each broker connection (KIP-368) at 90% of the session lifetime the
 * broker grants (at most the token's), so it always presents the newest token.
 */
import type { Logger } from '../../logger';
import { ConnectError } from '../../errors';
import { errorMessage } from './rdkafka';
import { timerDelay } from '../loop/timers';
import type { OAuthBearerToken, OAuthBearerTokenProvider } from '../../oauth';

export type { OAuthBearerToken, OAuthBearerTokenProvider };

/** The client surface the refresher needs (node-rdkafka's Client method). */
export interface OAuthBearerTarget {
  setOauthBearerToken(value: string): unknown;
}

/** Refresh at this fraction of the remaining lifetime (librdkafka's rule). */
export const REFRESH_FRACTION = 0.8;
/** Longest wait before retrying a failed refresh, in ms (librdkafka waits 10 s). */
export const RETRY_MS = 10_000;
/** Shortest wait between two refreshes, in ms: a provider handing out nearly expired tokens must not spin. */
export const MIN_REFRESH_MS = 1000;

/** Why a token the provider returned is unusable, or undefined when it is fine. */
export function tokenProblem(token: unknown, now: number): string | undefined {
  if (typeof token !== 'object' || token === null)
    return 'expected an object { value, lifetimeMs }';
  const t = token as { value?: unknown; lifetimeMs?: unknown; extensions?: unknown };
  if (typeof t.value !== 'string' || t.value.length === 0)
    return '`value` must be a non-empty string';
  // eslint-disable-next-line no-control-regex -- a SASL value (RFC 7628) allows no control characters
  if (/[\u0000-\u001f]/.test(t.value)) return '`value` must not contain control characters';
  if (typeof t.lifetimeMs !== 'number' || !Number.isFinite(t.lifetimeMs)) {
    return '`lifetimeMs` must be the expiry time in ms since the epoch';
  }
  if (t.lifetimeMs <= now) {
    return `the token expired already (lifetimeMs ${new Date(t.lifetimeMs).toISOString()} is not after now, ${new Date(now).toISOString()})`;
  }
  if (t.extensions !== undefined) {
    return 'SASL extensions are not supported: node-rdkafka cannot pass them to librdkafka';
  }
  return undefined;
}

export class OAuthBearerRefresher {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private expiresAt = 0;
  /** Tokens set so far (the first one included). */
  tokensSet = 0;
  /** Provider calls that failed or returned an unusable token. */
  failures = 0;

  constructor(
    private readonly provider: OAuthBearerTokenProvider,
    private readonly target: OAuthBearerTarget,
    private readonly logger: Logger,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Fetches and sets the first token; rejects with a {@link ConnectError} naming the provider's
   * failure (the client cannot authenticate without a token). Then keeps refreshing until `stop()`.
   */
  async start(): Promise<void> {
    try {
      await this.refresh();
    } catch (err) {
      throw new ConnectError(
        `Could not get an OAUTHBEARER token: the oauthBearerToken provider failed: ${errorMessage(err)}`,
        { cause: err, retriable: true },
      );
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Calls the provider (bounded by `timeoutMs`), checks and sets the token, schedules the next. */
  private async refresh(): Promise<void> {
    const token = await withTimeout(
      Promise.resolve().then(() => this.provider()),
      this.timeoutMs,
      `the oauthBearerToken provider did not answer within ${this.timeoutMs} ms`,
    );
    const now = Date.now();
    const problem = tokenProblem(token, now);
    if (problem) throw new Error(`unusable token: ${problem}`);
    if (this.stopped) return;
    this.target.setOauthBearerToken(token.value);
    this.tokensSet += 1;
    this.expiresAt = token.lifetimeMs;
    const inMs = Math.max(MIN_REFRESH_MS, Math.floor((token.lifetimeMs - now) * REFRESH_FRACTION));
    this.logger.debug(
      {
        principal: token.principal,
        expiresAt: new Date(token.lifetimeMs).toISOString(),
        nextRefreshInMs: inMs,
      },
      'OAUTHBEARER token set',
    );
    this.schedule(inMs);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refreshInBackground(), timerDelay(ms));
    this.timer.unref();
  }

  private async refreshInBackground(): Promise<void> {
    this.timer = undefined;
    try {
      await this.refresh();
    } catch (err) {
      if (this.stopped) return;
      this.failures += 1;
      const left = this.expiresAt - Date.now();
      const retryMs = Math.max(MIN_REFRESH_MS, Math.min(RETRY_MS, Math.floor(left / 2)));
      this.logger.error(
        {
          err,
          failures: this.failures,
          retryInMs: retryMs,
          currentTokenExpiresAt: new Date(this.expiresAt).toISOString(),
        },
        left > 0
          ? 'OAUTHBEARER token refresh failed: the current token stays in use until it expires, then the brokers refuse re-authentication and the consumer ends if that lasts connectTimeoutMs'
          : 'OAUTHBEARER token refresh failed and the current token has expired: the brokers refuse re-authentication; the consumer ends if that lasts connectTimeoutMs',
      );
      this.schedule(retryMs);
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), timerDelay(ms));
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The OAUTHBEARER tokens of one of the consumer's helper clients (the dead-letter producer, the
 * transactional producer): the consumer's provider, when it has one, keeps each native client it
 * connects supplied, exactly as for the consumer itself. Without a provider it does nothing.
 */
export class ClientOAuth {
  private refresher: OAuthBearerRefresher | undefined;

  constructor(
    private readonly provider: OAuthBearerTokenProvider | undefined,
    private readonly logger: Logger,
    private readonly timeoutMs: number,
  ) {}

  /** Sets the first token on `client` (before it connects) and keeps it fresh until `stop()`. */
  async before(client: unknown): Promise<void> {
    if (this.provider === undefined) return;
    const target = client as Partial<OAuthBearerTarget>;
    if (typeof target.setOauthBearerToken !== 'function') {
      throw new ConnectError(
        'Could not set an OAUTHBEARER token: the client has no setOauthBearerToken()',
      );
    }
    this.refresher?.stop();
    this.refresher = new OAuthBearerRefresher(
      this.provider,
      target as OAuthBearerTarget,
      this.logger,
      this.timeoutMs,
    );
    await this.refresher.start();
  }

  stop(): void {
    this.refresher?.stop();
    this.refresher = undefined;
  }
}
