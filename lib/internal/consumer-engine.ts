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
  PartitionCommitResult,
  StartPosition,
  RebalanceEvent,
  RebalanceProtocol,
  TopicPartition,
} from '../types';
import { ConsumeCadence } from './consume-loop';
import { ConsumerClient } from './consumer-client';
import { NO_OBSERVER } from './engine-observer';
import type { EngineObserver } from './engine-observer';
import { toKafkaMessage } from './message';
import { PartitionControl } from './partition-control';
import type { FailureCounters, ProcessorHost } from './processor';
import { KafkaCompletedStore } from './completed-store';
import type { CompletedStore } from './completed-store';
import { connectionSettings } from '../config';
import type {
  Assignment,
  ConsumerFactory,
  LibrdKafkaError,
  Message,
  TopicPartitionOffset,
} from './rdkafka';
import {
  Code,
  OWNERSHIP_LOST_CODES,
  TERMINAL_CODES,
  defaultConsumerFactory,
  errorMessage,
  fatalCauseFromText,
  kafkaCodeOf,
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

const list = (tps: readonly TopicPartition[]): TopicPartition[] =>
  tps.map((t) => ({ topic: t.topic, partition: t.partition }));

/** Commit errors worth retrying while the revoke deadline allows. */
const RETRIABLE_COMMIT_CODES: ReadonlySet<number> = new Set([
  Code.COORDINATOR_NOT_AVAILABLE,
  Code.NOT_COORDINATOR,
  Code.TIMED_OUT,
  Code.TRANSPORT,
  Code.ALL_BROKERS_DOWN,
  Code.STALE_MEMBER_EPOCH, // KIP-848: the heartbeat librdkafka expedites refreshes the epoch
  Code.WAIT_COORD, // no coordinator for session.timeout.ms (a coordinator failover)
  14, // COORDINATOR_LOAD_IN_PROGRESS
  7, // REQUEST_TIMED_OUT
]);

/**
 * librdkafka log facilities announcing that this member left or was dropped from the group:
 * max.poll.interval.ms exceeded, and the classic session timeout.
 */
const LOST_LOG_FACILITIES: ReadonlySet<string> = new Set(['MAXPOLL', 'SESSTMOUT']);

/** Codes meaning the cluster refused the client's credentials. */
const AUTH_CODES: ReadonlySet<number> = new Set([
  Code.AUTHENTICATION,
  Code.SASL_AUTHENTICATION_FAILED,
]);

/**
 * librdkafka's warning (facility OFFSET) when an error forces an offset reset, e.g.
 * `orders [3]: offset reset (at offset 42 (leader epoch 0), broker 1) to offset BEGINNING (leader
 * epoch -1): fetch failed due to requested offset not available on the broker: Broker: Offset out of range`,
 * or `... to cached BEGINNING offset offset 120 (leader epoch -1): ...`.
 */
const OFFSET_RESET_LOG =
  /(\S+) \[(\d+)\]: offset reset \(at offset (\S+) \(leader epoch -?\d+\), broker -?\d+\) to (?:cached (\w+) offset )?offset (\S+) \(leader epoch -?\d+\): (.*)$/;

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
  /** Partitions the user paused (kept across rebalances), and whether new ones start paused. */
  private readonly userPaused = new Set<string>();
  private userPausedAll = false;
  /** An assignment whose start offsets are being looked up (librdkafka waits for its assign call). */
  private pendingAssign:
    { generation: number; partitions: TopicPartition[]; applied: boolean } | undefined;
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
  /** Memories loaded for the assignment being applied, by partition. */
  private readonly loadedMemories = new Map<string, readonly number[]>();
  /** Messages skipped because a previous owner had finished them. */
  redoneAvoided = 0;
  /** One control per assigned partition per assignment; completes (or errors) when the engine ends. */
  readonly partitionStreams = new Subject<PartitionControl>();
  readonly client: ConsumerClient;

  private state: EngineState = { kind: 'idle' };
  private generation = 0;
  /** Current controls by partition: active ones and ones being revoked. */
  private readonly owned = new Map<string, PartitionControl>();
  private readonly rebalanceTasks = new Set<Promise<void>>();
  /** Revokes being drained and committed (close waits for them before leaving the group). */
  private revokesInFlight = 0;
  private suspectLost: string | undefined;
  private commitInFlight: Promise<void> | undefined;
  private lastCommitAt = 0;
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
  private readonly changed = new Set<() => void>();
  private readonly resumeAtMessages: number;
  private readonly resumeAtBytes: number;
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
    this.cadence = new ConsumeCadence(settings.consumeBatchSize, settings.consumeTimeoutMs);
    this.resumeAtMessages = Math.floor(settings.maxBufferedMessages * settings.resumeThreshold);
    this.resumeAtBytes = Math.floor(settings.maxBufferedBytes * settings.resumeThreshold);
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
      this.maybeCommit();
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
      if (
        !control.paused &&
        (control.ledger.window >= this.settings.maxBufferedMessages ||
          control.bufferedBytes >= this.settings.maxBufferedBytes)
      ) {
        this.setPaused(control, true);
      }
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
    if (
      control.paused &&
      control.ledger.window <= this.resumeAtMessages &&
      control.bufferedBytes <= this.resumeAtBytes
    ) {
      this.setPaused(control, false);
    }
    this.notifyChanged();
  };

  private setPaused(control: PartitionControl, paused: boolean): void {
    if (control.state === 'released' || this.disconnecting) return;
    if (this.owned.get(control.key) !== control) return; // a newer assignment owns the partition
    try {
      const tp = [{ topic: control.topic, partition: control.partition }];
      // A partition the user paused stays paused when backpressure lifts.
      if (paused) this.client.raw.pause(tp);
      else if (!this.userPaused.has(control.key)) this.client.raw.resume(tp);
      control.paused = paused;
      this.partitionLogger(control).debug(
        { buffered: control.ledger.window, bytes: control.bufferedBytes },
        paused ? 'paused partition (buffer full)' : 'resumed partition',
      );
    } catch (err) {
      this.partitionLogger(control).warn(
        { err },
        paused
          ? 'pause failed: the partition keeps fetching past its buffer limits (memory grows) until the next attempt'
          : 'resume failed: the partition stays paused until the next attempt or rebalance',
      );
    }
  }

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

  private maybeCommit(): void {
    if (this.commitInFlight || this.disconnecting) return;
    const now = Date.now();
    if (now - this.lastCommitAt < this.settings.commitIntervalMs) return;
    this.lastCommitAt = now;
    const batch: { control: PartitionControl; offset: number }[] = [];
    /** Streams whose completed-offset memory is to be written (with the offset it belongs to). */
    const remembered: { control: PartitionControl; offset: number }[] = [];
    for (const control of this.owned.values()) {
      // Partitions being revoked get their final commit from the revoke protocol. A partition
      // that delivered nothing yet commits its chosen start (onAssign, seek, reset to latest).
      if (!control.active) continue;
      const offset = control.ledger.committable();
      if (offset === undefined) continue;
      if (offset === control.lastCommitted) {
        if (this.store && control.lastCommitted !== undefined) remembered.push({ control, offset });
        continue;
      }
      if (!this.client.canCommit(control.topic, control.partition, offset)) {
        // An earlier commit of this partition is unanswered (it timed out here): librdkafka may
        // still send it, and if it landed after this one the offset would move backwards.
        this.partitionLogger(control).debug(
          { offset, unanswered: this.client.unanswered(control.topic, control.partition) },
          'periodic commit held back until an earlier commit of the partition is answered',
        );
        continue;
      }
      batch.push({ control, offset });
    }
    if (batch.length === 0 && remembered.length === 0) return;
    let offsets: TopicPartitionOffset[] = [];
    let sent: { control: PartitionControl; offset: number }[] = [];
    const sentAt = Date.now();
    this.commitInFlight = this.saveMemories([...batch, ...remembered])
      .then(() => {
        // Decided again now that the memory is written: a partition revoked meanwhile gets its
        // final commit from the revoke protocol, and nothing may be committed for it after that.
        sent = batch.filter(
          ({ control, offset }) =>
            control.active &&
            this.owned.get(control.key) === control &&
            this.client.canCommit(control.topic, control.partition, offset),
        );
        offsets = sent.map(({ control, offset }) => ({
          topic: control.topic,
          partition: control.partition,
          offset,
        }));
        return this.client.commit(offsets);
      })
      .then(() => {
        if (offsets.length === 0) return; // only a memory was written
        this.lastProgressAt = Date.now();
        this.observer.commit('periodic', offsets, Date.now() - sentAt);
        for (const { control, offset } of sent) {
          if (control.lastCommitted === undefined || offset > control.lastCommitted) {
            control.lastCommitted = offset;
          }
        }
        this.logger.debug({ offsets }, 'committed');
      })
      .catch((err: unknown) => {
        this.observer.commit('periodic', offsets, Date.now() - sentAt, err);
        // Not a sign of a lost assignment by itself: a cooperative rebalance bumps the generation
        // and refuses commits (ILLEGAL_GENERATION) while the partitions are still ours. Only the
        // revoke-time commit decides "lost".
        this.logger.warn(
          { err, offsets },
          'periodic commit failed; it is retried at the next interval (a crash before then may cause duplicate processing)',
        );
      })
      .finally(() => {
        this.commitInFlight = undefined;
        this.notifyChanged();
      });
  }

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
    if (
      partitions.length === 0 ||
      this.disconnecting ||
      (this.settings.onAssign === undefined && !this.resetsToLatest() && !this.store)
    ) {
      this.applyAssign(generation, partitions, new Map());
      return;
    }
    // librdkafka waits for the assign call: look up start offsets first and put them in it.
    let hookFailure: Error | undefined;
    const pending = { generation, partitions, applied: false };
    this.pendingAssign = pending;
    const task = this.boundedStartOffsets(partitions, generation)
      .catch((err: unknown) => {
        if (err instanceof StartPositionError) {
          hookFailure = err;
        } else {
          this.logger.warn(
            { err, partitions },
            'could not look up start offsets; an idle partition that moves may let the next owner skip records produced meanwhile (auto.offset.reset=latest)',
          );
        }
        return new Map<string, number>();
      })
      .then((starts) => {
        if (this.pendingAssign === pending) this.pendingAssign = undefined;
        // Answered already, without start offsets (see answerPendingAssign), or not.
        if (!pending.applied) {
          pending.applied = true;
          this.applyAssign(generation, partitions, starts);
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
    this.applyAssign(pending.generation, pending.partitions, new Map());
  }

  /**
   * {@link startOffsets} within a deadline (librdkafka — and the whole group — waits for the assign
   * call meanwhile). With an `onAssign` hook, any failure to honour its choices (a lookup that
   * failed or timed out) is a {@link StartPositionError}: silently starting elsewhere could skip or
   * repeat what the application asked for.
   */
  private async boundedStartOffsets(
    partitions: TopicPartition[],
    generation: number,
  ): Promise<Map<string, number>> {
    const limitMs = Math.min(this.settings.drainTimeoutMs, 2 * this.settings.commitTimeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const hooked = this.settings.onAssign !== undefined;
    const first = partitions[0] as TopicPartition;
    try {
      return await Promise.race([
        this.startOffsets(partitions, generation),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                hooked
                  ? new StartPositionError(
                      `Start positions were not resolved within ${limitMs} ms (onAssign hook and offset lookups)`,
                      { topic: first.topic, partition: first.partition },
                    )
                  : new Error(`start offset lookup timed out after ${limitMs} ms`),
              ),
            limitMs,
          );
        }),
      ]);
    } catch (err) {
      if (!hooked || err instanceof StartPositionError) throw err;
      throw new StartPositionError(
        `Could not resolve the start positions the onAssign hook asked for: ${errorMessage(err)}`,
        { topic: first.topic, partition: first.partition },
        { cause: err },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Start offsets to put in the assign call: the `onAssign` hook's choices, and under
   * `auto.offset.reset=latest` (librdkafka's default) the end offset of partitions the group has
   * no committed offset for — so that if this member processes nothing before the partition
   * moves, committing that start keeps the next owner from resetting to a later end and skipping
   * the records in between.
   */
  private async startOffsets(
    partitions: TopicPartition[],
    generation: number,
  ): Promise<Map<string, number>> {
    const starts = new Map<string, number>();
    const committed = await this.client.committed(partitions, this.settings.commitTimeoutMs);
    if (this.store) await this.loadMemories(partitions, committed);
    const hook = this.settings.onAssign;
    await Promise.all(
      partitions.map(async (tp) => {
        const o = committed.find(
          (x) => x.topic === tp.topic && x.partition === tp.partition,
        )?.offset;
        const hasCommitted = typeof o === 'number' && o >= 0;
        let position: StartPosition | undefined;
        if (hook) {
          try {
            position = await hook({
              topic: tp.topic,
              partition: tp.partition,
              committed: hasCommitted ? o : undefined,
              generation,
            });
          } catch (err) {
            throw new StartPositionError(
              `The onAssign hook failed for ${tp.topic}[${tp.partition}]: ${errorMessage(err)}`,
              { topic: tp.topic, partition: tp.partition },
              { cause: err },
            );
          }
        }
        if (position === undefined || position === 'committed') {
          if (hasCommitted || !this.resetsToLatest()) return;
          position = 'latest';
        }
        starts.set(tpKey(tp.topic, tp.partition), await this.resolvePosition(tp, position));
      }),
    );
    return starts;
  }

  /**
   * Loads the completed-offset memories of partitions being assigned. A memory applies only while
   * the committed offset is the one it was written for; anything else (a failed commit after the
   * write, offsets reset by an operator) is ignored, and the work is redone rather than skipped.
   */
  private async loadMemories(
    partitions: TopicPartition[],
    committed: { topic: string; partition: number; offset?: number }[],
  ): Promise<void> {
    for (const tp of partitions) this.loadedMemories.delete(tpKey(tp.topic, tp.partition));
    let memories: Map<string, { base: number; completed: readonly number[] }>;
    try {
      memories = await (this.store as CompletedStore).load(partitions);
    } catch (err) {
      this.logger.warn(
        { err, partitions },
        'could not read the completed-offset memory: work finished out of order by the previous owner will be redone (duplicates)',
      );
      return;
    }
    for (const tp of partitions) {
      const key = tpKey(tp.topic, tp.partition);
      const memory = memories.get(key);
      const c = committed.find((x) => x.topic === tp.topic && x.partition === tp.partition)?.offset;
      if (!memory || memory.completed.length === 0) continue;
      if (typeof c !== 'number' || c !== memory.base) {
        this.logger.info(
          { topic: tp.topic, partition: tp.partition, memoryBase: memory.base, committed: c },
          'completed-offset memory belongs to another committed offset: ignored',
        );
        continue;
      }
      this.loadedMemories.set(key, memory.completed);
    }
  }

  /**
   * Writes the completed-offset memory of streams about to be committed, and waits for the
   * broker's confirmation: a memory must never be newer than nothing, nor a commit run ahead of
   * its memory. A failed write is logged; the commit goes ahead (the memory then no longer
   * matches the committed offset and is ignored: duplicates, never a skip).
   */
  private async saveMemories(
    batch: { control: PartitionControl; offset: number }[],
  ): Promise<void> {
    const store = this.store;
    if (!store) return;
    const entries: (TopicPartition & { base: number; completed: number[] })[] = [];
    const written: PartitionControl[] = [];
    const signatures: string[] = [];
    for (const { control, offset } of batch) {
      const completed = control.ledger.completedAbove(Number.MAX_SAFE_INTEGER);
      if (completed.length === 0 && !control.memoryWritten) continue;
      const signature = `${offset}:${completed.length}:${completed[completed.length - 1] ?? -1}`;
      if (signature === control.memorySignature) continue; // unchanged since the last write
      entries.push({ topic: control.topic, partition: control.partition, base: offset, completed });
      written.push(control);
      signatures.push(signature);
    }
    if (entries.length === 0) return;
    try {
      await store.save(entries);
      written.forEach((c, i) => {
        c.memoryWritten = (entries[i]?.completed.length ?? 0) > 0;
        c.memorySignature = signatures[i];
      });
    } catch (err) {
      this.logger.warn(
        { err, partitions: list(written) },
        'could not write the completed-offset memory: the next owner will redo work finished out of order (duplicates)',
      );
    }
  }

  /** The offset a {@link StartPosition} stands for now. */
  private async resolvePosition(tp: TopicPartition, position: StartPosition): Promise<number> {
    const timeout = this.settings.commitTimeoutMs;
    if (position === 'earliest' || position === 'latest') {
      const w = await this.client.watermarks(tp.topic, tp.partition, timeout);
      return position === 'earliest' ? w.low : w.high;
    }
    if (position === 'committed') {
      const [c] = await this.client.committed([tp], timeout);
      if (typeof c?.offset === 'number' && c.offset >= 0) return c.offset;
      throw new StartPositionError(`${tp.topic}[${tp.partition}] has no committed offset`, {
        topic: tp.topic,
        partition: tp.partition,
      });
    }
    if (typeof position === 'object' && position !== null) {
      if ('offset' in position && Number.isInteger(position.offset) && position.offset >= 0) {
        return position.offset;
      }
      if ('timestamp' in position && Number.isFinite(position.timestamp)) {
        const offset = await this.client.offsetForTime(tp, position.timestamp, timeout);
        return offset >= 0
          ? offset
          : (await this.client.watermarks(tp.topic, tp.partition, timeout)).high;
      }
    }
    throw new StartPositionError(
      `Expected a start position ('committed', 'earliest', 'latest', { offset } or { timestamp }) for ${tp.topic}[${tp.partition}], got ${JSON.stringify(position)}`,
      { topic: tp.topic, partition: tp.partition },
    );
  }

  private resetsToLatest(): boolean {
    const raw =
      (this.settings.topicConfig as Record<string, unknown>)['auto.offset.reset'] ??
      (this.settings.globalConfig as Record<string, unknown>)['auto.offset.reset'] ??
      'largest';
    return raw === 'largest' || raw === 'latest' || raw === 'end';
  }

  private applyAssign(
    generation: number,
    partitions: TopicPartition[],
    starts: Map<string, number>,
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
      const remembered = this.loadedMemories.get(key);
      if (remembered) {
        control.skip = new Set(remembered);
        this.loadedMemories.delete(key);
      }
      this.owned.set(key, control);
      controls.push(control);
    }
    this.lastControl = undefined;
    this.lastPartition = -1;
    // librdkafka keeps application pauses across revoke and re-assignment: set each partition's
    // state explicitly — paused if the user paused it (or everything), else running.
    if (this.userPausedAll) for (const c of controls) this.userPaused.add(c.key);
    const held = partitions.filter((tp) => this.userPaused.has(tpKey(tp.topic, tp.partition)));
    const running = partitions.filter((tp) => !this.userPaused.has(tpKey(tp.topic, tp.partition)));
    try {
      if (running.length > 0) this.client.raw.resume(running);
      if (held.length > 0) this.client.raw.pause(held);
    } catch (err) {
      this.logger.warn(
        { err, running, held },
        'pause/resume of newly assigned partitions failed: a partition paused by the application may be fetched, or one left paused by librdkafka may not be, until the next pause()/resume() or rebalance',
      );
    }
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
    this.answerPendingAssign('a revoke arrived');
    const generation = ++this.generation;
    const protocol = this.protocol();
    const partitions = list(assignment);
    const controls = partitions
      .map((tp) => this.owned.get(tpKey(tp.topic, tp.partition)))
      .filter((c): c is PartitionControl => c !== undefined);
    this.lastControl = undefined;
    this.lastPartition = -1;

    if (this.disconnecting) {
      // The final revoke fired by disconnect(): only unassign works now (pitfall 11).
      for (const c of controls) c.fence('consumer closed');
      this.unassign(partitions, protocol, generation);
      this.forget(controls);
      return;
    }
    const lostReason = this.suspectLost;
    if (lostReason !== undefined) {
      this.suspectLost = undefined;
      this.lose(partitions, controls, protocol, generation, lostReason);
      return;
    }

    const startedAt = Date.now();
    const inFlight = controls.reduce((n, c) => n + c.inFlight, 0);
    // A static member closing keeps its assignment at the broker (no LeaveGroup under classic;
    // under KIP-848 a leave with epoch -2): nobody else gets these partitions before its session
    // times out.
    const handedOver = !(this.state.kind === 'closing' && this.staticInstanceId !== undefined);
    this.logger.info({ generation, protocol, partitions, inFlight }, 'revoking');
    this.emit({ type: 'revoking', generation, protocol, partitions, at: startedAt });
    for (const c of controls) c.end();
    // Ask librdkafka at once whether this revoke is a loss (fenced by a heartbeat, the session
    // expired): then others may own these partitions already, and draining would only redo
    // their work. The answer is local and comes with the next consume call.
    const lostProbe = this.client.probeAssignmentLost(
      Math.max(
        1,
        Math.min(this.settings.commitTimeoutMs, Math.floor(this.settings.drainTimeoutMs / 4)),
      ),
    );
    const task = this.revoke(
      partitions,
      controls,
      protocol,
      generation,
      startedAt,
      inFlight,
      handedOver,
      lostProbe,
    )
      .catch((err: unknown) => {
        this.logger.error({ err, generation }, 'revoke failed');
        this.failWith(err instanceof Error ? err : new Error(String(err)));
      })
      .finally(() => {
        this.revokesInFlight -= 1;
        this.rebalanceTasks.delete(task);
        this.notifyChanged();
      });
    this.revokesInFlight += 1;
    this.rebalanceTasks.add(task);
  }

  /** drain → commit (confirmed) → unassign, within the drain deadline. */
  private async revoke(
    partitions: TopicPartition[],
    controls: PartitionControl[],
    protocol: RebalanceProtocol,
    generation: number,
    startedAt: number,
    inFlight: number,
    handedOver: boolean,
    lostProbe: Promise<boolean | undefined>,
  ): Promise<void> {
    let lostByProbe = false;
    void lostProbe.then((answer) => {
      if (answer !== true) return;
      lostByProbe = true;
      // Abort the handlers now: their work no longer counts, and nothing will be committed.
      for (const c of controls) c.fence('partition lost: librdkafka reports the assignment lost');
      this.notifyChanged();
    });
    const total = this.settings.drainTimeoutMs;
    const commitReserve = Math.min(this.settings.commitTimeoutMs, Math.floor(total / 4));
    // The revoke deadline is tied to max.poll.interval.ms; a close() that has to finish sooner
    // (closeTimeoutMs, a SIGTERM grace period) brings it forward, so the final commit still
    // happens before the consumer disconnects.
    let deadline = startedAt + total;
    const isDrained = (): boolean =>
      controls.every((c) => c.isDrained) && this.retiredOf(partitions).length === 0;
    let drained = false;
    for (;;) {
      deadline = Math.min(startedAt + total, this.revokeDeadlineWhileClosing());
      const commitShare = Math.min(commitReserve, Math.floor((deadline - startedAt) / 4));
      const closingSince = this.closeDeadline;
      // Streams replaced by a seek of these partitions still running aborted handlers count too.
      drained = await this.waitUntil(
        () => isDrained() || lostByProbe || this.closeDeadline !== closingSince,
        deadline - commitShare,
      );
      drained = isDrained();
      if (drained || lostByProbe || this.closeDeadline === closingSince) break;
    }
    // The answer normally came long before the drain ended; wait for it a little if not (it is
    // served by the next consume call).
    if (!lostByProbe)
      await this.within(
        lostProbe.then(() => undefined),
        Math.min(200, deadline - Date.now()),
      );
    if (lostByProbe) {
      this.logger.warn(
        { generation, partitions, inFlight, waitedMs: Date.now() - startedAt },
        'librdkafka reports the assignment lost (this member was fenced or its session expired): handlers aborted, nothing committed',
      );
      this.lose(
        partitions,
        controls,
        protocol,
        generation,
        'assignment lost (fenced by the group coordinator, or the session expired)',
      );
      return;
    }
    const stragglers = controls.filter((c) => !c.isDrained);
    const stragglerCount = stragglers.reduce((n, c) => n + c.inFlight, 0);
    const stuck = stragglers.map((c) => c.describe());
    for (const c of stragglers) c.fence('drain deadline passed');
    const drainedAt = Date.now();
    if (!drained) {
      this.logger.warn(
        {
          generation,
          partitions: list(stragglers),
          stragglers: stragglerCount,
          stuck,
          drainTimeoutMs: total,
        },
        'drain deadline passed: committing what is contiguous and releasing the partitions; the next owner may process the unfinished messages again (duplicates)',
      );
    }
    this.logger.info(
      { generation, partitions, inFlight, durationMs: drainedAt - startedAt, timedOut: !drained },
      'drained',
    );
    this.emit({
      type: 'drained',
      generation,
      protocol,
      partitions,
      inFlight,
      stragglers: stragglerCount,
      timedOut: !drained,
      durationMs: drainedAt - startedAt,
      at: drainedAt,
    });

    // A periodic commit sent earlier must settle first so it cannot land after the final one;
    // it may take at most half of the commit reserve.
    if (this.commitInFlight) {
      await this.waitUntil(
        () => this.commitInFlight === undefined,
        deadline - Math.floor(commitReserve / 2),
      );
    }
    // Never commit for a partition a newer assignment owns (a stale revoke, Backbeat BB-835): the
    // broker would take it under the current generation and could move the offset backwards.
    const stillOurs = controls.filter((c) => this.owned.get(c.key) === c && this.stillAssigned(c));
    const results = await this.commitFinal(stillOurs, deadline);
    for (const c of controls) {
      if (!stillOurs.includes(c)) {
        results.push({
          topic: c.topic,
          partition: c.partition,
          status: 'lost',
          reason: 'reassigned by a newer rebalance before the revoke finished',
        });
      }
    }
    const committedAt = Date.now();
    const lost = results.filter(
      (r) =>
        r.status === 'lost' &&
        stillOurs.some((c) => c.partition === r.partition && c.topic === r.topic),
    );
    this.logger.info(
      { generation, results, durationMs: committedAt - drainedAt },
      lost.length > 0 ? 'final commit refused: partitions lost' : 'committed',
    );
    this.emit({
      type: 'committed',
      generation,
      protocol,
      partitions,
      results,
      durationMs: committedAt - drainedAt,
      at: committedAt,
    });

    this.resumeIfPaused(stillOurs);
    this.unassign(partitions, protocol, generation);
    for (const c of controls) c.release();
    this.forget(controls);
    const revokedAt = Date.now();
    if (lost.length > 0) {
      const reason = lost[0]?.status === 'lost' ? lost[0].reason : 'commit refused';
      this.logger.warn(
        { generation, partitions, reason },
        'partitions lost: the final commit was refused; work since the last confirmed commit will be redone by the next owner (duplicates)',
      );
      this.emit({ type: 'lost', generation, protocol, partitions, reason, at: revokedAt });
    } else {
      this.logger.info(
        {
          generation,
          partitions,
          durationMs: revokedAt - committedAt,
          totalMs: revokedAt - startedAt,
          handedOver,
          ...(handedOver ? {} : { groupInstanceId: this.staticInstanceId }),
        },
        handedOver
          ? 'revoked'
          : 'revoked locally, not handed over: the group keeps these partitions for this group.instance.id until its session times out (a restart within it resumes them without a rebalance)',
      );
      this.emit({
        type: 'revoked',
        generation,
        protocol,
        partitions,
        durationMs: revokedAt - committedAt,
        totalMs: revokedAt - startedAt,
        handedOver,
        at: revokedAt,
      });
    }
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

  /** Commits the final offsets of revoked partitions and waits for the broker's answer. */
  private async commitFinal(
    controls: PartitionControl[],
    deadline: number,
  ): Promise<PartitionCommitResult[]> {
    const results = new Map<PartitionControl, PartitionCommitResult>();
    const toCommit: { control: PartitionControl; offset: number }[] = [];
    const unchanged: { control: PartitionControl; offset: number }[] = [];
    for (const c of controls) {
      const offset = c.ledger.committable();
      if (offset !== undefined && offset === c.lastCommitted)
        unchanged.push({ control: c, offset });
      if (offset === undefined || offset === c.lastCommitted) {
        results.set(c, {
          topic: c.topic,
          partition: c.partition,
          status: 'unchanged',
          offset: c.lastCommitted,
        });
      } else {
        toCommit.push({ control: c, offset });
      }
    }
    // The memory of work finished out of order goes first (confirmed), then the commit. Its write
    // may take at most half of what is left: a memory landing after the commit is still true (the
    // next owner applies it only while the committed offset equals its base).
    const memoryWritten = await this.within(
      this.saveMemories([...toCommit, ...unchanged]),
      Math.floor((deadline - Date.now()) / 2),
    );
    if (!memoryWritten) {
      this.logger.warn(
        { partitions: list(controls) },
        'the completed-offset memory write did not finish in time: committing without waiting for it (if it is lost, the next owner redoes work finished out of order: duplicates)',
      );
    }
    // An earlier commit of a partition that librdkafka has not answered (one that timed out here)
    // could land after this one and move the offset backwards: wait for its answer first.
    const overtakable = (): { control: PartitionControl; offset: number }[] =>
      toCommit.filter(
        ({ control, offset }) => !this.client.canCommit(control.topic, control.partition, offset),
      );
    if (overtakable().length > 0) {
      await this.waitUntil(() => overtakable().length === 0, deadline - 100);
      for (const entry of overtakable()) {
        const { control, offset } = entry;
        const earlier = this.client.unanswered(control.topic, control.partition);
        const reason = `an earlier commit of offset ${earlier.join(', ')} is still unanswered; committing ${offset} now could be overtaken by it`;
        this.partitionLogger(control).warn(
          { offset, unanswered: earlier },
          'final commit not sent: an earlier commit of the partition is still unanswered by librdkafka; the next owner may process these messages again (duplicates)',
        );
        results.set(control, {
          topic: control.topic,
          partition: control.partition,
          status: 'failed',
          offset,
          reason,
        });
        toCommit.splice(toCommit.indexOf(entry), 1);
      }
    }
    let attempt = 0;
    while (toCommit.length > 0) {
      attempt += 1;
      const offsets = toCommit.map(({ control, offset }) => ({
        topic: control.topic,
        partition: control.partition,
        offset,
      }));
      const remaining = deadline - Date.now();
      const sentAt = Date.now();
      try {
        await this.client.commit(
          offsets,
          Math.max(1, Math.min(this.settings.commitTimeoutMs, remaining)),
        );
        this.observer.commit('revoke', offsets, Date.now() - sentAt);
        for (const { control, offset } of toCommit) {
          control.lastCommitted = offset;
          results.set(control, {
            topic: control.topic,
            partition: control.partition,
            status: 'committed',
            offset,
          });
        }
        break;
      } catch (err) {
        this.observer.commit('revoke', offsets, Date.now() - sentAt, err);
        const code = kafkaCodeOf(err);
        const reason = errorMessage(err);
        if (code !== undefined && OWNERSHIP_LOST_CODES.has(code)) {
          for (const { control } of toCommit) {
            control.fence('lost');
            results.set(control, {
              topic: control.topic,
              partition: control.partition,
              status: 'lost',
              reason,
            });
          }
          break;
        }
        const retriable =
          (code !== undefined && RETRIABLE_COMMIT_CODES.has(code)) ||
          (err as { code?: string }).code === 'ERR_RKC_TIMEOUT';
        // Refused credentials will not heal within the deadline: one attempt, then release.
        const hopeless = this.failure instanceof AuthenticationError;
        if (retriable && !hopeless && Date.now() + 100 < deadline) {
          this.logger.warn({ err, attempt, offsets }, 'final commit failed; retrying');
          await new Promise((r) => setTimeout(r, Math.min(100 * attempt, 1000)));
          continue;
        }
        const topics = [...new Set(toCommit.map(({ control }) => control.topic))];
        if (code === Code.UNKNOWN_TOPIC_OR_PART && topics.length > 1) {
          // A deleted topic fails the whole commit (node-rdkafka drops the per-partition errors):
          // commit topic by topic so the live ones are confirmed.
          for (const topic of topics) {
            const own = toCommit.filter(({ control }) => control.topic === topic);
            const split = await this.commitFinal(
              own.map(({ control }) => control),
              deadline,
            );
            own.forEach(({ control }, i) => results.set(control, split[i]!));
          }
          break;
        }
        this.logger.warn(
          { err, offsets, code },
          code === Code.REBALANCE_IN_PROGRESS
            ? 'final commit rejected (rebalance in progress): not committed; the next owner will process these messages again (duplicates)'
            : code === Code.UNKNOWN_TOPIC_OR_PART
              ? 'final commit refused: unknown topic or partition (the topic was deleted, or the coordinator does not know it yet); if it still exists, the next owner will process these messages again (duplicates)'
              : 'final commit failed: not committed; the next owner will process these messages again (duplicates)',
        );
        for (const { control, offset } of toCommit) {
          results.set(control, {
            topic: control.topic,
            partition: control.partition,
            status: 'failed',
            offset,
            reason,
          });
        }
        break;
      }
    }
    return controls.map((c) => results.get(c)!);
  }

  /** Partitions taken away without a chance to commit. */
  private lose(
    partitions: TopicPartition[],
    controls: PartitionControl[],
    protocol: RebalanceProtocol,
    generation: number,
    reason: string,
  ): void {
    for (const c of controls) c.fence(`partition lost: ${reason}`);
    this.resumeIfPaused(controls);
    this.unassign(partitions, protocol, generation);
    this.forget(controls);
    this.logger.warn(
      { generation, partitions, reason },
      'partitions lost: nothing committed; their unfinished work will be redone by the next owner',
    );
    this.emit({ type: 'lost', generation, protocol, partitions, reason, at: Date.now() });
  }

  private resumeIfPaused(controls: PartitionControl[]): void {
    for (const c of controls) if (c.paused) this.setPaused(c, false);
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
    const offset = await this.resolvePosition(tp, position);
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
      if (old.paused && !this.userPaused.has(s.key)) {
        try {
          this.client.raw.resume([{ topic: s.tp.topic, partition: s.tp.partition }]);
        } catch (err) {
          this.logger.debug({ err }, 'resume after seek failed');
        }
      }
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
    const targets = tps ?? [...this.owned.values()];
    if (tps === undefined) this.userPausedAll = true;
    for (const tp of targets) this.userPaused.add(tpKey(tp.topic, tp.partition));
    const owned = targets.filter((tp) => this.owned.has(tpKey(tp.topic, tp.partition)));
    if (owned.length === 0 || this.state.kind !== 'running') return;
    try {
      this.client.raw.pause(list(owned));
    } catch (err) {
      this.logger.warn({ err, partitions: list(owned) }, 'pause failed');
    }
    this.logger.info({ partitions: list(owned) }, 'paused by the application');
  }

  /**
   * Resumes what `pause()` paused (everything without `tps`). A partition also paused by the
   * library for backpressure stays paused until its buffer drains.
   */
  resume(tps?: readonly TopicPartition[]): void {
    if (tps === undefined) this.userPausedAll = false;
    const keys = tps ? tps.map((tp) => tpKey(tp.topic, tp.partition)) : [...this.userPaused];
    for (const k of keys) this.userPaused.delete(k);
    const ready = keys
      .map((k) => this.owned.get(k))
      .filter((c): c is PartitionControl => c !== undefined && !c.paused);
    if (ready.length === 0 || this.state.kind !== 'running') return;
    try {
      this.client.raw.resume(list(ready));
    } catch (err) {
      this.logger.warn({ err, partitions: list(ready) }, 'resume failed');
    }
    this.logger.info({ partitions: list(ready) }, 'resumed by the application');
  }

  /** Partitions paused by the application (owned now or not). */
  pausedByUser(): TopicPartition[] {
    return [...this.userPaused].map((k) => {
      const [topic = '', partition = '0'] = k.split('\u0000');
      return { topic, partition: Number(partition) };
    });
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
    const code = err.kafkaCode;
    if (code === Code.MAX_POLL_EXCEEDED) {
      this.suspectLost = 'max.poll.interval.ms exceeded';
      this.logger.warn(
        { err },
        'max.poll.interval.ms exceeded: the assignment will be treated as lost',
      );
    } else if (AUTH_CODES.has(code)) {
      this.onAuthenticationFailure(err);
    } else if (TERMINAL_CODES.has(code) || err.fatal) {
      this.logger.error({ err, code }, 'fatal consumer error');
      this.failFatal(err);
    } else if (code === Code.AUTO_OFFSET_RESET) {
      // Only raised with auto.offset.reset=error: librdkafka stops fetching the partition.
      this.logger.error(
        { err },
        'offset out of range and auto.offset.reset=error: stopping (the partition would not be fetched again)',
      );
      this.failWith(err);
    } else if (
      code === Code.UNKNOWN_TOPIC_OR_PART ||
      code === Code.UNKNOWN_TOPIC ||
      code === Code.TOPIC_AUTHORIZATION_FAILED
    ) {
      this.onTopicUnavailable(err);
    } else {
      this.onTransientError(err, 'consume error');
    }
  }

  private onClientError(raw: LibrdKafkaError): void {
    const err = toKafkaError(raw, 'client error');
    const code = err.kafkaCode;
    if (
      code === Code.MAX_POLL_EXCEEDED ||
      code === Code.FENCED_MEMBER_EPOCH ||
      code === Code.UNKNOWN_MEMBER_ID
    ) {
      this.suspectLost = err.message;
      this.logger.warn({ err, code }, 'group membership lost: the next revoke is treated as lost');
      return;
    }
    if (AUTH_CODES.has(code)) {
      this.onAuthenticationFailure(err);
      return;
    }
    if (err.fatal || TERMINAL_CODES.has(code)) {
      this.logger.error({ err, code }, 'fatal client error');
      this.failFatal(err);
      return;
    }
    // Transport errors, all brokers down, …: librdkafka reconnects by itself.
    this.onTransientError(err, 'client error (librdkafka retries)');
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
  private onTopicUnavailable(err: KafkaClientError): void {
    const reason = err.kafkaCode === Code.TOPIC_AUTHORIZATION_FAILED ? 'not-authorized' : 'unknown';
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
  private onOffsetReset(message: string): boolean {
    const m = OFFSET_RESET_LOG.exec(message);
    if (!m) return false;
    const [, topic = '', partitionText = '', fromText = '', cached, toText = '', reason = ''] = m;
    const partition = Number(partitionText);
    const from = /^-?\d+$/.test(fromText) ? Number(fromText) : undefined;
    const numericTo = /^\d+$/.test(toText) ? Number(toText) : undefined;
    const resetTo = cached ?? (numericTo === undefined ? toText : 'offset');
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
    if (numericTo !== undefined || this.state.kind !== 'running') {
      report(numericTo);
      return true;
    }
    // Reset to a logical offset: ask the cluster where that is now.
    const logical = toText.toUpperCase();
    void this.client.watermarks(topic, partition, this.settings.commitTimeoutMs).then(
      (w) => report(logical === 'BEGINNING' ? w.low : logical === 'END' ? w.high : undefined),
      () => report(undefined),
    );
    return true;
  }

  private onClientLog(log: { severity: number; fac: string; message: string }): void {
    const entry = { fac: log.fac, severity: log.severity };
    if (log.fac === 'FATAL' && this.fatalCause === undefined) {
      this.fatalCause = fatalCauseFromText(log.message);
      this.notifyChanged();
    }
    if (LOST_LOG_FACILITIES.has(log.fac)) {
      // consume(n) drops errors such as MAX_POLL_EXCEEDED when its batch also held messages;
      // librdkafka's log line about it still arrives.
      this.suspectLost = `${log.fac}: ${log.message}`;
      this.logger.warn(
        { ...entry, librdkafka: log.message },
        'group membership lost: the next revoke is treated as lost',
      );
      return;
    }
    if (log.fac === 'OFFSET' && log.severity <= 4 && this.onOffsetReset(log.message)) return;
    if (log.severity <= 2) this.logger.error(entry, log.message);
    else if (log.severity <= 4) this.logger.warn(entry, log.message);
    else if (log.severity <= 6) this.logger.info(entry, log.message);
    else this.logger.debug(entry, log.message);
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
    this.closePromise ??= this.doClose(timeoutMs);
    return this.closePromise;
  }

  private async doClose(timeoutMs: number): Promise<void> {
    const startedAt = Date.now();
    const deadline = startedAt + timeoutMs;
    this.closeStartedAt = startedAt;
    this.closeDeadline = deadline;
    this.notifyChanged(); // revokes in flight shorten their deadline to fit
    // Partitions must be released by then; what is left is for unsubscribing and disconnecting.
    const releaseBy = deadline - Math.min(2000, Math.floor(timeoutMs / 10));
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
      const settled = await this.waitUntil(() => this.revokesInFlight === 0, releaseBy);
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
      const released = await this.waitUntil(
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
    if (this.commitInFlight)
      await this.waitUntil(() => this.commitInFlight === undefined, deadline);
    this.looping = false;
    await this.loopDone;
    for (const pending of this.pendingSeeks.splice(0)) {
      pending.reject(pending.notOwned('the consumer closed before the seek could be applied'));
    }
    this.disconnecting = true;
    for (const c of this.owned.values()) c.fence('consumer closed');
    await this.withDeadline(this.client.disconnect(), Math.max(deadline - Date.now(), 1000));
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
    if (this.changed.size === 0) return;
    for (const fn of this.changed) fn();
  }

  /** Resolves true once `condition` holds, or false when the deadline passes. */
  private waitUntil(condition: () => boolean, deadline: number, pollMs?: number): Promise<boolean> {
    if (condition()) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const check = (): void => {
        if (condition()) done(true);
      };
      const timer = setTimeout(() => done(condition()), Math.max(0, deadline - Date.now()));
      const poll = pollMs === undefined ? undefined : setInterval(check, pollMs);
      const done = (value: boolean): void => {
        clearTimeout(timer);
        if (poll) clearInterval(poll);
        this.changed.delete(check);
        resolve(value);
      };
      this.changed.add(check);
    });
  }

  /** Whether `promise` settled within `ms` (its outcome is left to it). */
  private async within(promise: Promise<void>, ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        promise.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), Math.max(0, ms));
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async withDeadline(promise: Promise<void>, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      promise,
      new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.logger.warn({ ms }, 'disconnect did not finish in time');
          resolve();
        }, ms);
      }),
    ]);
    clearTimeout(timer);
  }
}
