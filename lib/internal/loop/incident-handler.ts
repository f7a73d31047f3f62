/**
 * What the consumer does about librdkafka's incidents once binding/client-error-classifier.ts has classified them:
 * authentication refusals (fatal only once they last), fatal errors (named by the FATAL log line
 * that follows them), a contested static membership, missing or unreadable topics (one event per
 * topic), offset resets (what was skipped or will be re-read), and transient client errors.
 * It ends the consumer only through the shutdown (`fail`) and reports through `host.publish`.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { AuthenticationError, FencedInstanceError } from '../../errors';
import type { KafkaClientError } from '../../errors';
import type { ConsumerEvent } from '../../types';
import type { OffsetReset } from '../binding/client-error-classifier';
import type { ConsumerClient } from '../binding/consumer-client';
import { Code, toKafkaError } from '../binding/rdkafka';
import type { Shutdown } from './shutdown';
import type { Conditions } from './wait-conditions';

/** What the incident handling needs around it. */
export interface IncidentHost {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly client: ConsumerClient;
  /** `group.instance.id` when this consumer is a static member. */
  readonly staticInstanceId: string | undefined;
  /** Where the consumer is: refusals while connecting end the connect itself. */
  stage(): 'connecting' | 'running' | 'other';
  /** Last time the consumer made progress (messages fetched or a commit confirmed). */
  lastProgressAt(): number;
  /** Waiting on state changes (a FATAL log line waited for). */
  readonly conditions: Conditions;
  publish(event: ConsumerEvent): void;
  /** Ends the consumer with an error. */
  readonly shutdown: Shutdown;
  /** Whether the consumer is ending already. */
  failing(): boolean;
}

export class Incidents {
  /** librdkafka client errors seen since start (transient ones included). */
  clientErrors = 0;
  /** An authentication failure reported while connecting (its events arrive just before connect fails). */
  private connectRefusal: AuthenticationError | undefined;
  /** First authentication refusal since the last progress, while running. */
  private authErrorsSince: number | undefined;
  /** Topics reported unavailable (to warn once per topic, not once per poll). */
  private readonly unavailableTopics = new Set<string>();
  private topicCheckInFlight = false;
  /** The error behind librdkafka's ERR__FATAL, from its FATAL log line. */
  private fatalCause: number | undefined;
  private fatalPending = false;

  constructor(private readonly host: IncidentHost) {}

  /** Whether an authentication refusal was reported while connecting (not taken yet). */
  get refusedWhileConnecting(): boolean {
    return this.connectRefusal !== undefined;
  }

  /** The authentication refusal that explains a failed connect (then forgotten). */
  takeConnectRefusal(): AuthenticationError | undefined {
    const refusal = this.connectRefusal;
    this.connectRefusal = undefined;
    return refusal;
  }

  /** Partitions of these topics were assigned: they exist and are readable again. */
  topicsAvailable(topics: Iterable<string>): void {
    for (const topic of topics) this.unavailableTopics.delete(`unknown:${topic}`);
  }

  /** The FATAL log line named the error behind ERR__FATAL. */
  fatalCauseIs(code: number | undefined): void {
    if (this.fatalCause !== undefined || code === undefined) return;
    this.fatalCause = code;
    this.host.conditions.changed();
  }

  /**
   * Ends the consumer on a fatal error. librdkafka reports every fatal error as ERR__FATAL and
   * names the error behind it only in its FATAL log line, which arrives just after on another
   * path: wait for it (at most a second) so the consumer ends with the telling error.
   */
  fatal(err: KafkaClientError): void {
    if (this.host.failing() || this.fatalPending) return;
    this.fatalPending = true;
    void this.host.conditions
      .until(() => err.kafkaCode !== Code.FATAL || this.fatalCause !== undefined, Date.now() + 1000)
      .then(() => this.host.shutdown.fail(this.fatalError(err)));
  }

  /** A contested `group.instance.id` becomes a {@link FencedInstanceError}. */
  private fatalError(err: KafkaClientError): Error {
    const code = err.kafkaCode === Code.FATAL ? this.fatalCause : err.kafkaCode;
    if (code !== Code.FENCED_INSTANCE_ID && code !== Code.UNRELEASED_INSTANCE_ID) return err;
    const { groupId } = this.host.settings;
    const id = this.host.staticInstanceId ?? '';
    const failure = new FencedInstanceError(
      code === Code.UNRELEASED_INSTANCE_ID
        ? `group.instance.id "${id}" is still used by another member of group "${groupId}" (UNRELEASED_INSTANCE_ID): this consumer was refused; give every static member its own group.instance.id`
        : `Another consumer joined group "${groupId}" with group.instance.id "${id}" and fenced this one (FENCED_INSTANCE_ID); give every static member its own group.instance.id`,
      code,
      id,
      { cause: err },
    );
    this.host.logger.error(
      { err: failure, groupInstanceId: id },
      'static member fenced: closing the consumer',
    );
    return failure;
  }

  /**
   * A librdkafka log line while connecting: its "SASL authentication error" line is the refusal
   * when no error event names it (under load the connect has failed with only "broker transport
   * failure" while the log said why at once).
   */
  logged(log: { readonly severity: number; readonly message: string }): void {
    if (this.host.stage() !== 'connecting' || this.connectRefusal !== undefined) return;
    if (log.severity > 4 || !SASL_REFUSED.test(log.message)) return;
    // A connection lost or timed out during the login is librdkafka's own failure, not the
    // broker's answer: "SASL authentication error: SaslAuthenticateRequest failed: Local: Broker
    // transport failure" says nothing about the credentials.
    if (SASL_LOCAL_FAILURE.test(log.message)) return;
    this.authenticationRefused(
      toKafkaError({ code: Code.AUTHENTICATION, message: log.message }, 'authentication refused'),
    );
  }

  /**
   * librdkafka treats a refused login as transient and reconnects forever; wrong credentials never
   * heal, so the consumer ends with an {@link AuthenticationError} instead.
   */
  authenticationRefused(err: KafkaClientError): void {
    const { settings, logger } = this.host;
    const config = settings.globalConfig as Record<string, unknown>;
    const mechanism = config['sasl.mechanisms'] ?? config['sasl.mechanism'];
    const who = [
      `security.protocol=${String(config['security.protocol'] ?? 'plaintext')}`,
      mechanism ? `sasl.mechanisms=${String(mechanism)}` : undefined,
      config['sasl.username'] ? `sasl.username=${String(config['sasl.username'])}` : undefined,
    ]
      .filter(Boolean)
      .join(', ');
    const failure = new AuthenticationError(
      `Authentication failed against ${String(config['bootstrap.servers'])} (${who}): ${err.message}; check the credentials`,
      err.kafkaCode,
      { cause: err },
    );
    if (this.host.stage() === 'connecting') {
      // The failed connect ends the engine with it (see the engine's start).
      this.connectRefusal ??= failure;
      return;
    }
    // Once running, one refusal can be transient (a token refresh, one broker's hiccup): it only
    // ends the consumer when the refusals last `connectTimeoutMs` without any progress meanwhile.
    const now = Date.now();
    if (this.authErrorsSince === undefined || this.host.lastProgressAt() > this.authErrorsSince) {
      this.authErrorsSince = now;
    }
    if (now - this.authErrorsSince < settings.connectTimeoutMs) {
      this.transient(err, 'authentication refused (ends the consumer if it lasts)');
      return;
    }
    this.clientErrors += 1;
    logger.error(
      { err: failure, since: new Date(this.authErrorsSince).toISOString() },
      'authentication refused for longer than connectTimeoutMs: closing the consumer',
    );
    this.host.shutdown.fail(failure);
  }

  /**
   * A subscribed topic is missing or not readable. The binding's error does not say which topic,
   * so the cluster's metadata is compared with the subscription; one event per topic.
   */
  topicUnavailable(err: KafkaClientError, reason: 'unknown' | 'not-authorized'): void {
    if (this.topicCheckInFlight) return;
    this.topicCheckInFlight = true;
    const { logger } = this.host;
    void this.missingTopics()
      .then((missing) => {
        for (const topic of missing.length > 0 ? missing : [undefined]) {
          const key = `${reason}:${topic ?? '?'}`;
          if (this.unavailableTopics.has(key)) continue;
          this.unavailableTopics.add(key);
          if (reason === 'not-authorized') {
            logger.error(
              { err, topic },
              'not authorized to read a subscribed topic: nothing is consumed from it until the ACLs allow it',
            );
          } else {
            logger.warn(
              { err, topic },
              'a subscribed topic does not exist: nothing is consumed from it until it is created',
            );
          }
          this.host.publish({
            type: 'topic-unavailable',
            topic,
            reason,
            kafkaCode: err.kafkaCode,
            message: err.message,
            at: Date.now(),
          });
        }
      })
      .finally(() => {
        this.topicCheckInFlight = false;
      });
  }

  /** Subscribed topic names (not patterns) the cluster's metadata does not list. */
  private missingTopics(): Promise<string[]> {
    const { settings, client } = this.host;
    const names = settings.topics.filter((t) => !t.startsWith('^'));
    if (names.length === 0 || this.host.stage() !== 'running') return Promise.resolve([]);
    return new Promise((resolve) => {
      try {
        client.raw.getMetadata({ timeout: settings.commitTimeoutMs }, (err, md) => {
          if (err || !md) {
            resolve([]);
            return;
          }
          resolve(
            names.filter((n) => !md.topics.some((t) => t.name === n && t.partitions.length > 0)),
          );
        });
      } catch {
        resolve([]);
      }
    });
  }

  transient(err: KafkaClientError, what: string): void {
    this.clientErrors += 1;
    this.host.logger.warn({ err, code: err.kafkaCode, count: this.clientErrors }, what);
    this.host.publish({
      type: 'client-error',
      kafkaCode: err.kafkaCode,
      message: err.message,
      count: this.clientErrors,
      at: Date.now(),
    });
  }

  /**
   * librdkafka's warning on an offset reset caused by an error (offset out of range: the committed
   * offset fell out of retention, or lies past the end): records were skipped, or will be re-read.
   */
  offsetReset(reset: OffsetReset): void {
    const { topic, partition, from, resetTo, reason } = reset;
    const report = (to: number | undefined): void => {
      this.host.logger.warn(
        { topic, partition, from, to, resetTo, reason },
        to !== undefined && from !== undefined && to > from
          ? `offset reset: records ${from}..${to - 1} were skipped (never processed by this group)`
          : 'offset reset: the consumer jumped to a new position; records may be re-read or skipped',
      );
      this.host.publish({
        type: 'offset-reset',
        topic,
        partition,
        from,
        to,
        resetTo: resetTo.toLowerCase().replace('beginning', 'earliest').replace('end', 'latest'),
        reason,
        at: Date.now(),
      });
    };
    const logical = reset.logicalTo;
    if (logical === undefined || this.host.stage() !== 'running') {
      report(reset.to);
      return;
    }
    // Reset to a logical offset: ask the cluster where that is now.
    void this.host.client.watermarks(topic, partition, this.host.settings.commitTimeoutMs).then(
      (w) => report(logical === 'BEGINNING' ? w.low : logical === 'END' ? w.high : undefined),
      () => report(undefined),
    );
  }
}

/** librdkafka's log line for a login the broker refused (SASL). */
const SASL_REFUSED =
  /SASL authentication error|SASL .*authentication failed|Authentication failed during authentication/i;
/** Its line for a login librdkafka itself gave up (the connection lost or timed out): no refusal. */
const SASL_LOCAL_FAILURE = /SASL authentication error: \S+ failed: Local: /i;
