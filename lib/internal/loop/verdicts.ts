/**
 * What librdkafka's reports do: each verdict of binding/client-error-classifier.ts applied in one
 * switch — the only place librdkafka's consume errors, client errors and log lines act.
 */
import type { Logger } from '../../logger';
import { assertNever, levelOf } from '../binding/client-error-classifier';
import type { Verdict } from '../binding/client-error-classifier';
import type { Incidents } from './incident-handler';
import type { Shutdown } from './shutdown';

/** What verdicts act on. */
export interface VerdictTargets {
  readonly logger: Logger;
  readonly incidents: Incidents;
  /** Told when librdkafka says the member was dropped (the next revoke is then a loss). */
  readonly membership: { suspect(reason: string): void } | undefined;
  readonly shutdown: Shutdown;
}

export function applyVerdict(
  verdict: Verdict,
  context: Record<string, unknown>,
  { logger, incidents, membership, shutdown }: VerdictTargets,
): void {
  switch (verdict.kind) {
    case 'membership-lost':
      membership?.suspect(verdict.reason);
      logger.warn(
        'fac' in context ? { ...context, librdkafka: verdict.reason } : context,
        verdict.logMessage,
      );
      return;
    case 'authentication':
      incidents.authenticationRefused(verdict.err);
      return;
    case 'fatal':
      logger.error({ ...context, code: verdict.err.kafkaCode }, verdict.logMessage);
      incidents.fatal(verdict.err);
      return;
    case 'offset-out-of-range':
      logger.error(
        context,
        'offset out of range and auto.offset.reset=error: stopping (the partition would not be fetched again)',
      );
      shutdown.fail(verdict.err);
      return;
    case 'topic-unavailable':
      incidents.topicUnavailable(verdict.err, verdict.reason);
      return;
    case 'transient':
      incidents.transient(verdict.err, verdict.what);
      return;
    case 'fatal-cause':
      incidents.fatalCauseIs(verdict.code);
      logger[levelOf(verdict.log.severity)](context, verdict.log.message);
      return;
    case 'offset-reset':
      incidents.offsetReset(verdict.reset);
      return;
    case 'log':
      logger[verdict.level](context, verdict.log.message);
      incidents.logged(verdict.log);
      return;
    default:
      assertNever(verdict);
  }
}
