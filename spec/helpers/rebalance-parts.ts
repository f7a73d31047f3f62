import type { Logger } from 'pino';
import type { ConsumerSettings } from '../../lib/config';
import type { ConsumerEvent, RebalanceEvent } from '../../lib';
import type { ConsumerClient } from '../../lib/internal/binding/consumer-client';
import { Committer } from '../../lib/internal/commit/committer';
import { FlowControl } from '../../lib/internal/loop/flow-control';
import { Shutdown } from '../../lib/internal/loop/shutdown';
import type { Stage } from '../../lib/internal/loop/shutdown';
import { Conditions } from '../../lib/internal/loop/wait-conditions';
import { NO_OBSERVER } from '../../lib/internal/observe/engine-observer';
import { PartitionLoggers } from '../../lib/internal/observe/partition-loggers';
import { PartitionLifecycle } from '../../lib/internal/partition/lifecycle';
import type { PartitionControl } from '../../lib/internal/partition/partition-control';
import { AssignCalls } from '../../lib/internal/rebalance/assign-calls';
import { Assignments } from '../../lib/internal/rebalance/assignments';
import { RevokeHook } from '../../lib/internal/rebalance/revoke-hook';

/**
 * The consumer's rebalance parts, wired as the engine wires them, over a ConsumerClient (over the
 * fake): conditions, assignments, committer, flow control, the binding's assign calls, the
 * partition lifecycle and the shutdown clock. What they emit and hand over is recorded.
 */
export function rebalanceParts(
  {
    client,
    settings,
    logger,
  }: { client: ConsumerClient; settings: ConsumerSettings; logger: Logger },
  hooks: {
    /** Before each unassign call the lifecycle or the coordinator makes. */
    onUnassign?: () => void;
    /** As each rebalance event is emitted. */
    onEvent?: (event: RebalanceEvent) => void;
    /** When librdkafka's fetchers are woken after an incremental (un)assign. */
    onWake?: () => void;
  } = {},
) {
  const conditions = new Conditions();
  client.onAnswered = () => conditions.changed();
  const assignments = new Assignments();
  const failures: Error[] = [];
  const shutdown = new Shutdown(conditions, (err) => failures.push(err));
  const loggers = new PartitionLoggers(logger);
  const committer = new Committer(client, settings, logger, undefined, {
    conditions,
    loggers,
    progressed: () => undefined,
    hopeless: () => false,
    observer: () => NO_OBSERVER,
  });
  const flow = new FlowControl(client, settings, logger, {
    assignments,
    shutdown,
    loggers,
    fetchers: { resumed: () => undefined },
    running: () => shutdown.stage === 'open',
  });
  const calls = new AssignCalls(client, assignments, logger, {
    wake: () => hooks.onWake?.(),
  });
  const unassign = calls.unassign.bind(calls);
  calls.unassign = (...args) => {
    hooks.onUnassign?.();
    unassign(...args);
  };
  const events: RebalanceEvent[] = [];
  const hookEvents: ConsumerEvent[] = [];
  const started: PartitionControl[] = [];
  const lifecycle = new PartitionLifecycle({
    logger,
    assignments,
    flow,
    calls,
    commits: committer,
    conditions,
    events: {
      next: (e) => {
        hooks.onEvent?.(e);
        events.push(e);
      },
    },
    streams: { next: (c) => started.push(c) },
    staticInstanceId: undefined,
  });
  return {
    conditions,
    assignments,
    failures,
    shutdown,
    committer,
    flow,
    calls,
    lifecycle,
    events,
    started,
    loggers,
    /** No `onRevoke` unless the settings have one; its failures are recorded. */
    revokeHook: new RevokeHook(settings.onRevoke, logger, (e) => hookEvents.push(e)),
    hookEvents,
    /** Moves the shutdown clock to `stage` (forward only, as the engine does). */
    setStage: (stage: Stage): void => {
      if (stage === 'closing' && shutdown.stage === 'open') shutdown.begin(Date.now(), 600_000);
      if (stage === 'disconnecting') shutdown.disconnecting();
    },
  };
}
