/** OAUTHBEARER tokens: what the `oauthBearerToken` option's provider returns. */

/** A token as the provider returns it. */
export interface OAuthBearerToken {
  /** The token sent to the broker, typically a JWS compact serialization (`header.claims.signature`). */
  readonly value: string;
  /** When the token expires, in milliseconds since the epoch (the JWT's `exp` × 1000). */
  readonly lifetimeMs: number;
  /**
   * The Kafka principal the token stands for. Only logged: librdkafka does not send it (the broker
   * takes the principal from the token), and node-rdkafka cannot pass it on.
   */
  readonly principal?: string;
}

/** The user's token source; called before connecting and again before each token expires. */
export type OAuthBearerTokenProvider = () => OAuthBearerToken | Promise<OAuthBearerToken>;
