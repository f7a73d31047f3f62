/**
 * The consumer engine: the single owner of the node-rdkafka client and of the consumer's
 * lifecycle. It assembles the units around it (the commit strategy is chosen once, when it
 * starts), runs the consume loop (consume-loop.ts) and closes through close-sequence.ts. See
 * docs/internals.md.
 */
import { Subject } from 'rxjs';
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { NotAssignedError } from '../../errors';
import type { FetchWakeMetrics } from '../../metrics';
import type {
  ConsumerEvent,
  PartitionCommitResult,
  StartPosition,
  RebalanceEvent,
  TopicPartition,
} from '../../types';
import {
  classifyClientError,
  classifyConsumeError,
  classifyLog,
} from '../binding/client-error-classifier';
import type { ClientLog, Verdict } from '../binding/client-error-classifier';
import type { ConsumerClient } from '../binding/consumer-client';
import { bindingInfo } from '../binding/binding';
import type { OffsetCommits } from '../commit/committer';
import { NO_OBSERVER } from '../observe/engine-observer';
import type { EngineObserver } from '../observe/engine-observer';
import type { PartitionControl } from '../partition/partition-control';
import type { FailureCounters, ProcessorHost } from '../process/processor';
import type { CompletedStore } from '../commit/completed-store';
import type { ConsumerFactory, LibrdKafkaError } from '../binding/rdkafka';
import { errorMessage, fatalCauseFromText, toKafkaError } from '../binding/rdkafka';
import { closeRunning } from './close-sequence';
import { commitNow } from './commit-now';
import { consumeLoop } from './consume-loop';
import { assembleUnits, buildBase } from './engine-parts';
import type { BaseParts, RebalanceUnits } from './engine-parts';
import { applyVerdict } from './verdicts';
import type { EngineState } from './engine-state';

export type { EngineState } from './engine-state';

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
  /** Receives metrics hooks (see engine-observer.ts). */
  observer: EngineObserver = NO_OBSERVER;
  /** Whether an assignment (even an empty one) was received: the member joined its group. */
  assignedOnce = false;

  private state: EngineState = { kind: 'idle' };
  /** The answers to start() and close() (both idempotent). */
  private startPromise: Promise<void> | undefined;
  private closePromise: Promise<void> | undefined;
  /** A failure before close() began (close picks it up). */
  private earlyFailure: Error | undefined;
  /** Last time the consumer made progress: messages fetched or a commit confirmed. */
  private lastProgressAt = 0;
  /** The parts built at construction (engine-parts.ts). */
  private readonly base: BaseParts;
  /** Where offsets go: the group, unless processTransactional() routed them (commitThrough). */
  private commits: OffsetCommits;
  /** Assembled by start(), which fixes the commit strategy (undefined before). */
  private units: RebalanceUnits | undefined;

  constructor(
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    factory?: ConsumerFactory,
    storeFactory?: (settings: ConsumerSettings) => CompletedStore,
  ) {
    this.base = buildBase(settings, logger, factory, storeFactory, {
      stateKind: () => this.state.kind,
      failure: () => this.failure,
      failWith: (err) => this.failWith(err),
      consumeError: (err) => this.apply(classifyConsumeError(err), { err }),
      rebalance: (err, assignment) => this.units?.rebalance.onRebalance(err, assignment),
      progressed: () => (this.lastProgressAt = Date.now()),
      lastProgressAt: () => this.lastProgressAt,
      observer: () => this.observer,
      publish: (event) => this.publish(event),
    });
    this.client = this.base.client;
    this.commits = this.base.groupCommits;
    this.rebalances.subscribe((e) => {
      if (e.type === 'assigned') this.assignedOnce = true;
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
    const w = this.base.fetchWaker;
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

  /** Messages that arrived for partitions not (or no longer) assigned and were dropped. */
  get lateMessagesDropped(): number {
    return this.base.dispatcher.lateDropped;
  }

  /**
   * Chooses the commit strategy: the consumer's offsets go through `commits` instead of to the
   * group (processTransactional()). Only before the consumer starts, which fixes the choice.
   */
  commitThrough(commits: OffsetCommits): void {
    if (this.state.kind !== 'idle') throw new Error('commitThrough() after the consumer started');
    this.commits = commits;
    // Offsets in transactions: every start is read stable and put in the assign call
    // (start-positions.ts, on librdkafka reading around an open transaction).
    this.base.startPositions.stableStarts = true;
  }

  /** Something changed outside the engine (a transaction settled): re-check what waits. */
  changed(): void {
    this.base.conditions.changed();
  }

  /** Whether the stream still owns its partition (no seek or newer assignment replaced it). */
  owns(control: PartitionControl): boolean {
    return this.base.assignments.owns(control);
  }

  /** The controls of the partitions owned now, including ones being revoked (for metrics). */
  controls(): PartitionControl[] {
    return this.base.assignments.controls();
  }

  /** True while an assignment or a revoke is being handled. */
  get rebalancing(): boolean {
    return this.units?.rebalance.busy ?? false;
  }

  /** Why this member is believed dropped from the group, until the next revoke or assignment. */
  get membershipLost(): string | undefined {
    return this.units?.rebalance.membershipLost;
  }

  /** Fetch positions of the owned partitions (undefined where librdkafka does not know it yet). */
  positions(): { topic: string; partition: number; offset: number | undefined }[] {
    return this.base.positions.owned(this.state.kind === 'running');
  }

  /** Connects, subscribes and starts the consume loop. Idempotent. */
  start(): Promise<void> {
    this.startPromise ??= this.doStart();
    return this.startPromise;
  }

  private async doStart(): Promise<void> {
    if (this.state.kind !== 'idle') return;
    this.state = { kind: 'connecting' };
    // The commit strategy is fixed from here on (commitThrough() refuses once started).
    const units = assembleUnits(this.base, this.commits, this.rebalances, this.partitionStreams);
    this.units = units;
    this.logger.info(
      {
        topics: this.settings.topics,
        binding: bindingInfo(
          this.settings.binding,
          this.client.raw,
          this.settings.sharedBatchBuffers,
        ),
      },
      'connecting',
    );
    try {
      await this.client.connect();
    } catch (err) {
      // librdkafka's error events (an authentication failure, say) are dispatched around the
      // failed connect's callback, and on a loaded machine well after it: wait for a refusal up to
      // a second, then end with the most telling error (a ConnectError names no refusal).
      const { incidents, conditions } = this.base;
      await conditions.until(() => incidents.refusedWhileConnecting, Date.now() + 1000, 25);
      const refusal = this.base.incidents.takeConnectRefusal();
      const failure = refusal ?? (err instanceof Error ? err : new Error(errorMessage(err)));
      if (failure === err) this.logger.error({ err }, 'could not connect');
      this.failWith(failure);
      return;
    }
    this.base.incidents.takeConnectRefusal(); // connected after all: an earlier refusal was transient
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
      .then(() => this.loop(units))
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
    return s.kind === 'running' || (s.kind === 'closing' && this.base.shutdown.stage === 'closing');
  }

  /**
   * Whether the raw consumer may still be handed to a call that uses it later (not once the close
   * disconnects it).
   */
  get clientUsable(): boolean {
    return this.base.shutdown.stage !== 'disconnecting';
  }

  private loop(units: RebalanceUnits): Promise<void> {
    return consumeLoop(this.base, units, {
      polling: () => this.polling,
      closing: () => this.state.kind === 'closing',
      polled: (at, progressed) => {
        this.lastPollAt = at;
        if (progressed) this.lastProgressAt = at;
      },
      observer: () => this.observer,
      failWith: (err) => this.failWith(err),
    });
  }

  /** Publishes a {@link ConsumerEvent}. */
  publish(event: ConsumerEvent): void {
    this.events.next(event);
  }

  // ---------------------------------------------------------------------------------------------
  // User controls: seek, pause, resume

  /** Commits what has been processed now, confirmed by the broker (see commit-now.ts). */
  commit(): Promise<PartitionCommitResult[]> {
    const { assignments, conditions } = this.base;
    const timeoutMs = this.settings.commitTimeoutMs;
    return commitNow(this.state.kind, this.units?.commits, assignments, conditions, timeoutMs);
  }

  /** Moves an owned partition to `position` (see seeks.ts); resolves with the offset. */
  seek(tp: TopicPartition, position: StartPosition): Promise<number> {
    if (this.units === undefined)
      return Promise.reject(
        new NotAssignedError(
          `Cannot seek ${tp.topic}[${tp.partition}]: this consumer does not own it right now`,
          { topic: tp.topic, partition: tp.partition },
        ),
      );
    return this.units.seeks.request(tp, position);
  }

  /** Pauses fetching of the given partitions (all owned ones, and future ones, without `tps`). */
  pause(tps?: readonly TopicPartition[]): void {
    this.base.flow.pause(tps);
  }

  /** Resumes what `pause()` paused (everything without `tps`); see {@link FlowControl.resume}. */
  resume(tps?: readonly TopicPartition[]): void {
    this.base.flow.resume(tps);
  }

  /** Partitions paused by the application (owned now or not). */
  pausedByUser(): TopicPartition[] {
    return this.base.flow.pausedByUser();
  }

  /** Applies a verdict on what librdkafka reported (see verdicts.ts). */
  private apply(verdict: Verdict, context: Record<string, unknown>): void {
    applyVerdict(verdict, context, {
      logger: this.logger,
      incidents: this.base.incidents,
      membership: this.units?.rebalance,
      shutdown: this.base.shutdown,
    });
  }

  /** Why the consumer ended or is ending, when with an error. */
  get failure(): Error | undefined {
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
      // revoke and the waits of the close fit themselves to it.
      this.base.shutdown.shorten(timeoutMs);
    }
    return this.closePromise;
  }

  private async doClose(timeoutMs: number): Promise<void> {
    const before = this.state;
    const { shutdown, client } = this.base;
    if (before.kind === 'idle' || before.kind === 'closed') {
      shutdown.disconnecting();
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
    shutdown.begin(startedAt, timeoutMs); // revokes in flight shorten their deadline to fit
    const units = this.units;
    if (before.kind === 'connecting' || units === undefined) {
      // The start sees the closing state after its connect and starts no loop.
      await this.startPromise?.catch(() => undefined);
      shutdown.disconnecting();
      await client.readsSettled();
      await client.disconnect().catch(() => undefined);
    } else {
      await closeRunning({ ...this.base, ...units, loop: closing.loop });
      this.logger.info({ durationMs: Date.now() - startedAt }, 'closed');
    }
    this.state = { kind: 'closed', failure: closing.failure };
    this.finish();
  }

  private finish(): void {
    this.rebalances.complete();
    this.events.complete();
    const failure = this.failure;
    if (failure) this.partitionStreams.error(failure);
    else this.partitionStreams.complete();
  }
}
