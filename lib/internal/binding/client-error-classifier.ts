/**
 * What librdkafka tells the consumer outside of messages — consume() errors, client error events,
 * log lines — classified into verdicts. Pure: no I/O, no engine state; the engine applies each
 * verdict (an exhaustive switch) and is the only one to change its state.
 */
import type { KafkaClientError } from '../../errors';
import { Code, TERMINAL_CODES } from './rdkafka';

/** Codes meaning the cluster refused the client's credentials. */
export const AUTH_CODES: ReadonlySet<number> = new Set([
  Code.AUTHENTICATION,
  Code.SASL_AUTHENTICATION_FAILED,
]);

/**
 * librdkafka log facilities announcing that this member left or was dropped from the group:
 * max.poll.interval.ms exceeded, and the classic session timeout.
 */
const LOST_LOG_FACILITIES: ReadonlySet<string> = new Set(['MAXPOLL', 'SESSTMOUT']);

/**
 * librdkafka's warning (facility OFFSET) when an error forces an offset reset, e.g.
 * `orders [3]: offset reset (at offset 42 (leader epoch 0), broker 1) to offset BEGINNING (leader
 * epoch -1): fetch failed due to requested offset not available on the broker: Broker: Offset out of range`,
 * or `... to cached BEGINNING offset offset 120 (leader epoch -1): ...`.
 */
const OFFSET_RESET_LOG =
  /(\S+) \[(\d+)\]: offset reset \(at offset (\S+) \(leader epoch -?\d+\), broker -?\d+\) to (?:cached (\w+) offset )?offset (\S+) \(leader epoch -?\d+\): (.*)$/;

/** An offset reset parsed from librdkafka's OFFSET warning. */
export interface OffsetReset {
  readonly topic: string;
  readonly partition: number;
  /** The offset the consumer was at, when numeric. */
  readonly from: number | undefined;
  /** The offset it jumped to, when numeric (else see `logicalTo`). */
  readonly to: number | undefined;
  /** `BEGINNING`, `END`, … when the target is logical; `offset` when numeric. */
  readonly resetTo: string;
  /** The logical target to resolve through watermarks (`BEGINNING`, `END`), if any. */
  readonly logicalTo: string | undefined;
  readonly reason: string;
}

/** A librdkafka log line. */
export interface ClientLog {
  readonly severity: number;
  readonly fac: string;
  readonly message: string;
}

export type Verdict =
  /** This member was dropped from the group: the next revoke is a loss. */
  | { readonly kind: 'membership-lost'; readonly reason: string; readonly logMessage: string }
  /** The cluster refused the credentials. */
  | { readonly kind: 'authentication'; readonly err: KafkaClientError }
  /** An error that can never heal: the consumer ends. */
  | { readonly kind: 'fatal'; readonly err: KafkaClientError; readonly logMessage: string }
  /** Offset out of range with `auto.offset.reset=error`: librdkafka stops fetching the partition. */
  | { readonly kind: 'offset-out-of-range'; readonly err: KafkaClientError }
  /** A subscribed topic is missing or not readable. */
  | {
      readonly kind: 'topic-unavailable';
      readonly err: KafkaClientError;
      readonly reason: 'unknown' | 'not-authorized';
    }
  /** librdkafka retries by itself; reported, counted. */
  | { readonly kind: 'transient'; readonly err: KafkaClientError; readonly what: string }
  /** The error behind librdkafka's ERR__FATAL, named only in its FATAL log line. */
  | { readonly kind: 'fatal-cause'; readonly code: number | undefined; readonly log: ClientLog }
  /** Records were skipped or will be re-read. */
  | { readonly kind: 'offset-reset'; readonly reset: OffsetReset }
  /** Any other log line, at the level it maps to. */
  | {
      readonly kind: 'log';
      readonly level: 'error' | 'warn' | 'info' | 'debug';
      readonly log: ClientLog;
    };

/**
 * The companion binding's answer when it could not allocate a consumed batch's buffers: it freed
 * the batch's messages, and librdkafka's position is past them (fast-binding/README.md).
 */
const DROPPED_BATCH = /consumeBatch: out of memory/;

/** An error returned by consume(). */
export function classifyConsumeError(err: KafkaClientError): Verdict {
  const code = err.kafkaCode;
  if (DROPPED_BATCH.test(err.message)) {
    // Going on would fetch past the dropped messages and a commit would skip them for good: stop,
    // so that the group's next owner reads them from the last commit.
    return {
      kind: 'fatal',
      err,
      logMessage:
        'the binding dropped a consumed batch (out of memory): stopping, so that nothing is committed past it',
    };
  }
  if (code === Code.MAX_POLL_EXCEEDED) {
    return {
      kind: 'membership-lost',
      reason: 'max.poll.interval.ms exceeded',
      logMessage: 'max.poll.interval.ms exceeded: the assignment will be treated as lost',
    };
  }
  if (AUTH_CODES.has(code)) return { kind: 'authentication', err };
  if (TERMINAL_CODES.has(code) || err.fatal) {
    return { kind: 'fatal', err, logMessage: 'fatal consumer error' };
  }
  if (code === Code.AUTO_OFFSET_RESET) return { kind: 'offset-out-of-range', err };
  const unavailable = topicUnavailable(err);
  if (unavailable) return unavailable;
  return { kind: 'transient', err, what: 'consume error' };
}

/** An `event.error` of the client. */
export function classifyClientError(err: KafkaClientError): Verdict {
  const code = err.kafkaCode;
  if (
    code === Code.MAX_POLL_EXCEEDED ||
    code === Code.FENCED_MEMBER_EPOCH ||
    code === Code.UNKNOWN_MEMBER_ID
  ) {
    return {
      kind: 'membership-lost',
      reason: err.message,
      logMessage: 'group membership lost: the next revoke is treated as lost',
    };
  }
  if (AUTH_CODES.has(code)) return { kind: 'authentication', err };
  if (err.fatal || TERMINAL_CODES.has(code)) {
    return { kind: 'fatal', err, logMessage: 'fatal client error' };
  }
  // Transport errors, all brokers down, …: librdkafka reconnects by itself.
  return { kind: 'transient', err, what: 'client error (librdkafka retries)' };
}

function topicUnavailable(err: KafkaClientError): Verdict | undefined {
  const code = err.kafkaCode;
  if (code === Code.TOPIC_AUTHORIZATION_FAILED) {
    return { kind: 'topic-unavailable', err, reason: 'not-authorized' };
  }
  if (code === Code.UNKNOWN_TOPIC_OR_PART || code === Code.UNKNOWN_TOPIC) {
    return { kind: 'topic-unavailable', err, reason: 'unknown' };
  }
  return undefined;
}

/**
 * A librdkafka log line. `fatalCauseFromText` recovers the error behind a FATAL line (passed in,
 * so this module needs no error-table lookups of its own).
 */
export function classifyLog(
  log: ClientLog,
  fatalCauseFromText: (text: string) => number | undefined,
): Verdict {
  if (log.fac === 'FATAL') {
    return { kind: 'fatal-cause', code: fatalCauseFromText(log.message), log };
  }
  if (LOST_LOG_FACILITIES.has(log.fac)) {
    // consume(n) drops errors such as MAX_POLL_EXCEEDED when its batch also held messages;
    // librdkafka's log line about it still arrives.
    return {
      kind: 'membership-lost',
      reason: `${log.fac}: ${log.message}`,
      logMessage: 'group membership lost: the next revoke is treated as lost',
    };
  }
  if (log.fac === 'OFFSET' && log.severity <= 4) {
    const reset = parseOffsetReset(log.message);
    if (reset) return { kind: 'offset-reset', reset };
  }
  return { kind: 'log', level: levelOf(log.severity), log };
}

/** The pino level of a syslog severity. */
export function levelOf(severity: number): 'error' | 'warn' | 'info' | 'debug' {
  if (severity <= 2) return 'error';
  if (severity <= 4) return 'warn';
  if (severity <= 6) return 'info';
  return 'debug';
}

/** Parses librdkafka's OFFSET warning about a reset; undefined for any other OFFSET line. */
export function parseOffsetReset(message: string): OffsetReset | undefined {
  const m = OFFSET_RESET_LOG.exec(message);
  if (!m) return undefined;
  const [, topic = '', partitionText = '', fromText = '', cached, toText = '', reason = ''] = m;
  const from = /^-?\d+$/.test(fromText) ? Number(fromText) : undefined;
  const to = /^\d+$/.test(toText) ? Number(toText) : undefined;
  return {
    topic,
    partition: Number(partitionText),
    from,
    to,
    resetTo: cached ?? (to === undefined ? toText : 'offset'),
    logicalTo: to === undefined ? toText.toUpperCase() : undefined,
    reason,
  };
}

/** Exhaustiveness check for switches over discriminated unions. */
export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${JSON.stringify(value)}`);
}
