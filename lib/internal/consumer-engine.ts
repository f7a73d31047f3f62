/**
 * The consumer engine: the single owner of the node-rdkafka client and of all mutable consumer
 * state. It runs the consume loop, applies rebalances through the revoke protocol
 * (end streams → drain → commit, confirmed → unassign), commits periodically, and pauses and
 * resumes partitions for backpressure.
 */
import { Subject } from 'rxjs';
import type { Logger } from 'pino';
import type { ConsumerSettings } from '../config';
import {
  AuthenticationError,
  FencedInstanceError,
  NotAssignedError,
  StartPositionError,
} from '../errors';
import type { KafkaClientError } from '../errors';
import type {
  ConsumerEvent,
  StartPosition,
  RebalanceEvent,
  RebalanceProtocol,
  TopicPartition,
} from '../types';
import { ConsumeCadence } from './consume-loop';
import { revoke } from './revoke-protocol';
import type { RevokeContext, RevokeHost } from './revoke-protocol';
import { FlowControl } from './flow-control';
import { Committer } from './committer';
import { NO_START_CHOICES, StartPositions } from './start-positions';
import type { StartChoices } from './start-positions';
import {
  assertNever,
  classifyClientError,
  classifyConsumeError,
  classifyLog,
  levelOf,
} from './client-events';
import type { ClientLog, OffsetReset, Verdict } from './client-events';
import { Conditions, settlesWithin } from './conditions';
import { ConsumerClient } from './consumer-client';
import { NO_OBSERVER } from './engine-observer';
import type { EngineObserver } from './engine-observer';
import { toKafkaMessage } from './message';
import { PartitionControl } from './partition-control';
import type { FailureCounters, ProcessorHost } from './processor';
import { KafkaCompletedStore } from './completed-store';
import type { CompletedStore } from './completed-store';
import { connectionSettings } from '../config';
import type { Assignment, ConsumerFactory, LibrdKafkaError, Message } from './rdkafka';
import {
  Code,
  defaultConsumerFactory,
  fatalCauseFromText,
  kafkaCodeOf,
  list,
  toKafkaError,
  tpKey,
} from './rdkafka';

/** The engine's lifecycle. */
export type EngineState =
  | { readonly kind: 'idle' }
  | { readonly kind: 'connecting' }
  | { readonly kind: 'running' }
  | { readonly kind: 'closing' }
  | { readonly kind: 'closed' };

export class ConsumerEngine implements ProcessorHost {
  /** Every rebalance phase, in order. */
  readonly rebalances = new Subject<RebalanceEvent>();
  /** Failure-policy outcomes, offset resets, unavailable topics, client errors. */
  readonly events = new Subject<ConsumerEvent>();
  /** Failure-policy outcomes since start. */
  readonly counters: FailureCounters = { retries: 0, skipped: 0, deadLettered: 0, failed: 0 };
  /** librdkafka client errors seen since start (transient ones included). */
  clientErrors = 0;
  /** Offset resets seen since start (records skipped or re-read). */
  offsetResets = 0;
  /** An authentication failure reported while connecting (its events arrive just before connect fails). */
  private authFailure: AuthenticationError | undefined;
  /** First authentication refusal since the last progress, while running. */
  private authErrorsSince: number | undefined;
  /** Last time the consumer made progress: messages fetched or a commit confirmed. */
  private lastProgressAt = 0;
  /** Topics currently reported unavailable (to warn once per topic, not once per poll). */
  private readonly unavailableTopics = new Set<string>();
  private topicCheckInFlight = false;
  /** An assignment whose start offsets are being looked up (librdkafka waits for its assign call). */
  private pendingAssign:
    { generation: number; readonly partitions: TopicPartition[]; applied: boolean } | undefined;
  /** Seeks waiting for the loop to run them between two consume calls. */
  private readonly pendingSeeks: {
    key: string;
    /** The stream the seek was called for; it applies to that assignment only. */
    owner: PartitionControl;
    tp: TopicPartition;
    offset: number;
    position: StartPosition;
    resolve: () => void;
    reject: (err: Error) => void;
    notOwned: (why: string) => NotAssignedError;
  }[] = [];
  /** Streams replaced by a seek whose aborted handlers have not finished yet. */
  private readonly retired = new Set<PartitionControl>();
  /** Completed-offset memory (`rememberCompleted`). */
  private readonly store: CompletedStore | undefined;
  /** Messages skipped because a previous owner had finished them. */
  redoneAvoided = 0;
  /** One control per assigned partition per assignment; completes (or errors) when the engine ends. */
  readonly partitionStreams = new Subject<PartitionControl>();
  readonly client: ConsumerClient;
  private readonly startPositions: StartPositions;
  private readonly committer: Committer;
  /** What the revoke protocol (revoke-protocol.ts) may ask of the engine. */
  private readonly revokeHost: RevokeHost;

  private state: EngineState = { kind: 'idle' };
  private generation = 0;
  /** Current controls by partition: active ones and ones being revoked. */
  private readonly owned = new Map<string, PartitionControl>();
  private readonly rebalanceTasks = new Set<Promise<void>>();
  /** Revokes being drained and committed (close waits for them before leaving the group). */
  private revokesInFlight = 0;
  /** Partitions whose revoke is in flight. */
  private readonly revoking = new Set<string>();
  private suspectLost: string | undefined;
  private looping = false;
  private loopDone: Promise<void> | undefined;
  private startPromise: Promise<void> | undefined;
  private closePromise: Promise<void> | undefined;
  /** Set once close() started: when it must be done by, and since when. */
  private closeDeadline: number | undefined;
  private closeStartedAt = 0;
  private failure: Error | undefined;
  /** The error behind librdkafka's ERR__FATAL, from its FATAL log line. */
  private fatalCause: number | undefined;
  private fatalPending = false;
  private disconnecting = false;
  private readonly cadence: ConsumeCadence;
  private readonly conditions = new Conditions();
  private readonly flow: FlowControl;
  /** Time of the last completed consume call (ms since the epoch). */
  lastPollAt = 0;
  /** Messages that arrived for partitions not (or no longer) assigned and were dropped. */
  lateMessagesDropped = 0;
  /** When the consume loop started (ms since the epoch; 0 before). */
  runningSince = 0;
  /** Receives metrics hooks (see engine-observer.ts). */
  observer: EngineObserver = NO_OBSERVER;
  private readonly partitionLoggers = new WeakMap<PartitionControl, Logger>();
  // One-entry cache: consecutive messages of a batch usually share a partition.
  private lastTopic = '';
  private lastPartition = -1;
  private lastControl: PartitionControl | undefined;

  constructor(
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    factory: ConsumerFactory = defaultConsumerFactory,
    storeFactory?: (settings: ConsumerSettings) => CompletedStore,
  ) {
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
    this.client = new ConsumerClient(
      settings,
      logger,
      (err, assignment) => this.onRebalance(err, assignment),
      factory,
      (err) => this.onConsumeError(err),
    );
    this.client.onAnswered = () => this.notifyChanged();
    this.startPositions = new StartPositions(this.client, settings, logger, this.store);
    this.committer = new Committer(this.client, settings, logger, this.store, {
      progressed: () => (this.lastProgressAt = Date.now()),
      changed: () => this.notifyChanged(),
      until: (condition, deadline) => this.waitUntil(condition, deadline),
      hopeless: () => this.failure instanceof AuthenticationError,
      observer: () => this.observer,
      partitionLogger: (control) => this.partitionLogger(control),
    });
    this.cadence = new ConsumeCadence(settings.consumeBatchSize, settings.consumeTimeoutMs);
    this.flow = new FlowControl(this.client, settings, logger, {
      controllable: (c) => !this.disconnecting && this.owned.get(c.key) === c,
      running: () => this.state.kind === 'running',
      owner: (key) => this.owned.get(key),
      owned: () => this.owned.values(),
      partitionLogger: (c) => this.partitionLogger(c),
    });
    this.revokeHost = {
      settings,
      logger,
      committer: this.committer,
      flow: this.flow,
      closingBy: () => this.revokeDeadlineWhileClosing(),
      until: (condition, deadline) => this.waitUntil(condition, deadline),
      changed: () => this.notifyChanged(),
      retiredOf: (partitions) => this.retiredOf(partitions),
      stillOwned: (c) => this.owned.get(c.key) === c && this.stillAssigned(c),
      emit: (event) => this.emit(event),
      lose: (ctx, reason) => this.lose(ctx, reason),
      unassign: (partitions, protocol, generation) =>
        this.unassign(partitions, protocol, generation),
      forget: (controls) => this.forget(controls),
    };
    const raw = this.client.raw;
    raw.on('event.error', (err: LibrdKafkaError) => this.onClientError(err));
    raw.on('event.log', (log: { severity: number; fac: string; message: string }) =>
      this.onClientLog(log),
    );
  }

  get lifecycle(): EngineState {
    return this.state;
  }

  /** The controls of the partitions owned now, including ones being revoked (for metrics). */
  controls(): PartitionControl[] {
    return [...this.owned.values()];
  }

  /** True while an assignment or a revoke is being handled. */
  get rebalancing(): boolean {
    return this.rebalanceTasks.size > 0;
  }

  /** Why this member is believed dropped from the group, until the next revoke or assignment. */
  get membershipLost(): string | undefined {
    return this.suspectLost;
  }

  /** Fetch positions of the owned partitions (undefined where librdkafka does not know it yet). */
  positions(): { topic: string; partition: number; offset: number | undefined }[] {
    const tps = [...this.owned.values()].map((c) => ({ topic: c.topic, partition: c.partition }));
    if (tps.length === 0 || this.state.kind !== 'running')
      return tps.map((t) => ({ ...t, offset: undefined }));
    let positions: { topic: string; partition: number; offset?: number }[] = [];
    try {
      positions = this.client.raw.position(tps);
    } catch {
      // not connected: fall back to what the ledgers know
    }
    return [...this.owned.values()].map((c) => {
      const p = positions.find((x) => x.topic === c.topic && x.partition === c.partition)?.offset;
      const offset = typeof p === 'number' && p >= 0 ? p : c.ledger.committable();
      return { topic: c.topic, partition: c.partition, offset };
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
      const failure = this.authFailure ?? (err instanceof Error ? err : new Error(String(err)));
      if (failure === err) this.logger.error({ err }, 'could not connect');
      this.failWith(failure);
      return;
    }
    this.authFailure = undefined; // connected after all: an earlier refusal was transient
    if (this.state.kind !== 'connecting') return; // closed meanwhile
    try {
      this.client.raw.subscribe([...this.settings.topics]);
    } catch (err) {
      this.failWith(toKafkaError(err, 'subscribe failed'));
      return;
    }
    this.state = { kind: 'running' };
    this.runningSince = Date.now();
    this.logger.info({ topics: this.settings.topics }, 'subscribed');
    this.looping = true;
    this.loopDone = this.loop().catch((err: unknown) => {
      this.logger.error({ err }, 'consume loop failed');
      this.looping = false;
      this.failWith(err instanceof Error ? err : new Error(String(err)));
    });
  }

  // ---------------------------------------------------------------------------------------------
  // The consume loop

  private async loop(): Promise<void> {
    while (this.looping) {
      if (this.pendingSeeks.length > 0) await this.applySeeks();
      const { size, timeoutMs } = this.cadence.next();
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
      this.notePositions();
      if (!this.disconnecting)
        this.committer.maybeCommit(this.owned.values(), (c) => this.owned.get(c.key) === c);
      if (batch.length === 0) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private dispatch(batch: Message[]): void {
    for (const m of batch) {
      let control: PartitionControl | undefined;
      if (m.partition === this.lastPartition && m.topic === this.lastTopic) {
        control = this.lastControl;
      } else {
        control = this.owned.get(tpKey(m.topic, m.partition));
        this.lastTopic = m.topic;
        this.lastPartition = m.partition;
        this.lastControl = control;
      }
      if (control === undefined || !control.active) {
        // A late delivery (pitfall 6): its partition is no longer ours or is being revoked.
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
      if (control.skip?.has(m.offset)) {
        // A previous owner finished it (completed-offset memory): count it done, don't redo it.
        control.skipCompleted(m.offset);
        this.redoneAvoided += 1;
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
   */
  private notePositions(): void {
    if (this.owned.size === 0 || this.disconnecting) return;
    // After a seek librdkafka resets the position to invalid until the new position's first
    // record is consumed, so an old, higher position is never taken for the new stream's.
    const active = [...this.owned.values()].filter((c) => c.active);
    if (active.length === 0) return;
    let positions: { topic: string; partition: number; offset?: number }[];
    try {
      positions = this.client.raw.position(list(active));
    } catch {
      return;
    }
    for (const p of positions) {
      if (typeof p.offset !== 'number' || p.offset < 0) continue;
      this.owned.get(tpKey(p.topic, p.partition))?.ledger.advanceTo(p.offset);
    }
  }

  private onAck = (control: PartitionControl): void => {
    // A stream a seek replaced is forgotten once its aborted handlers finished.
    if (this.retired.size > 0 && control.isDrained) this.retired.delete(control);
    this.flow.afterAck(control);
    this.notifyChanged();
  };

  /** A child logger bound to the partition's topic, partition and generation. */
  private partitionLogger(control: PartitionControl): Logger {
    let logger = this.partitionLoggers.get(control);
    if (logger === undefined) {
      logger = this.logger.child({
        topic: control.topic,
        partition: control.partition,
        generation: control.generation,
      });
      this.partitionLoggers.set(control, logger);
    }
    return logger;
  }

  // ---------------------------------------------------------------------------------------------
  // Periodic commits

  // ---------------------------------------------------------------------------------------------
  // Rebalances

  private protocol(): RebalanceProtocol {
    try {
      const p = this.client.raw.rebalanceProtocol();
      return p === 'COOPERATIVE' || p === 'EAGER' ? p : 'NONE';
    } catch {
      return 'NONE';
    }
  }

  private emit(event: RebalanceEvent): void {
    this.rebalances.next(event);
  }

  /** Publishes a {@link ConsumerEvent}. */
  publish(event: ConsumerEvent): void {
    this.events.next(event);
  }

  private onRebalance(err: LibrdKafkaError | undefined, assignment: Assignment[]): void {
    try {
      const code = err?.code;
      if (code === Code.ASSIGN_PARTITIONS) this.onAssign(assignment);
      else if (code === Code.REVOKE_PARTITIONS) this.onRevoke(assignment);
      else {
        this.logger.warn(
          { err },
          'rebalance error; releasing the assignment (the group rebalances again; work since the last commit may be redone)',
        );
        this.unassign(assignment, this.protocol(), this.generation);
      }
    } catch (error) {
      this.logger.error({ err: error }, 'rebalance handling failed');
      this.failWith(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private onAssign(assignment: Assignment[]): void {
    const generation = ++this.generation;
    // A revoke would have consumed it; an assignment means we are a member again.
    this.suspectLost = undefined;
    const partitions = list(assignment);
    if (partitions.length === 0 || this.disconnecting || !this.startPositions.needed) {
      this.applyAssign(generation, partitions, NO_START_CHOICES);
      return;
    }
    // librdkafka waits for the assign call: look up start offsets first and put them in it.
    let hookFailure: Error | undefined;
    const pending = { generation, partitions, applied: false };
    this.pendingAssign = pending;
    const task = this.startPositions
      .resolve(partitions, generation)
      .catch((err: unknown) => {
        if (err instanceof StartPositionError) {
          hookFailure = err;
        } else {
          this.logger.warn(
            { err, partitions },
            'could not look up start offsets; an idle partition that moves may let the next owner skip records produced meanwhile (auto.offset.reset=latest)',
          );
        }
        return NO_START_CHOICES;
      })
      .then((choices) => {
        if (this.pendingAssign === pending) this.pendingAssign = undefined;
        // Answered already, without start offsets (see answerPendingAssign), or not.
        if (!pending.applied) {
          pending.applied = true;
          this.applyAssign(pending.generation, partitions, choices);
        }
        // A hook that failed ends the consumer even when the assignment was answered early.
        if (hookFailure) {
          this.logger.error({ err: hookFailure }, 'the onAssign hook failed: closing');
          this.failWith(hookFailure);
        }
      })
      .catch((err: unknown) => this.failWith(err instanceof Error ? err : new Error(String(err))))
      .finally(() => {
        this.rebalanceTasks.delete(task);
        this.notifyChanged();
      });
    this.rebalanceTasks.add(task);
  }

  /**
   * Answers an assignment whose start offsets are still being looked up, without them: a revoke
   * or a close must never find librdkafka still waiting for an assign call (its close would wait
   * for it forever). The partitions are then revoked at once, so nothing starts from a wrong place:
   * the memory is not used (work is redone), the hook's choice and a `latest` start are not needed.
   */
  private answerPendingAssign(why: string): void {
    const pending = this.pendingAssign;
    if (!pending || pending.applied) return;
    pending.applied = true;
    this.pendingAssign = undefined;
    this.logger.info(
      { generation: pending.generation, partitions: pending.partitions, why },
      'answering an assignment before its start offsets were resolved',
    );
    this.applyAssign(pending.generation, pending.partitions, NO_START_CHOICES);
  }

  private applyAssign(
    generation: number,
    partitions: TopicPartition[],
    { starts, memories }: StartChoices,
  ): void {
    if (generation !== this.generation) {
      // A newer rebalance arrived while the start offsets were looked up: librdkafka no longer
      // waits for this assign; applying it now would assign partitions that are not ours.
      this.logger.info(
        { generation, current: this.generation, partitions },
        'skipped an assignment overtaken by a newer rebalance',
      );
      return;
    }
    const protocol = this.protocol();
    const withOffsets = partitions.map((tp) => {
      const start = starts.get(tpKey(tp.topic, tp.partition));
      return start === undefined ? { ...tp } : { ...tp, offset: start };
    });
    try {
      if (protocol === 'COOPERATIVE') this.client.raw.incrementalAssign(withOffsets);
      else this.client.raw.assign(withOffsets);
    } catch (err) {
      if (this.disconnecting || this.state.kind === 'closing' || this.state.kind === 'closed') {
        // An assign delivered while the client is disconnecting throws; answer it with an
        // unassign (allowed while closing) so librdkafka's close does not wait for it.
        this.logger.info(
          { err, partitions, generation },
          'assign refused while closing; unassigning',
        );
        this.unassign(partitions, protocol, generation);
        return;
      }
      throw toKafkaError(err, 'assign failed');
    }
    if (protocol !== 'COOPERATIVE') {
      // Eager: the assignment replaces the previous one; nothing else is ours any more.
      const incoming = new Set(partitions.map((tp) => tpKey(tp.topic, tp.partition)));
      for (const [key, c] of this.owned) {
        if (!incoming.has(key)) {
          c.fence('no longer assigned');
          this.owned.delete(key);
        }
      }
    }
    const controls: PartitionControl[] = [];
    for (const tp of partitions) this.unavailableTopics.delete(`unknown:${tp.topic}`);
    for (const tp of partitions) {
      const key = tpKey(tp.topic, tp.partition);
      const previous = this.owned.get(key);
      if (previous) previous.fence('reassigned in a newer generation');
      const control = new PartitionControl(tp.topic, tp.partition, generation, key, this.onAck);
      const start = starts.get(key);
      if (start !== undefined) control.ledger.setStart(start);
      const remembered = memories.get(key);
      if (remembered) control.skip = new Set(remembered);
      this.owned.set(key, control);
      controls.push(control);
    }
    this.lastControl = undefined;
    this.lastPartition = -1;
    this.flow.assigned(controls);
    this.logger.info(
      { generation, protocol, partitions, starts: Object.fromEntries(starts) },
      'assigned',
    );
    this.emit({ type: 'assigned', generation, protocol, partitions, at: Date.now() });
    if (this.state.kind === 'closing') {
      // Assigned while leaving: end the streams right away; the revoke that follows releases them.
      for (const c of controls) c.end();
      // A static classic member stays subscribed while closing: no revoke follows, so release
      // them now.
      if (this.staticInstanceId !== undefined && this.settings.groupProtocol === 'classic') {
        this.onRevoke(partitions);
      }
    }
    for (const c of controls) this.partitionStreams.next(c);
    this.notifyChanged();
  }

  private onRevoke(assignment: Assignment[]): void {
    // Ask librdkafka at once whether this revoke is a loss (fenced by a heartbeat, the session
    // expired): then others may own these partitions already, and draining would only redo
    // their work. Asked before any (un)assign call, which would clear librdkafka's lost flag; the
    // answer is local and comes with the next consume call.
    const lostProbe = this.disconnecting
      ? Promise.resolve(undefined)
      : this.client.probeAssignmentLost(
          Math.max(
            1,
            Math.min(this.settings.commitTimeoutMs, Math.floor(this.settings.drainTimeoutMs / 4)),
          ),
        );
    const all = list(assignment);
    // A partition whose revoke is already in flight is that revoke's to commit and release: a
    // second revoke of it (librdkafka repeats none, but an unsubscribe can cover it) must neither
    // commit it again nor release it before the first one's final commit.
    const partitions = all.filter((tp) => !this.revoking.has(tpKey(tp.topic, tp.partition)));
    if (partitions.length === 0 && all.length > 0 && !this.disconnecting) {
      this.logger.info(
        { partitions: all },
        'revoke of partitions already being revoked: left to the revoke in flight',
      );
      return;
    }
    // An assignment still waiting for its start offsets is answered first when this revoke
    // covers it, or the consumer is closing (librdkafka's close would wait for it forever).
    const pending = this.pendingAssign;
    if (
      pending &&
      (this.state.kind === 'closing' ||
        this.disconnecting ||
        pending.partitions.some((p) =>
          partitions.some((tp) => tp.topic === p.topic && tp.partition === p.partition),
        ))
    ) {
      this.answerPendingAssign('a revoke arrived');
    }
    const generation = ++this.generation;
    // An assignment still waiting for its start offsets and not covered by this revoke is not
    // overtaken by it (a cooperative revoke of other partitions): it is applied in the new
    // generation once its start offsets are known.
    if (this.pendingAssign && !this.pendingAssign.applied)
      this.pendingAssign.generation = generation;
    const protocol = this.protocol();
    const controls = partitions
      .map((tp) => this.owned.get(tpKey(tp.topic, tp.partition)))
      .filter((c): c is PartitionControl => c !== undefined);
    this.lastControl = undefined;
    this.lastPartition = -1;

    if (this.disconnecting) {
      // The final revoke fired by disconnect(): only unassign works now (pitfall 11).
      for (const c of controls) c.fence('consumer closed');
      this.unassign(all, protocol, generation);
      this.forget(controls);
      return;
    }
    const lostReason = this.suspectLost;
    if (lostReason !== undefined) {
      this.suspectLost = undefined;
      this.lose({ partitions, controls, protocol, generation }, lostReason);
      return;
    }

    // Counted before anything is emitted: a close() called from a `revoking` subscriber must
    // already see this revoke in flight (and wait for it before leaving the group).
    this.revokesInFlight += 1;
    for (const tp of partitions) this.revoking.add(tpKey(tp.topic, tp.partition));
    const startedAt = Date.now();
    const inFlight = controls.reduce((n, c) => n + c.inFlight, 0);
    // A static member closing keeps its assignment at the broker (no LeaveGroup under classic;
    // under KIP-848 a leave with epoch -2): nobody else gets these partitions before its session
    // times out.
    const handedOver = !(this.state.kind === 'closing' && this.staticInstanceId !== undefined);
    for (const c of controls) c.end();
    const ctx: RevokeContext = {
      partitions,
      controls,
      protocol,
      generation,
      startedAt,
      inFlight,
      handedOver,
      groupInstanceId: this.staticInstanceId,
      lostProbe,
    };
    const task = revoke(ctx, this.revokeHost)
      .catch((err: unknown) => {
        this.logger.error({ err, generation }, 'revoke failed');
        this.failWith(err instanceof Error ? err : new Error(String(err)));
      })
      .finally(() => {
        this.revokesInFlight -= 1;
        for (const tp of partitions) this.revoking.delete(tpKey(tp.topic, tp.partition));
        this.rebalanceTasks.delete(task);
        this.notifyChanged();
      });
    this.rebalanceTasks.add(task);
    this.logger.info({ generation, protocol, partitions, inFlight }, 'revoking');
    this.emit({ type: 'revoking', generation, protocol, partitions, at: startedAt });
  }

  /** The latest a revoke may end while the consumer closes (unbounded otherwise). */
  private revokeDeadlineWhileClosing(): number {
    if (this.closeDeadline === undefined) return Number.POSITIVE_INFINITY;
    // Leave time to unsubscribe, leave the group and disconnect after the revoke.
    const total = this.closeDeadline - this.closeStartedAt;
    return this.closeDeadline - Math.min(2500, Math.floor(total / 5));
  }

  /** Under cooperative rebalancing after a newer generation: is the partition still assigned? */
  private stillAssigned(control: PartitionControl): boolean {
    if (this.protocol() !== 'COOPERATIVE') return true;
    try {
      return this.client.raw
        .assignments()
        .some((a) => a.topic === control.topic && a.partition === control.partition);
    } catch {
      return true;
    }
  }

  /** Partitions taken away without a chance to commit. */
  private lose(
    {
      partitions,
      controls,
      protocol,
      generation,
    }: Pick<RevokeContext, 'partitions' | 'controls' | 'protocol' | 'generation'>,
    reason: string,
  ): void {
    for (const c of controls) c.fence(`partition lost: ${reason}`);
    this.flow.releasing(controls);
    this.unassign(partitions, protocol, generation);
    this.forget(controls);
    this.logger.warn(
      { generation, partitions, reason },
      'partitions lost: nothing committed; their unfinished work will be redone by the next owner',
    );
    this.emit({ type: 'lost', generation, protocol, partitions, reason, at: Date.now() });
  }

  /**
   * Releases revoked partitions. If a newer rebalance happened meanwhile (the generation moved on),
   * never touch the newer assignment (Backbeat BB-835): eager skips the full unassign, cooperative
   * unassigns only partitions still assigned and not re-owned by a newer generation.
   */
  private unassign(
    partitions: TopicPartition[],
    protocolAtRevoke: RebalanceProtocol,
    generation: number,
  ): void {
    const raw = this.client.raw;
    const protocol = this.protocol() === 'NONE' ? protocolAtRevoke : this.protocol();
    const stale = generation !== this.generation;
    try {
      if (protocol === 'COOPERATIVE') {
        let targets = partitions;
        if (stale) {
          const assigned = new Set(raw.assignments().map((a) => tpKey(a.topic, a.partition)));
          targets = partitions.filter((tp) => {
            const key = tpKey(tp.topic, tp.partition);
            const owner = this.owned.get(key);
            return assigned.has(key) && (owner === undefined || owner.generation <= generation);
          });
        }
        if (targets.length > 0) raw.incrementalUnassign(targets);
      } else if (stale) {
        this.logger.info(
          { generation, current: this.generation },
          'skipped a stale unassign: a newer assignment arrived meanwhile',
        );
      } else {
        raw.unassign();
      }
    } catch (err) {
      const code = kafkaCodeOf(err);
      if (protocol === 'COOPERATIVE' && code === Code.INVALID_ARG) {
        // Some partitions were no longer assigned: unassign the ones that still are.
        try {
          const assigned = new Set(raw.assignments().map((a) => tpKey(a.topic, a.partition)));
          const targets = partitions.filter((tp) => assigned.has(tpKey(tp.topic, tp.partition)));
          if (targets.length > 0) raw.incrementalUnassign(targets);
          this.logger.info(
            { partitions, unassigned: targets, generation },
            'unassigned the partitions still assigned',
          );
        } catch (retryErr) {
          this.logger.warn({ err: retryErr, partitions, generation }, 'unassign retry failed');
        }
        return;
      }
      this.logger.warn({ err, code, partitions, generation }, 'unassign failed');
    }
  }

  // ---------------------------------------------------------------------------------------------
  // User controls: seek, pause, resume

  /**
   * Moves an owned partition to `position`: its buffered messages are dropped, handlers in flight
   * on it are aborted and no longer count, and a new stream (with a fresh ledger starting at the
   * new offset) replaces the old one. A revoke arriving meanwhile drains the new stream.
   */
  async seek(tp: TopicPartition, position: StartPosition): Promise<number> {
    const key = tpKey(tp.topic, tp.partition);
    const owner = this.owned.get(key);
    const notOwned = (why: string): NotAssignedError =>
      new NotAssignedError(`Cannot seek ${tp.topic}[${tp.partition}]: ${why}`, {
        topic: tp.topic,
        partition: tp.partition,
      });
    if (this.state.kind !== 'running' || owner === undefined || !owner.active) {
      throw notOwned('this consumer does not own it right now');
    }
    const offset = await this.startPositions.resolvePosition(tp, position);
    // The seek belongs to the assignment it was called for: if the partition was revoked (and
    // perhaps assigned again) while its position was looked up, it is not applied to a newer one.
    if (this.owned.get(key) !== owner || !owner.active || this.state.kind !== 'running') {
      throw notOwned('it was revoked while its position was looked up');
    }
    // The native seek runs between two consume calls (see the loop): librdkafka then bumps the
    // partition's version and resets its position, so every later consume call returns only
    // records of the new position — no stale record can reach the new stream.
    await new Promise<void>((resolve, reject) => {
      this.pendingSeeks.push({ key, owner, tp, offset, position, resolve, reject, notOwned });
      this.notifyChanged();
    });
    return offset;
  }

  /** Applies the seeks requested since the last consume call; only the loop calls it. */
  private async applySeeks(): Promise<void> {
    const seeks = this.pendingSeeks.splice(0);
    for (const s of seeks) {
      const old = s.owner;
      if (this.owned.get(s.key) !== old || !old.active || this.state.kind !== 'running') {
        s.reject(s.notOwned('it was revoked before the seek could be applied'));
        continue;
      }
      try {
        // Timeout 0: librdkafka bumps the partition's version barrier and queues the seek before
        // the call returns, so once it succeeds the seek is certain to apply (a timed wait could
        // report a timeout for a seek that still happens). Only local errors (partition not
        // assigned) fail it, and then nothing changed.
        await this.client.seek(
          { topic: s.tp.topic, partition: s.tp.partition, offset: s.offset },
          0,
        );
      } catch (err) {
        // Nothing changed: the old stream goes on from where it was.
        s.reject(err instanceof Error ? err : new Error(String(err)));
        continue;
      }
      // No consume call is in flight here, so no rebalance arrived meanwhile; a close may have.
      if (this.owned.get(s.key) !== old || !old.active) {
        s.reject(
          s.notOwned(
            'it was revoked or the consumer closed while the seek was applied; its stream drains from where it was',
          ),
        );
        continue;
      }

      old.fence(`seek to ${s.offset}`);
      this.retire(old);
      const control = new PartitionControl(
        s.tp.topic,
        s.tp.partition,
        old.generation,
        s.key,
        this.onAck,
      );
      control.ledger.setStart(s.offset);
      this.owned.set(s.key, control);
      this.lastControl = undefined;
      this.lastPartition = -1;
      this.flow.replaced(old, control);
      this.partitionLogger(control).info(
        { offset: s.offset, position: s.position },
        'seek: buffered messages dropped, in-flight work aborted, restarting the partition stream',
      );
      this.partitionStreams.next(control);
      s.resolve();
    }
    this.notifyChanged();
  }

  /**
   * A stream replaced by a seek, whose aborted handlers may still run: revokes and close wait for
   * them (within their deadlines) before releasing the partition.
   */
  private retire(control: PartitionControl): void {
    // Its `drained` promise resolved when it was fenced; `isDrained` turns true only once its
    // pipeline finished (the aborted handlers returned).
    if (!control.isDrained) this.retired.add(control);
  }

  /** Streams retired by a seek of one of these partitions and still running. */
  private retiredOf(partitions: readonly TopicPartition[]): PartitionControl[] {
    const keys = new Set(partitions.map((p) => tpKey(p.topic, p.partition)));
    for (const c of this.retired) if (c.isDrained) this.retired.delete(c);
    return [...this.retired].filter((c) => keys.has(c.key));
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

  private forget(controls: PartitionControl[]): void {
    for (const c of controls) {
      if (this.owned.get(c.key) === c) this.owned.delete(c.key);
    }
    this.lastControl = undefined;
    this.lastPartition = -1;
    this.notifyChanged();
  }

  // ---------------------------------------------------------------------------------------------
  // Errors

  private onConsumeError(err: KafkaClientError): void {
    this.apply(classifyConsumeError(err), { err });
  }

  private onClientError(raw: LibrdKafkaError): void {
    const err = toKafkaError(raw, 'client error');
    this.apply(classifyClientError(err), { err, code: err.kafkaCode });
  }

  private onClientLog(log: ClientLog): void {
    this.apply(classifyLog(log, fatalCauseFromText), {
      fac: log.fac,
      severity: log.severity,
    });
  }

  /** Applies what librdkafka said (see client-events.ts); the only place it changes state. */
  private apply(verdict: Verdict, context: Record<string, unknown>): void {
    switch (verdict.kind) {
      case 'membership-lost':
        this.suspectLost = verdict.reason;
        this.logger.warn(
          'fac' in context ? { ...context, librdkafka: verdict.reason } : context,
          verdict.logMessage,
        );
        return;
      case 'authentication':
        this.onAuthenticationFailure(verdict.err);
        return;
      case 'fatal':
        this.logger.error({ ...context, code: verdict.err.kafkaCode }, verdict.logMessage);
        this.failFatal(verdict.err);
        return;
      case 'offset-out-of-range':
        this.logger.error(
          context,
          'offset out of range and auto.offset.reset=error: stopping (the partition would not be fetched again)',
        );
        this.failWith(verdict.err);
        return;
      case 'topic-unavailable':
        this.onTopicUnavailable(verdict.err, verdict.reason);
        return;
      case 'transient':
        this.onTransientError(verdict.err, verdict.what);
        return;
      case 'fatal-cause':
        if (this.fatalCause === undefined) {
          this.fatalCause = verdict.code;
          this.notifyChanged();
        }
        this.logger[levelOf(verdict.log.severity)](context, verdict.log.message);
        return;
      case 'offset-reset':
        this.onOffsetReset(verdict.reset);
        return;
      case 'log':
        this.logger[verdict.level](context, verdict.log.message);
        return;
      default:
        assertNever(verdict);
    }
  }

  /**
   * Ends the engine on a fatal error. librdkafka reports every fatal error as ERR__FATAL and names
   * the error behind it only in its FATAL log line, which arrives just after on another path: wait
   * for it (at most a second) so the consumer ends with the telling error.
   */
  private failFatal(err: KafkaClientError): void {
    if (this.failure || this.fatalPending) return;
    this.fatalPending = true;
    void this.waitUntil(
      () => err.kafkaCode !== Code.FATAL || this.fatalCause !== undefined,
      Date.now() + 1000,
    ).then(() => this.failWith(this.fatalError(err)));
  }

  /** A contested `group.instance.id` becomes a {@link FencedInstanceError}. */
  private fatalError(err: KafkaClientError): Error {
    const code = err.kafkaCode === Code.FATAL ? this.fatalCause : err.kafkaCode;
    if (code !== Code.FENCED_INSTANCE_ID && code !== Code.UNRELEASED_INSTANCE_ID) return err;
    const id = this.staticInstanceId ?? '';
    const failure = new FencedInstanceError(
      code === Code.UNRELEASED_INSTANCE_ID
        ? `group.instance.id "${id}" is still used by another member of group "${this.settings.groupId}" (UNRELEASED_INSTANCE_ID): this consumer was refused; give every static member its own group.instance.id`
        : `Another consumer joined group "${this.settings.groupId}" with group.instance.id "${id}" and fenced this one (FENCED_INSTANCE_ID); give every static member its own group.instance.id`,
      code,
      id,
      { cause: err },
    );
    this.logger.error(
      { err: failure, groupInstanceId: id },
      'static member fenced: closing the consumer',
    );
    return failure;
  }

  /** `group.instance.id` when this consumer is a static member. */
  private get staticInstanceId(): string | undefined {
    const id = (this.settings.globalConfig as Record<string, unknown>)['group.instance.id'];
    return typeof id === 'string' && id !== '' ? id : undefined;
  }

  /**
   * librdkafka treats a refused login as transient and reconnects forever; wrong credentials never
   * heal, so the consumer ends with an {@link AuthenticationError} instead.
   */
  private onAuthenticationFailure(err: KafkaClientError): void {
    const config = this.settings.globalConfig as Record<string, unknown>;
    const who = [
      `security.protocol=${String(config['security.protocol'] ?? 'plaintext')}`,
      (config['sasl.mechanisms'] ?? config['sasl.mechanism'])
        ? `sasl.mechanisms=${String(config['sasl.mechanisms'] ?? config['sasl.mechanism'])}`
        : undefined,
      config['sasl.username'] ? `sasl.username=${String(config['sasl.username'])}` : undefined,
    ]
      .filter(Boolean)
      .join(', ');
    const failure = new AuthenticationError(
      `Authentication failed against ${String(config['bootstrap.servers'])} (${who}): ${err.message}; check the credentials`,
      err.kafkaCode,
      { cause: err },
    );
    if (this.state.kind === 'connecting') {
      // The failed connect ends the engine with it (see doStart).
      this.authFailure ??= failure;
      return;
    }
    // Once running, one refusal can be transient (a token refresh, one broker's hiccup): it only
    // ends the consumer when the refusals last `connectTimeoutMs` without any progress meanwhile.
    const now = Date.now();
    if (this.authErrorsSince === undefined || this.lastProgressAt > this.authErrorsSince) {
      this.authErrorsSince = now;
    }
    if (now - this.authErrorsSince < this.settings.connectTimeoutMs) {
      this.onTransientError(err, 'authentication refused (ends the consumer if it lasts)');
      return;
    }
    this.clientErrors += 1;
    this.logger.error(
      { err: failure, since: new Date(this.authErrorsSince).toISOString() },
      'authentication refused for longer than connectTimeoutMs: closing the consumer',
    );
    this.failWith(failure);
  }

  /**
   * A subscribed topic is missing or not readable. The binding's error does not say which topic,
   * so the cluster's metadata is compared with the subscription; one event per topic.
   */
  private onTopicUnavailable(err: KafkaClientError, reason: 'unknown' | 'not-authorized'): void {
    if (this.topicCheckInFlight) return;
    this.topicCheckInFlight = true;
    void this.missingTopics()
      .then((missing) => {
        for (const topic of missing.length > 0 ? missing : [undefined]) {
          const key = `${reason}:${topic ?? '?'}`;
          if (this.unavailableTopics.has(key)) continue;
          this.unavailableTopics.add(key);
          if (reason === 'not-authorized') {
            this.logger.error(
              { err, topic },
              'not authorized to read a subscribed topic: nothing is consumed from it until the ACLs allow it',
            );
          } else {
            this.logger.warn(
              { err, topic },
              'a subscribed topic does not exist: nothing is consumed from it until it is created',
            );
          }
          this.publish({
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
    const names = this.settings.topics.filter((t) => !t.startsWith('^'));
    if (names.length === 0 || this.state.kind !== 'running') return Promise.resolve([]);
    return new Promise((resolve) => {
      try {
        this.client.raw.getMetadata({ timeout: this.settings.commitTimeoutMs }, (err, md) => {
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

  private onTransientError(err: KafkaClientError, what: string): void {
    this.clientErrors += 1;
    this.logger.warn({ err, code: err.kafkaCode, count: this.clientErrors }, what);
    this.publish({
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
  private onOffsetReset(reset: OffsetReset): void {
    const { topic, partition, from, resetTo, reason } = reset;
    this.offsetResets += 1;
    const report = (to: number | undefined): void => {
      this.logger.warn(
        { topic, partition, from, to, resetTo, reason },
        to !== undefined && from !== undefined && to > from
          ? `offset reset: records ${from}..${to - 1} were skipped (never processed by this group)`
          : 'offset reset: the consumer jumped to a new position; records may be re-read or skipped',
      );
      this.publish({
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
    if (logical === undefined || this.state.kind !== 'running') {
      report(reset.to);
      return;
    }
    // Reset to a logical offset: ask the cluster where that is now.
    void this.client.watermarks(topic, partition, this.settings.commitTimeoutMs).then(
      (w) => report(logical === 'BEGINNING' ? w.low : logical === 'END' ? w.high : undefined),
      () => report(undefined),
    );
  }

  /** Ends the engine with an error: closes gracefully, then errors the partition stream. */
  failWith(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    void this.close();
  }

  // ---------------------------------------------------------------------------------------------
  // Close

  /** Graceful shutdown, bounded by `timeoutMs` (default `closeTimeoutMs`). Idempotent. */
  close(timeoutMs: number = this.settings.closeTimeoutMs): Promise<void> {
    if (this.closePromise === undefined) {
      this.closePromise = this.doClose(timeoutMs);
    } else if (this.closeDeadline !== undefined && Date.now() + timeoutMs < this.closeDeadline) {
      // A later close() with a shorter deadline (a SIGTERM after an unsubscribe, say) wins: the
      // revoke and the waits below fit themselves to it.
      this.closeDeadline = Date.now() + timeoutMs;
      this.notifyChanged();
    }
    return this.closePromise;
  }

  /**
   * Waits for `condition` until `by()` — a time derived from the close deadline, which a later
   * close() may bring forward (then the wait starts over with the new time).
   */
  private async untilBeforeClose(
    condition: () => boolean,
    by: () => number,
    pollMs?: number,
  ): Promise<boolean> {
    for (;;) {
      const seen = this.closeDeadline;
      await this.waitUntil(() => condition() || this.closeDeadline !== seen, by(), pollMs);
      if (condition()) return true;
      if (this.closeDeadline === seen) return false;
    }
  }

  private async doClose(timeoutMs: number): Promise<void> {
    const startedAt = Date.now();
    this.closeStartedAt = startedAt;
    this.closeDeadline = startedAt + timeoutMs;
    this.notifyChanged(); // revokes in flight shorten their deadline to fit
    const deadline = (): number => this.closeDeadline ?? startedAt + timeoutMs;
    // Partitions must be released by then; what is left is for unsubscribing and disconnecting.
    const releaseBy = (): number =>
      deadline() - Math.min(2000, Math.floor((deadline() - startedAt) / 10));
    if (this.state.kind === 'idle') {
      this.state = { kind: 'closed' };
      this.finish();
      return;
    }
    if (this.state.kind === 'connecting') {
      this.state = { kind: 'closing' };
      await this.startPromise?.catch(() => undefined);
      if (!this.looping) {
        await this.client.disconnect().catch(() => undefined);
        this.state = { kind: 'closed' };
        this.finish();
        return;
      }
    }
    this.state = { kind: 'closing' };
    this.logger.info({ partitions: this.owned.size }, 'closing');
    // An assignment still waiting for its start offsets is answered now (then revoked below).
    this.answerPendingAssign('the consumer is closing');
    // Stop intake: no new messages reach the pipelines; the revoke below drains and commits.
    for (const c of this.owned.values()) c.end();
    // Leave the group only once every revoke in flight has drained, committed (confirmed) and
    // unassigned: a member that leaves first has its final commits refused (UNKNOWN_MEMBER_ID
    // under KIP-848) and the next owners redo that work. The consume loop keeps polling meanwhile.
    if (this.revokesInFlight > 0) {
      this.logger.info(
        { revokes: this.revokesInFlight },
        'closing: waiting for the revoke in flight to finish before leaving the group',
      );
      const settled = await this.untilBeforeClose(() => this.revokesInFlight === 0, releaseBy);
      if (!settled) {
        this.logger.warn(
          'close deadline passed while a rebalance was still in flight; leaving the group anyway (its unfinished work may be processed again: duplicates)',
        );
      }
      // An assignment that arrived meanwhile ended at once (closing); answer a pending one now.
      this.answerPendingAssign('the consumer is closing');
    }
    const active = [...this.owned.values()].filter((c) => c.state === 'ending' || c.active);
    if (this.staticInstanceId !== undefined && this.settings.groupProtocol === 'classic') {
      // librdkafka sends a LeaveGroup on unsubscribe() even for a static member (it skips it only
      // inside its own close), and the group would rebalance. Revoke locally instead, through
      // the same protocol (drain → commit → unassign); disconnect() then ends the session without
      // leaving, and the broker keeps the assignment for a restart within session.timeout.ms.
      this.logger.info(
        { groupInstanceId: this.staticInstanceId, partitions: list(active) },
        'static member closing: releasing the partitions locally without leaving the group',
      );
      if (active.length > 0) this.onRevoke(list(active));
    } else {
      try {
        this.client.raw.unsubscribe();
      } catch (err) {
        this.logger.warn({ err }, 'unsubscribe failed');
      }
    }
    {
      // Keep polling until librdkafka has nothing assigned and no rebalance is being handled
      // (a pending assign is answered, then revoked), so its close never waits on us.
      const released = await this.untilBeforeClose(
        () =>
          this.owned.size === 0 &&
          this.rebalanceTasks.size === 0 &&
          this.assignmentEmpty() &&
          [...this.retired].every((c) => c.isDrained),
        releaseBy,
        50,
      );
      if (!released) {
        this.logger.warn(
          { partitions: list([...this.owned.values()]) },
          'close deadline passed before every partition was released; unfinished work may be processed again (duplicates)',
        );
      }
    }
    if (this.committer.periodicInFlight)
      await this.untilBeforeClose(() => !this.committer.periodicInFlight, deadline);
    // A commit librdkafka has not answered yet (one that timed out here) could still be applied
    // after this member is gone and move the group's offset back: keep polling, within the
    // deadline, until every commit is answered.
    if (this.client.unansweredCount > 0) {
      const answered = await this.untilBeforeClose(
        () => this.client.unansweredCount === 0,
        deadline,
      );
      if (!answered) {
        this.logger.warn(
          { unanswered: this.client.unansweredCount },
          'closing with commits librdkafka has not answered: if the broker applies one later it may move the group offset back (the next owner would redo work: duplicates)',
        );
      }
    }
    this.looping = false;
    await this.loopDone;
    for (const pending of this.pendingSeeks.splice(0)) {
      pending.reject(pending.notOwned('the consumer closed before the seek could be applied'));
    }
    this.disconnecting = true;
    for (const c of this.owned.values()) c.fence('consumer closed');
    await this.withDeadline(this.client.disconnect(), Math.max(deadline() - Date.now(), 1000));
    await this.store?.close().catch(() => undefined);
    for (const c of this.owned.values()) c.release();
    this.owned.clear();
    this.state = { kind: 'closed' };
    this.logger.info({ durationMs: Date.now() - startedAt }, 'closed');
    this.finish();
  }

  private assignmentEmpty(): boolean {
    try {
      return this.client.raw.assignments().length === 0;
    } catch {
      return true;
    }
  }

  private finish(): void {
    this.rebalances.complete();
    this.events.complete();
    if (this.failure) this.partitionStreams.error(this.failure);
    else this.partitionStreams.complete();
  }

  // ---------------------------------------------------------------------------------------------
  // Waiting on conditions without per-message timers

  private notifyChanged(): void {
    this.conditions.changed();
  }

  private waitUntil(condition: () => boolean, deadline: number, pollMs?: number): Promise<boolean> {
    return this.conditions.until(condition, deadline, pollMs);
  }

  private async withDeadline(promise: Promise<void>, ms: number): Promise<void> {
    if (!(await settlesWithin(promise, ms)))
      this.logger.warn({ ms }, 'disconnect did not finish in time');
  }
}
