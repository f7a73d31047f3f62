/**
 * `consumer.health()`: an answer a liveness or readiness probe can use. See docs/observability.md.
 */
import type { BindingInfo } from './binding';
import type { StalledHandler } from './metrics';

/** The individual checks of {@link ConsumerHealth}; each true when fine. */
export interface HealthChecks {
  /** The consumer is running and connected to the cluster (at least one broker up, per librdkafka's statistics when available). */
  readonly connected: boolean;
  /**
   * A member of the group: it owns partitions, a rebalance is in progress, librdkafka reports the
   * group joined (even with no partitions: more members than partitions), or it is legitimately
   * still waiting for its first assignment (less than `max.poll.interval.ms` since it subscribed or
   * last released its partitions). False once the member was dropped from the group
   * (max.poll.interval.ms exceeded, session timeout, fenced) until it is assigned again.
   */
  readonly member: boolean;
  /** The consume loop returned from librdkafka within `maxPollAgeMs`. */
  readonly pollingRecently: boolean;
  /** No handler has been running longer than `stallThresholdMs`. */
  readonly noStalledPartitions: boolean;
}

/** Why the checks are what they are. */
export interface HealthDetails {
  /** The consumer's lifecycle state. */
  readonly state: 'idle' | 'connecting' | 'running' | 'closing' | 'closed';
  /** Partitions owned now. */
  readonly assignedPartitions: number;
  /** ms since the consume loop last returned (undefined before the first return). */
  readonly lastPollAgeMs: number | undefined;
  /** The bound `pollingRecently` used, in ms. */
  readonly maxPollAgeMs: number;
  /** librdkafka's consumer group state (`cgrp.state`) from its last statistics report. */
  readonly groupState: string | undefined;
  /** librdkafka's join state (`cgrp.join_state`) from its last statistics report. */
  readonly joinState: string | undefined;
  /** Brokers up / known, from librdkafka's last statistics report. */
  readonly brokersUp: number | undefined;
  /** The reason the member was dropped from the group, while `member` is false for it. */
  readonly membershipLost: string | undefined;
  /** Handlers running longer than `stallThresholdMs`. */
  readonly stalledHandlers: readonly StalledHandler[];
  /** One sentence per failing check. */
  readonly reasons: readonly string[];
  /** The binding the consumer runs on (the `binding` option), and whether it converts batches. */
  readonly binding: BindingInfo;
}

/** The answer of `consumer.health()`. */
export interface ConsumerHealth {
  /** Every check passed. */
  readonly healthy: boolean;
  readonly checks: HealthChecks;
  readonly details: HealthDetails;
}

/** Options of `consumer.health()`. */
export interface HealthOptions {
  /**
   * Longest acceptable time since the consume loop last returned, in ms.
   * @default min(30000, max.poll.interval.ms / 2)
   */
  maxPollAgeMs?: number;
}

/** The facts `health()` decides from. @internal */
export interface HealthInputs {
  readonly now: number;
  readonly state: HealthDetails['state'];
  readonly clientConnected: boolean;
  readonly assignedPartitions: number;
  readonly rebalancing: boolean;
  /** When the consumer subscribed or last released all its partitions (ms since the epoch). */
  readonly waitingSince: number;
  readonly maxPollIntervalMs: number;
  readonly lastPollAt: number;
  readonly maxPollAgeMs: number;
  readonly membershipLost: string | undefined;
  /** The last statistics report, if fresh enough to trust. */
  readonly stats:
    | {
        readonly groupState: string | undefined;
        readonly joinState: string | undefined;
        readonly brokersUp: number;
        readonly brokers: number;
      }
    | undefined;
  readonly stalledHandlers: readonly StalledHandler[];
  readonly stallThresholdMs: number;
  readonly binding: BindingInfo;
}

/** Decides the health checks from the inputs. Pure. @internal */
export function evaluateHealth(i: HealthInputs): ConsumerHealth {
  const reasons: string[] = [];
  const running = i.state === 'running';
  let connected = running && i.clientConnected;
  if (!running) reasons.push(`the consumer is ${i.state}, not running`);
  else if (!i.clientConnected) reasons.push('the client is not connected');
  if (connected && i.stats !== undefined && i.stats.brokers > 0 && i.stats.brokersUp === 0) {
    connected = false;
    reasons.push('librdkafka reports no broker connection up');
  }

  let member = false;
  if (running) {
    const joined = i.stats?.groupState === 'up' && i.stats.joinState === 'steady';
    const waitingMs = i.now - i.waitingSince;
    if (i.membershipLost !== undefined && !i.rebalancing) {
      reasons.push(`dropped from the group: ${i.membershipLost}`);
    } else if (i.assignedPartitions > 0 || i.rebalancing || joined) {
      member = true;
    } else if (waitingMs < i.maxPollIntervalMs) {
      member = true; // joining: the broker may take up to the rebalance timeout
    } else {
      reasons.push(
        `no partitions and no rebalance for ${waitingMs} ms (max.poll.interval.ms ${i.maxPollIntervalMs})` +
          (i.stats ? `; librdkafka group state ${i.stats.groupState}/${i.stats.joinState}` : ''),
      );
    }
  }

  const lastPollAgeMs = i.lastPollAt > 0 ? i.now - i.lastPollAt : undefined;
  const pollingRecently = running && lastPollAgeMs !== undefined && lastPollAgeMs <= i.maxPollAgeMs;
  if (running && !pollingRecently) {
    reasons.push(
      lastPollAgeMs === undefined
        ? 'the consume loop has not returned yet'
        : `the consume loop last returned ${lastPollAgeMs} ms ago (limit ${i.maxPollAgeMs} ms): the event loop or the libuv thread pool may be blocked`,
    );
  }

  const noStalledPartitions = i.stalledHandlers.length === 0;
  if (!noStalledPartitions) {
    const h = i.stalledHandlers[0]!;
    reasons.push(
      `${i.stalledHandlers.length} handler(s) running longer than ${i.stallThresholdMs} ms, e.g. ${h.topic}[${h.partition}]@${h.offset} for ${h.elapsedMs} ms`,
    );
  }

  const checks: HealthChecks = { connected, member, pollingRecently, noStalledPartitions };
  return {
    healthy: connected && member && pollingRecently && noStalledPartitions,
    checks,
    details: {
      state: i.state,
      assignedPartitions: i.assignedPartitions,
      lastPollAgeMs,
      maxPollAgeMs: i.maxPollAgeMs,
      groupState: i.stats?.groupState,
      joinState: i.stats?.joinState,
      brokersUp: i.stats?.brokersUp,
      membershipLost: member ? undefined : i.membershipLost,
      stalledHandlers: i.stalledHandlers,
      reasons,
      binding: i.binding,
    },
  };
}
