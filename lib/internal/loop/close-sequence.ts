/**
 * How a running consumer closes, as a short sequence: release (leave the group after every revoke
 * in flight) → settle commits → stop the loop → wait for native calls → disconnect → end what no
 * revoke released. Each step is bounded by the close deadline ({@link Shutdown}), which a later
 * `close()` may bring forward.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { ConsumerClient } from '../binding/consumer-client';
import type { OffsetCommits } from '../commit/committer';
import type { CompletedStore } from '../commit/completed-store';
import type { PartitionLifecycle } from '../partition/lifecycle';
import type { Assignments } from '../rebalance/assignments';
import { leaveGroup, settleCommits } from '../rebalance/leave-group';
import type { RebalanceCoordinator } from '../rebalance/rebalance-coordinator';
import type { Seeks } from '../rebalance/seeks';
import type { Shutdown } from './shutdown';
import { NATIVE_CALL_MS } from './timers';
import type { Conditions } from './wait-conditions';
import { settlesWithin } from './wait-conditions';

/** The running consumer's parts a close goes through. */
export interface ClosingParts {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly client: ConsumerClient;
  readonly shutdown: Shutdown;
  readonly conditions: Conditions;
  readonly assignments: Assignments;
  readonly lifecycle: PartitionLifecycle;
  readonly rebalance: RebalanceCoordinator;
  readonly seeks: Seeks;
  readonly commits: OffsetCommits;
  readonly store: CompletedStore | undefined;
  readonly staticInstanceId: string | undefined;
  /** The consume loop (it stops once the shutdown is disconnecting). */
  readonly loop: Promise<void> | undefined;
}

export async function closeRunning(parts: ClosingParts): Promise<void> {
  const { logger, client, shutdown, lifecycle, commits } = parts;
  logger.info({ partitions: parts.assignments.size }, 'closing');
  // Partitions must be released by releaseBy(); what is left is for unsubscribing and
  // disconnecting.
  await leaveGroup(parts, () => shutdown.releaseBy());
  await settleCommits(parts, () => shutdown.deadline);
  shutdown.disconnecting();
  await parts.loop;
  // A transactional call's worker, or a broker read's (committed offsets read back, start
  // positions), may still use the native consumer: disconnected under it, the binding crashes.
  // Each such call lasts at most a second (NATIVE_CALL_MS) when a close is due.
  const idle = Promise.all([commits.clientIdle(), client.readsSettled()]);
  const idleInTime = await settlesWithin(
    idle,
    Math.max(shutdown.deadline - Date.now(), 0) + NATIVE_CALL_MS,
  );
  parts.seeks.rejectAll();
  lifecycle.fenceAll('consumer closed');
  parts.rebalance.beforeDisconnect();
  if (idleInTime) {
    const ms = Math.max(shutdown.deadline - Date.now(), 1000);
    if (!(await settlesWithin(client.disconnect(), ms)))
      logger.warn({ ms }, 'disconnect did not finish in time');
  } else {
    // A sendOffsetsToTransaction waiting on an unreachable coordinator (librdkafka ends it when
    // its request times out), or a broker read with a long timeout: disconnect once it returns.
    logger.warn(
      'a native call still uses the consumer at the close deadline (an offset send to an unreachable transaction coordinator, or a broker read): the consumer is disconnected once it returns',
    );
    void idle.then(() => client.disconnect()).catch(() => undefined);
  }
  await parts.store?.close().catch(() => undefined);
  // Partitions no revoke released (librdkafka's close fired none for them) still end in events.
  lifecycle.closeOut('the consumer closed before the partition was released (close deadline)');
}
