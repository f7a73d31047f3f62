/**
 * How the engine's parts are built and wired: once at construction (the client and the units that
 * do not depend on where offsets go), and once at start (the units that work with the commit
 * strategy, fixed from then on). Every part gets the objects it works with; what it needs from
 * the engine itself comes through {@link EngineSide}, one named interface.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { AuthenticationError } from '../../errors';
import type { KafkaClientError } from '../../errors';
import type { ConsumerEvent, RebalanceEvent } from '../../types';
import type { Subject } from 'rxjs';
import { ConsumerClient } from '../binding/consumer-client';
import type { Assignment, ConsumerFactory, LibrdKafkaError } from '../binding/rdkafka';
import { Committer } from '../commit/committer';
import type { OffsetCommits } from '../commit/committer';
import { KafkaCompletedStore } from '../commit/completed-store';
import type { CompletedStore } from '../commit/completed-store';
import type { EngineObserver } from '../observe/engine-observer';
import { PartitionLoggers } from '../observe/partition-loggers';
import { PartitionLifecycle } from '../partition/lifecycle';
import type { PartitionControl } from '../partition/partition-control';
import { AssignCalls } from '../rebalance/assign-calls';
import { Assignments } from '../rebalance/assignments';
import { RebalanceCoordinator } from '../rebalance/rebalance-coordinator';
import { RevokeHook } from '../rebalance/revoke-hook';
import { Seeks } from '../rebalance/seeks';
import { StartPositions } from '../rebalance/start-positions';
import { connectionSettings } from '../settings/librdkafka-settings';
import { ConsumeCadence } from './consume-cadence';
import { Dispatcher } from './dispatch';
import { FETCH_WAKE_TIMEOUT_MS, FetchWaker } from './fetch-waker';
import { FlowControl } from './flow-control';
import { Incidents } from './incident-handler';
import { Positions } from './positions';
import { Shutdown } from './shutdown';
import { Conditions } from './wait-conditions';

/** What the parts need from the engine that owns them. */
export interface EngineSide {
  /** Where the engine is in its life. */
  stateKind(): 'idle' | 'connecting' | 'running' | 'closing' | 'closed';
  /** Why the consumer ends, once it ends with an error. */
  failure(): Error | undefined;
  /** Ends the consumer with an error. */
  failWith(err: Error): void;
  /** A consume call failed (classified and applied by the engine). */
  consumeError(err: KafkaClientError): void;
  /** librdkafka's rebalance callback. */
  rebalance(err: LibrdKafkaError | undefined, assignment: Assignment[]): void;
  /** A commit was confirmed: the consumer made progress. */
  progressed(): void;
  lastProgressAt(): number;
  observer(): EngineObserver;
  publish(event: ConsumerEvent): void;
}

/** The parts built at construction. */
export interface BaseParts {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly client: ConsumerClient;
  readonly conditions: Conditions;
  readonly shutdown: Shutdown;
  readonly loggers: PartitionLoggers;
  readonly assignments: Assignments;
  readonly store: CompletedStore | undefined;
  readonly cadence: ConsumeCadence;
  readonly startPositions: StartPositions;
  /** The group committer: the commit strategy unless processTransactional() chose its own. */
  readonly groupCommits: Committer;
  readonly flow: FlowControl;
  readonly fetchWaker: FetchWaker;
  readonly calls: AssignCalls;
  readonly dispatcher: Dispatcher;
  readonly positions: Positions;
  readonly incidents: Incidents;
  readonly revokeHook: RevokeHook;
  /** `group.instance.id` when this consumer is a static member. */
  readonly staticInstanceId: string | undefined;
}

/** The units that work with the commit strategy, assembled when the consumer starts. */
export interface RebalanceUnits {
  readonly commits: OffsetCommits;
  readonly lifecycle: PartitionLifecycle;
  readonly rebalance: RebalanceCoordinator;
  readonly seeks: Seeks;
}

export function buildBase(
  settings: ConsumerSettings,
  logger: Logger,
  factory: ConsumerFactory | undefined,
  storeFactory: ((settings: ConsumerSettings) => CompletedStore) | undefined,
  engine: EngineSide,
): BaseParts {
  const id = (settings.globalConfig as Record<string, unknown>)['group.instance.id'];
  const staticInstanceId = typeof id === 'string' && id !== '' ? id : undefined;
  const memory = settings.rememberCompleted;
  const store =
    memory === undefined
      ? undefined
      : (storeFactory?.(settings) ??
        new KafkaCompletedStore(
          {
            topic: memory.topic,
            group: settings.groupId,
            maxRuns: memory.maxRuns,
            connection: connectionSettings(settings.globalConfig as Record<string, unknown>),
            timeoutMs: settings.commitTimeoutMs,
            binding: settings.binding,
          },
          logger.child({ component: 'completed-offsets' }),
        ));
  const conditions = new Conditions();
  const shutdown = new Shutdown(conditions, (err) => engine.failWith(err));
  const loggers = new PartitionLoggers(logger);
  const assignments = new Assignments();
  const client = new ConsumerClient(
    settings,
    logger,
    (err, assignment) => engine.rebalance(err, assignment),
    factory,
    (err) => engine.consumeError(err),
  );
  client.onAnswered = () => conditions.changed();
  const startPositions = new StartPositions(client, settings, logger, store);
  const groupCommits = new Committer(client, settings, logger, store, {
    conditions,
    loggers,
    progressed: () => engine.progressed(),
    hopeless: () => engine.failure() instanceof AuthenticationError,
    observer: () => engine.observer(),
  });
  const flow: FlowControl = new FlowControl(client, settings, logger, {
    assignments,
    shutdown,
    loggers,
    // The fetch waker asks flow control what is fetched: it is built just below.
    fetchers: { resumed: (tps) => fetchWaker.resumed(tps) },
    running: () => engine.stateKind() === 'running',
  });
  const fetchWaker: FetchWaker = new FetchWaker({
    client,
    logger,
    canRequest: () => shutdown.stage === 'open',
    fetching: () => flow.fetching(),
    held: () => assignments.controls().map((c) => ({ topic: c.topic, partition: c.partition })),
    timeoutMs: Math.min(settings.commitTimeoutMs, FETCH_WAKE_TIMEOUT_MS),
  });
  const incidents = new Incidents({
    settings,
    logger,
    client,
    staticInstanceId,
    stage: () => {
      const kind = engine.stateKind();
      return kind === 'connecting' || kind === 'running' ? kind : 'other';
    },
    lastProgressAt: () => engine.lastProgressAt(),
    conditions,
    publish: (event) => engine.publish(event),
    shutdown,
    failing: () => engine.failure() !== undefined,
  });
  return {
    settings,
    logger,
    client,
    conditions,
    shutdown,
    loggers,
    assignments,
    store,
    cadence: new ConsumeCadence(settings.consumeBatchSize, settings.consumeTimeoutMs),
    startPositions,
    groupCommits,
    flow,
    fetchWaker,
    calls: new AssignCalls(client, assignments, logger, fetchWaker),
    dispatcher: new Dispatcher(assignments, flow, logger, loggers),
    positions: new Positions(client, assignments, flow),
    incidents,
    revokeHook: new RevokeHook(settings.onRevoke, logger, (event) => engine.publish(event)),
    staticInstanceId,
  };
}

/**
 * The units that work with the commit strategy, once it is known: the partition lifecycle (its
 * events to `rebalances`, its new streams to `streams`), the rebalance coordinator and seeks.
 */
export function assembleUnits(
  base: BaseParts,
  commits: OffsetCommits,
  rebalances: Subject<RebalanceEvent>,
  streams: Subject<PartitionControl>,
): RebalanceUnits {
  const { settings, logger, client, assignments, conditions, shutdown, staticInstanceId } = base;
  const lifecycle = new PartitionLifecycle({
    logger,
    assignments,
    flow: base.flow,
    calls: base.calls,
    commits,
    conditions,
    events: rebalances,
    streams,
    staticInstanceId,
  });
  const seeks = new Seeks({
    client,
    assignments,
    startPositions: base.startPositions,
    lifecycle,
    shutdown,
    conditions,
    loggers: base.loggers,
  });
  const rebalance = new RebalanceCoordinator({
    settings,
    logger,
    client,
    calls: base.calls,
    lifecycle,
    assignments,
    startPositions: base.startPositions,
    commits,
    conditions,
    shutdown,
    staticInstanceId,
    topics: base.incidents,
    revokeHook: base.revokeHook,
  });
  return { commits, lifecycle, rebalance, seeks };
}
