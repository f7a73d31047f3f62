/**
 * The consumer engine: the single owner of the node-rdkafka client and of the consumer's
 * lifecycle. It runs the consume loop (one `consume(n)` in flight, seeks applied between two
 * calls), dispatches each batch to the partition streams, and closes as a short sequence of calls
 * into the units around it: the rebalance coordinator (assign, revoke, lost), the committer,
 * flow control, seeks and incident handling. See docs/internals.md.
 */
import { Subject } from 'rxjs';
import type { Logger } from 'pino';
import type { ConsumerSettings } from '../../config';
import { AuthenticationError } from '../../errors';
import type { FetchWakeMetrics } from '../../metrics';
import type { ConsumerEvent, StartPosition, RebalanceEvent, TopicPartition } from '../../types';
import { Assignments } from '../rebalance/assignments';
import { ConsumeCadence } from './consume-cadence';
import { FlowControl } from './flow-control';
import { Committer } from '../commit/committer';
import type { OffsetCommits } from '../commit/committer';
import { StartPositions } from '../rebalance/start-positions';
import {
  assertNever,
  classifyClientError,
  classifyConsumeError,
  classifyLog,
  levelOf,
} from '../binding/client-error-classifier';
import type { ClientLog, Verdict } from '../binding/client-error-classifier';
import { Conditions, settlesWithin } from './wait-conditions';
import { NATIVE_CALL_MS } from './timers';
import { ConsumerClient } from '../binding/consumer-client';
import { NO_OBSERVER } from '../observe/engine-observer';
import type { EngineObserver } from '../observe/engine-observer';
import { FETCH_WAKE_TIMEOUT_MS, FetchWaker } from './fetch-waker';
import { Incidents } from './incident-handler';
import { toKafkaMessage } from '../binding/message-conversion';
import type { PartitionControl } from '../partition/partition-control';
import { PartitionLifecycle } from '../partition/lifecycle';
import { PartitionLoggers } from '../observe/partition-loggers';
import type { FailureCounters, ProcessorHost } from '../process/processor';
import { AssignCalls } from '../rebalance/assign-calls';
import { RebalanceCoordinator } from '../rebalance/rebalance-coordinator';
import { Seeks } from '../rebalance/seeks';
import { leaveGroup, settleCommits } from '../rebalance/leave-group';
import type { LeavingParts } from '../rebalance/leave-group';
import { Shutdown } from './shutdown';
import type { Stage } from './shutdown';
import { KafkaCompletedStore } from '../commit/completed-store';
import type { CompletedStore } from '../commit/completed-store';
import { connectionSettings } from '../settings/librdkafka-settings';
import type { ConsumerFactory, LibrdKafkaError, Message } from '../binding/rdkafka';
import {
  defaultConsumerFactory,
  errorMessage,
  fatalCauseFromText,
  list,
  toKafkaError,
  tpKey,
} from '../binding/rdkafka';

/**
 * The engine's lifecycle; each state carries what is true only in it. While `closing`, the
 * {@link Shutdown} says how far the close got (`closing`: the loop still polls, so revokes and
 * commits are served; `disconnecting`: the loop stopped, only unassign works,
 * docs/binding-behaviours.md, "Closing") and by when each step must be done.
 */
export type EngineState =
  | { readonly kind: 'idle' }
  | { readonly kind: 'connecting' }
  | { readonly kind: 'running'; readonly since: number; readonly loop: Promise<void> }
  | {
      readonly kind: 'closing';
      readonly since: number;
      /** Why the consumer ends, when it ends with an error. */
      failure: Error | undefined;
      readonly loop: Promise<void> | undefined;
      readonly runningSince: number;
    }
  | { readonly kind: 'closed'; readonly failure: Error | undefined };

/** Longest time between two position lookups while consume calls return full batches (notePositions). */
const POSITION_INTERVAL_MS = 100;

export class ConsumerEngine implements ProcessorHost {
  /** Every rebalance phase, in order. */
  readonly rebalances = new Subject<RebalanceEvent>();
  /** Failure-policy outcomes, offset resets, unavailable topics, client errors. */
  readonly events = new Subject<ConsumerEvent>();
  /** Failure-policy outcomes since start (the processor counts them). */
  readonly counters: FailureCounters = { retries: 0, skipped: 0, deadLettered: 0, failed: 0 };
  /** One control per assigned partition per assignment; completes (or errors) when the engine ends. */
  readonly partitionStreams = new Subject<PartitionControl>();
  readonly client: ConsumerClient;
  /** Time of the last completed consume call (ms since the epoch). */
  lastPollAt = 0;
  /** The `lastPollAt` of the consume call after which positions were last asked (notePositions). */
  private positionsNotedAt = 0;
  /** Messages that arrived for partitions not (or no longer) assigned and were dropped. */
  lateMessagesDropped = 0;
  /** Receives metrics hooks (see engine-observer.ts). */
  observer: EngineObserver = NO_OBSERVER;

  private state: EngineState = { kind: 'idle' };
  /** The answers to start() and close() (both idempotent). */
  private startPromise: Promise<void> | undefined;
  private closePromise: Promise<void> | undefined;
  /** A failure before close() began (close picks it up). */
  private earlyFailure: Error | undefined;
  /** Last time the consumer made progress: messages fetched or a commit confirmed. */
  private lastProgressAt = 0;
  private readonly assignments = new Assignments();
  private readonly conditions = new Conditions();
  private readonly cadence: ConsumeCadence;
  private readonly store: CompletedStore | undefined;
  private readonly startPositions: StartPositions;
  private readonly committer: Committer;
  private readonly flow: FlowControl;
  private readonly seeks: Seeks;
  private readonly calls: AssignCalls;
  private readonly partitionLife: PartitionLifecycle;
  private readonly rebalance: RebalanceCoordinator;
  private readonly incidents: Incidents;
  private readonly fetchWaker: FetchWaker;
  private readonly shutdown: Shutdown;
  private readonly loggers: PartitionLoggers;
  /** `group.instance.id` when this consumer is a static member. */
  private readonly staticInstanceId: string | undefined;

  constructor(
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    factory: ConsumerFactory = defaultConsumerFactory,
    storeFactory?: (settings: ConsumerSettings) => CompletedStore,
  ) {
    const id = (settings.globalConfig as Record<string, unknown>)['group.instance.id'];
    this.staticInstanceId = typeof id === 'string' && id !== '' ? id : undefined;
    const memory = settings.rememberCompleted;
    if (memory !== undefined) {
      this.store =
        storeFactory?.(settings) ??
        new KafkaCompletedStore(
          {
            topic: memory.topic,
            group: settings.groupId,
            maxRuns: memory.maxRuns,
            connection: connectionSettings(settings.globalConfig as Record<string, unknown>),
            timeoutMs: settings.commitTimeoutMs,
          },
          logger.child({ component: 'completed-offsets' }),
        );
    }
    const changed = (): void => this.conditions.changed();
    const until = (condition: () => boolean, deadline: number): Promise<boolean> =>
      this.conditions.until(condition, deadline);
    const shutdown = new Shutdown(this.conditions, (err) => this.failWith(err));
    this.shutdown = shutdown;
    const loggers = new PartitionLoggers(logger);
    this.loggers = loggers;
    const partitionLogger = (c: PartitionControl): Logger => loggers.of(c);
    const assignments = this.assignments;

    this.client = new ConsumerClient(
      settings,
      logger,
      (err, assignment) => this.rebalance.onRebalance(err, assignment),
      factory,
      (err) => this.apply(classifyConsumeError(err), { err }),
    );
    const client = this.client;
    client.onAnswered = changed;
    this.cadence = new ConsumeCadence(settings.consumeBatchSize, settings.consumeTimeoutMs);
    this.startPositions = new StartPositions(client, settings, logger, this.store);
    this.committer = new Committer(client, settings, logger, this.store, {
      progressed: () => (this.lastProgressAt = Date.now()),
      changed,
      until,
      hopeless: () => this.failure instanceof AuthenticationError,
      observer: () => this.observer,
      partitionLogger,
    });
    this.flow = new FlowControl(client, settings, logger, {
      controllable: (c) => shutdown.stage !== 'disconnecting' && assignments.owns(c),
      running: () => this.state.kind === 'running',
      owner: (key) => assignments.get(key),
      owned: () => assignments.values(),
      partitionLogger,
      resumed: (tps) => this.fetchWaker.resumed(tps),
    });
    this.fetchWaker = new FetchWaker({
      client,
      logger,
      canRequest: () => shutdown.stage === 'open',
      fetching: () => this.flow.fetching(),
      held: () => assignments.controls().map((c) => ({ topic: c.topic, partition: c.partition })),
      timeoutMs: Math.min(settings.commitTimeoutMs, FETCH_WAKE_TIMEOUT_MS),
    });
    this.calls = new AssignCalls(client, assignments, logger, this.fetchWaker);
    this.partitionLife = new PartitionLifecycle({
      logger,
      assignments,
      flow: this.flow,
      calls: this.calls,
      commits: this.committer,
      conditions: this.conditions,
      events: this.rebalances,
      streams: this.partitionStreams,
      staticInstanceId: this.staticInstanceId,
    });
    this.seeks = new Seeks({
      client,
      assignments,
      startPositions: this.startPositions,
      lifecycle: this.partitionLife,
      shutdown,
      conditions: this.conditions,
      loggers,
    });
    this.incidents = new Incidents({
      settings,
      logger,
      client,
      staticInstanceId: this.staticInstanceId,
      stage: () =>
        this.state.kind === 'connecting' || this.state.kind === 'running'
          ? this.state.kind
          : 'other',
      lastProgressAt: () => this.lastProgressAt,
      until,
      changed,
      publish: (event) => this.publish(event),
      fail: (err) => shutdown.fail(err),
      failing: () => this.failure !== undefined,
    });
    this.rebalance = new RebalanceCoordinator({
      settings,
      logger,
      client,
      calls: this.calls,
      lifecycle: this.partitionLife,
      assignments,
      startPositions: this.startPositions,
      commits: this.committer,
      conditions: this.conditions,
      shutdown,
      staticInstanceId: this.staticInstanceId,
      topics: this.incidents,
    });
    const raw = this.client.raw;
    raw.on('event.error', (err: LibrdKafkaError) => {
      const error = toKafkaError(err, 'client error');
      this.apply(classifyClientError(error), { err: error, code: error.kafkaCode });
    });
    raw.on('event.log', (log: ClientLog) =>
      this.apply(classifyLog(log, fatalCauseFromText), { fac: log.fac, severity: log.severity }),
    );
  }

  /** Broker-thread wakes so far (metrics). */
  get fetchWakes(): FetchWakeMetrics {
    const w = this.fetchWaker;
    return { afterRebalance: w.wakes, afterResume: w.resumeWakes, requests: w.requests };
  }

  get lifecycle(): EngineState {
    return this.state;
  }

  /** When the consume loop started (ms since the epoch; 0 before). */
  get runningSince(): number {
    const s = this.state;
    return s.kind === 'running' ? s.since : s.kind === 'closing' ? s.runningSince : 0;
  }

  /**
   * Routes the consumer's offsets through `commits` instead of committing them to the group
   * (processTransactional()). Only before the consumer starts.
   */
  commitThrough(commits: OffsetCommits): void {
    if (this.state.kind !== 'idle') throw new Error('commitThrough() after the consumer started');
    this.committer.commitThrough(commits);
  }

  /** Something changed outside the engine (a transaction settled): re-check what waits. */
  changed(): void {
    this.conditions.changed();
  }

  /** Whether the stream still owns its partition (no seek or newer assignment replaced it). */
  owns(control: PartitionControl): boolean {
    return this.assignments.owns(control);
  }

  /** The controls of the partitions owned now, including ones being revoked (for metrics). */
  controls(): PartitionControl[] {
    return this.assignments.controls();
  }

  /** True while an assignment or a revoke is being handled. */
  get rebalancing(): boolean {
    return this.rebalance.busy;
  }

  /** Why this member is believed dropped from the group, until the next revoke or assignment. */
  get membershipLost(): string | undefined {
    return this.rebalance.membershipLost;
  }

  /** Fetch positions of the owned partitions (undefined where librdkafka does not know it yet). */
  positions(): { topic: string; partition: number; offset: number | undefined }[] {
    const owned = this.assignments.controls();
    const tps = list(owned);
    if (tps.length === 0 || this.state.kind !== 'running')
      return tps.map((t) => ({ ...t, offset: undefined }));
    let positions: { topic: string; partition: number; offset?: number }[] = [];
    try {
      positions = this.client.raw.position(tps);
    } catch {
      // not connected: fall back to what the ledgers know
    }
    return owned.map((c) => {
      const p = positions.find((x) => x.topic === c.topic && x.partition === c.partition)?.offset;
      // While held-back messages are fetched again, librdkafka's position runs ahead of what the
      // stream was handed; where it knows none (after a seek), the ledger's next offset to read.
      const known = typeof p === 'number' && p >= 0 && !this.flow.rewinding(c);
      return { topic: c.topic, partition: c.partition, offset: known ? p : c.ledger.nextToRead };
    });
  }

  /** Connects, subscribes and starts the consume loop. Idempotent. */
  start(): Promise<void> {
    this.startPromise ??= this.doStart();
    return this.startPromise;
  }

  private async doStart(): Promise<void> {
    if (this.state.kind !== 'idle') return;
    this.state = { kind: 'connecting' };
    this.logger.info({ topics: this.settings.topics }, 'connecting');
    try {
      await this.client.connect();
    } catch (err) {
      // librdkafka's error events (an authentication failure, say) are dispatched around the
      // failed connect's callback: let them arrive, then end with the most telling error.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const refusal = this.incidents.takeConnectRefusal();
      const failure = refusal ?? (err instanceof Error ? err : new Error(errorMessage(err)));
      if (failure === err) this.logger.error({ err }, 'could not connect');
      this.failWith(failure);
      return;
    }
    this.incidents.takeConnectRefusal(); // connected after all: an earlier refusal was transient
    if (this.state.kind !== 'connecting') return; // closed meanwhile
    try {
      this.client.raw.subscribe([...this.settings.topics]);
    } catch (err) {
      this.failWith(toKafkaError(err, 'subscribe failed'));
      return;
    }
    this.logger.info({ topics: this.settings.topics }, 'subscribed');
    const since = Date.now();
    // The loop's first statement runs after this assignment (it awaits nothing before checking).
    const loop = Promise.resolve()
      .then(() => this.loop())
      .catch((err: unknown) => {
        this.logger.error({ err }, 'consume loop failed');
        this.failWith(err instanceof Error ? err : new Error(errorMessage(err)));
      });
    this.state = { kind: 'running', since, loop };
  }

  // ---------------------------------------------------------------------------------------------
  // The consume loop

  /** The loop polls while running and while a close releases the partitions. */
  private get polling(): boolean {
    const s = this.state;
    return s.kind === 'running' || (s.kind === 'closing' && this.shutdown.stage === 'closing');
  }

  /**
   * Whether the raw consumer may still be handed to a call that uses it later (not once the close
   * disconnects it).
   */
  get clientUsable(): boolean {
    return this.stage() !== 'disconnecting';
  }

  private stage(): Stage {
    return this.shutdown.stage;
  }

  private async loop(): Promise<void> {
    while (this.polling) {
      if (this.seeks.waiting) await this.seeks.apply();
      if (this.flow.rewindsWaiting) await this.flow.applyRewinds();
      const { size, timeoutMs } = this.cadence.next(
        this.rebalance.busy || this.client.awaitingPoll || this.state.kind === 'closing',
      );
      let batch: Message[];
      try {
        batch = await this.client.consume(size, timeoutMs);
      } catch (err) {
        this.failWith(toKafkaError(err, 'consume failed'));
        return;
      }
      this.lastPollAt = Date.now();
      this.cadence.record(batch.length);
      if (batch.length > 0) {
        this.lastProgressAt = this.lastPollAt;
        this.dispatch(batch);
      }
      this.notePositions(batch.length < size);
      if (this.stage() !== 'disconnecting')
        this.committer.maybeCommit(this.assignments.values(), (c) => this.assignments.owns(c));
      if (batch.length === 0) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private dispatch(batch: Message[]): void {
    for (const m of batch) {
      const control = this.assignments.ownerOf(m.topic, m.partition);
      if (control === undefined || !control.active) {
        // A late delivery (docs/binding-behaviours.md, "Late messages"): its partition is no longer ours or is being revoked.
        this.lateMessagesDropped += 1;
        this.logger.debug(
          { topic: m.topic, partition: m.partition, offset: m.offset },
          'dropped a message of a partition not currently assigned',
        );
        continue;
      }
      if (m.offset <= control.ledger.lastDeliveredOffset) {
        // librdkafka went back within one assignment (offset reset after out-of-range, log
        // truncation). These offsets were handed out already in this assignment.
        this.partitionLogger(control).warn(
          { offset: m.offset, last: control.ledger.lastDeliveredOffset },
          'partition position moved backwards; dropping offsets already delivered in this assignment',
        );
        continue;
      }
      // A partition the application paused delivers nothing, even if librdkafka dropped the pause.
      if (this.flow.guarding && !this.flow.admit(control, m.offset)) continue;
      if (control.finishedBefore(m.offset)) {
        // A previous owner finished it (completed-offset memory): count it done, don't redo it.
        control.skipCompleted(m.offset);
        continue;
      }
      control.push(toKafkaMessage(m, control.generation, control.signal));
      this.observer.received(m.topic, m.partition);
      this.flow.afterPush(control);
    }
  }

  /**
   * Tells each active partition's ledger librdkafka's position, which moves past offsets that are
   * never delivered: transaction markers, and aborted records under read_committed. Only here,
   * between two consume calls, does the position count exactly the messages dispatched (a
   * consume in flight moves it for messages JS has not seen yet).
   *
   * `position()` costs about as much as dispatching a few dozen messages, so it is asked after a
   * consume call that returned fewer messages than asked (`short`: the prefetched messages ran out,
   * which is when a partition can sit at a trailing marker) and otherwise at most every
   * {@link POSITION_INTERVAL_MS}. The committable offset stays correct with any subset of these
   * calls: each position taken here was exact when taken (every offset below it was delivered or
   * never will be), the ledger only ever moves it up and ignores one at or below its last
   * delivered offset, so a skipped call only delays moving past trailing markers — by at most one
   * interval while messages keep coming, by nothing once the partition is caught up. A commit
   * meanwhile (a revoke's final one, say) stops at the marker: the next owner reads nothing there.
   */
  private notePositions(short: boolean): void {
    if (this.assignments.size === 0 || this.stage() === 'disconnecting') return;
    const sinceNoted = this.lastPollAt - this.positionsNotedAt; // negative: the wall clock stepped back
    if (!short && sinceNoted >= 0 && sinceNoted < POSITION_INTERVAL_MS) return;
    // After a seek librdkafka resets the position to invalid until the new position's first
    // record is consumed, so an old, higher position is never taken for the new stream's.
    // A stream whose messages flow control held back: librdkafka's position counts them.
    const active = this.assignments.controls().filter((c) => c.active && !this.flow.rewinding(c));
    if (active.length === 0) return;
    let positions: { topic: string; partition: number; offset?: number }[];
    this.positionsNotedAt = this.lastPollAt;
    try {
      positions = this.client.raw.position(list(active));
    } catch {
      return;
    }
    for (const p of positions) {
      if (typeof p.offset !== 'number' || p.offset < 0) continue;
      this.assignments.get(tpKey(p.topic, p.partition))?.ledger.advanceTo(p.offset);
    }
  }

  /** A child logger bound to the partition's topic, partition and generation. */
  private partitionLogger(control: PartitionControl): Logger {
    return this.loggers.of(control);
  }

  /** Publishes a {@link ConsumerEvent}. */
  publish(event: ConsumerEvent): void {
    this.events.next(event);
  }

  // ---------------------------------------------------------------------------------------------
  // User controls: seek, pause, resume

  /** Moves an owned partition to `position` (see seeks.ts); resolves with the offset. */
  seek(tp: TopicPartition, position: StartPosition): Promise<number> {
    return this.seeks.request(tp, position);
  }

  /** Pauses fetching of the given partitions (all owned ones, and future ones, without `tps`). */
  pause(tps?: readonly TopicPartition[]): void {
    this.flow.pause(tps);
  }

  /** Resumes what `pause()` paused (everything without `tps`); see {@link FlowControl.resume}. */
  resume(tps?: readonly TopicPartition[]): void {
    this.flow.resume(tps);
  }

  /** Partitions paused by the application (owned now or not). */
  pausedByUser(): TopicPartition[] {
    return this.flow.pausedByUser();
  }

  // ---------------------------------------------------------------------------------------------
  // What librdkafka says

  /** Applies a verdict (see binding/client-error-classifier.ts); the only place librdkafka's reports act. */
  private apply(verdict: Verdict, context: Record<string, unknown>): void {
    switch (verdict.kind) {
      case 'membership-lost':
        this.rebalance.suspect(verdict.reason);
        this.logger.warn(
          'fac' in context ? { ...context, librdkafka: verdict.reason } : context,
          verdict.logMessage,
        );
        return;
      case 'authentication':
        this.incidents.authenticationRefused(verdict.err);
        return;
      case 'fatal':
        this.logger.error({ ...context, code: verdict.err.kafkaCode }, verdict.logMessage);
        this.incidents.fatal(verdict.err);
        return;
      case 'offset-out-of-range':
        this.logger.error(
          context,
          'offset out of range and auto.offset.reset=error: stopping (the partition would not be fetched again)',
        );
        this.failWith(verdict.err);
        return;
      case 'topic-unavailable':
        this.incidents.topicUnavailable(verdict.err, verdict.reason);
        return;
      case 'transient':
        this.incidents.transient(verdict.err, verdict.what);
        return;
      case 'fatal-cause':
        this.incidents.fatalCauseIs(verdict.code);
        this.logger[levelOf(verdict.log.severity)](context, verdict.log.message);
        return;
      case 'offset-reset':
        this.incidents.offsetReset(verdict.reset);
        return;
      case 'log':
        this.logger[verdict.level](context, verdict.log.message);
        return;
      default:
        assertNever(verdict);
    }
  }

  /** Why the consumer ends, when it ends with an error. */
  private get failure(): Error | undefined {
    const s = this.state;
    return s.kind === 'closing' || s.kind === 'closed' ? s.failure : this.earlyFailure;
  }

  /** Ends the engine with an error: closes gracefully, then errors the partition stream. */
  failWith(err: Error): void {
    const s = this.state;
    if (s.kind === 'closed' || this.failure !== undefined) return;
    if (s.kind === 'closing') s.failure = err;
    else this.earlyFailure = err;
    void this.close();
  }

  // ---------------------------------------------------------------------------------------------
  // Close

  /** Graceful shutdown, bounded by `timeoutMs` (default `closeTimeoutMs`). Idempotent. */
  close(timeoutMs: number = this.settings.closeTimeoutMs): Promise<void> {
    if (this.closePromise === undefined) {
      this.closePromise = this.doClose(timeoutMs);
    } else if (this.state.kind === 'closing') {
      // A later close() with a shorter deadline (a SIGTERM after an unsubscribe, say) wins: the
      // revoke and the waits below fit themselves to it.
      this.shutdown.shorten(timeoutMs);
    }
    return this.closePromise;
  }

  private async doClose(timeoutMs: number): Promise<void> {
    const before = this.state;
    if (before.kind === 'idle' || before.kind === 'closed') {
      this.shutdown.disconnecting();
      this.state = { kind: 'closed', failure: this.failure };
      this.finish();
      return;
    }
    const startedAt = Date.now();
    const closing: EngineState & { kind: 'closing' } = {
      kind: 'closing',
      since: startedAt,
      failure: this.earlyFailure,
      loop: before.kind === 'running' ? before.loop : undefined,
      runningSince: before.kind === 'running' ? before.since : 0,
    };
    this.state = closing;
    const shutdown = this.shutdown;
    shutdown.begin(startedAt, timeoutMs); // revokes in flight shorten their deadline to fit
    if (before.kind === 'connecting') {
      // The start sees the closing state after its connect and starts no loop.
      await this.startPromise?.catch(() => undefined);
      shutdown.disconnecting();
      await this.client.readsSettled();
      await this.client.disconnect().catch(() => undefined);
      this.state = { kind: 'closed', failure: closing.failure };
      this.finish();
      return;
    }
    // Partitions must be released by then; what is left is for unsubscribing and disconnecting.
    const releaseBy = (): number => shutdown.releaseBy();
    const deadline = (): number => shutdown.deadline;
    this.logger.info({ partitions: this.assignments.size }, 'closing');
    const leaving: LeavingParts = {
      rebalance: this.rebalance,
      assignments: this.assignments,
      lifecycle: this.partitionLife,
      commits: this.committer,
      client: this.client,
      conditions: this.conditions,
      logger: this.logger,
      settings: this.settings,
      staticInstanceId: this.staticInstanceId,
    };
    await leaveGroup(leaving, releaseBy);
    await settleCommits(leaving, deadline);
    shutdown.disconnecting();
    await closing.loop;
    // A transactional call's worker, or a broker read's (committed offsets read back, start
    // positions), may still use the native consumer: disconnected under it, the binding crashes.
    // Each such call lasts at most a second (NATIVE_CALL_MS) when a close is due.
    const idle = Promise.all([this.committer.clientIdle(), this.client.readsSettled()]);
    const idleInTime = await settlesWithin(
      idle,
      Math.max(shutdown.deadline - Date.now(), 0) + NATIVE_CALL_MS,
    );
    this.seeks.rejectAll();
    this.partitionLife.fenceAll('consumer closed');
    if (idleInTime) {
      await this.withDeadline(
        this.client.disconnect(),
        Math.max(shutdown.deadline - Date.now(), 1000),
      );
    } else {
      // A sendOffsetsToTransaction waiting on an unreachable coordinator (librdkafka ends it when
      // its request times out), or a broker read with a long timeout: disconnect once it returns.
      this.logger.warn(
        'a native call still uses the consumer at the close deadline (an offset send to an unreachable transaction coordinator, or a broker read): the consumer is disconnected once it returns',
      );
      void idle.then(() => this.client.disconnect()).catch(() => undefined);
    }
    await this.store?.close().catch(() => undefined);
    // Partitions no revoke released (librdkafka's close fired none for them) still end in events.
    this.partitionLife.closeOut(
      'the consumer closed before the partition was released (close deadline)',
    );
    this.state = { kind: 'closed', failure: closing.failure };
    this.logger.info({ durationMs: Date.now() - startedAt }, 'closed');
    this.finish();
  }

  private finish(): void {
    this.rebalances.complete();
    this.events.complete();
    const failure = this.failure;
    if (failure) this.partitionStreams.error(failure);
    else this.partitionStreams.complete();
  }

  private async withDeadline(promise: Promise<void>, ms: number): Promise<void> {
    if (!(await settlesWithin(promise, ms)))
      this.logger.warn({ ms }, 'disconnect did not finish in time');
  }
}
