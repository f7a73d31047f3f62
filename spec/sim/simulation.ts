/**
 * A deterministic simulation of a consumer group: the real library (`ReactiveConsumer`, through
 * its `consumerFactory` seam) runs as several members over member-mode fakes that share one
 * broker (logs, committed offsets), on a virtual clock. A seeded scheduler fires world events
 * between the library's own timers: the coordinator's revokes and assigns (eager, cooperative,
 * KIP-848), `close()`, unsubscribing or `takeUntil` on the pipeline, `seek()`, `pause()`/`resume()`,
 * handlers finishing in random order (or failing, then retried), commits answered late, with
 * retriable errors, or held past their timeout and applied later. Every step is checked by the
 * {@link InvariantChecker}; a run ends with a calm phase (everything must get processed and
 * committed) and a close of every member.
 *
 * Phases: chaos (random actions for `chaosMs`) → calm (no new trouble, everything resumed and
 * assigned, until every offset is processed and committed) → close (every member closes).
 */
import { Subject, takeUntil } from 'rxjs';
import type { Subscription } from 'rxjs';
import pino from 'pino';
import type { Logger } from 'pino';
import type { Message, TopicPartitionOffset } from 'node-rdkafka';
import { ReactiveConsumer } from '../../lib';
import type { KafkaMessage, RebalanceEvent } from '../../lib';
import type { CompletedMemory } from '../../lib/internal/commit/completed-codec';
import type { CompletedStore } from '../../lib/internal/commit/completed-store';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import { FakeConsumer } from '../fakes/fake-consumer';
import type { Call, CommitPlan, PendingCallback } from '../fakes/fake-consumer';
import { TIMINGS } from './config';
import type { ActionKind, SimConfig } from './config';
import { Coordinator } from './coordinator';
import { InvariantChecker } from './invariants';
import type { Violation } from './invariants';
import { Random } from './random';
import { VirtualClock } from '../../lib/testing/virtual-clock';

export const TOPIC = 't';

export interface SimOptions {
  fullTrace?: boolean;
  mutate?: (fake: FakeConsumer) => void;
  /**
   * Chance that a commit the broker would confirm is answered with an error of unknown outcome
   * (timed out, transport failure, COORDINATOR_NOT_AVAILABLE) instead — applied late after the
   * member's next commit (within the broker's window) or never. Drawn from a stream of its own,
   * so a seed's other choices stay what they are without it. @default 0
   */
  unknownOutcomes?: number;
}
/** closeTimeoutMs given to every member: close() must resolve within it. */
const CLOSE_TIMEOUT_MS = TIMINGS.drainTimeoutMs + 15_000;
/** Longest a rebalance callback may wait for its answer: the hold bound of a revoke whose commit librdkafka still holds (shortly before max.poll.interval.ms), some slack. */
const CALLBACK_BOUND_MS = TIMINGS.maxPollIntervalMs + 1000;
/** Longest the calm phase may take to process and commit everything. */
const CALM_BOUND_MS = 60_000;
const TRACE_TAIL = 400;
/** Everything processed and committed for this long (past every commit interval) ends the calm phase. */
const CALM_SETTLE_MS = 250;

const keyOf = (p: number): string => `${TOPIC}[${p}]`;
const partitionOf = (k: string): number => Number(/\[(\d+)\]/.exec(k)?.[1] ?? -1);

interface PendingHandler {
  readonly life: Life;
  readonly partition: number;
  readonly offset: number;
  timer: number;
  settle(): void;
}

interface Life {
  readonly id: string;
  readonly slot: number;
  readonly consumer: ReactiveConsumer;
  readonly fake: FakeConsumer;
  readonly stop$: Subject<void>;
  sub: Subscription | undefined;
  pipeline: 'running' | 'completed' | 'errored' | 'detached';
  closeStartedAt: number | undefined;
  closedAt: number | undefined;
  readonly handlers: Set<PendingHandler>;
  readonly reported: Set<PendingCallback>;
  closeReported: boolean;
  /** Until when the member cannot reach the coordinator: its commits wait in librdkafka's queue. */
  unreachableUntil: number | undefined;
}

export interface SimResult {
  readonly config: SimConfig;
  readonly violations: readonly Violation[];
  readonly graceful: boolean;
  readonly notGraceful: readonly string[];
  /** The last lines of the trace (all of it with `fullTrace`). */
  readonly trace: readonly string[];
  readonly virtualMs: number;
  readonly steps: number;
  /** Handler successes, commits applied, rebalance callbacks fired (to see what a run exercised). */
  readonly stats: Readonly<Record<string, number>>;
}

/** An in-memory completed-offset store whose writes the scheduler confirms after a delay. */
class SimStore implements CompletedStore {
  readonly records = new Map<string, CompletedMemory>();
  constructor(private readonly delay: () => number) {}
  load(partitions: readonly { topic: string; partition: number }[]) {
    const out = new Map<string, CompletedMemory>();
    for (const p of partitions) {
      const r = this.records.get(tpKey(p.topic, p.partition));
      if (r) out.set(tpKey(p.topic, p.partition), r);
    }
    return Promise.resolve(out);
  }
  save(entries: readonly ({ topic: string; partition: number } & CompletedMemory)[]) {
    const copy = entries.map((e) => ({ ...e, completed: [...e.completed] }));
    return new Promise<void>((resolve) => {
      setTimeout(() => {
        for (const e of copy) {
          this.records.set(tpKey(e.topic, e.partition), { base: e.base, completed: e.completed });
        }
        resolve();
      }, this.delay());
    });
  }
  close() {
    return Promise.resolve();
  }
}

export class Simulation {
  private readonly clock = new VirtualClock({ deterministic: true });
  private readonly rnd: Random;
  private readonly libRandom: Random;
  private readonly checker: InvariantChecker;
  private readonly trace: string[] = [];
  private readonly logs = new Map<string, Message[]>();
  private readonly commits = new Map<string, number>();
  private readonly coordinator: Coordinator<Life>;
  private readonly lives: Life[] = [];
  private readonly livesPerSlot = new Map<number, number>();
  private readonly attempts = new Map<string, number>();
  private readonly pendingHandlers = new Set<PendingHandler>();
  private readonly unhandled: unknown[] = [];
  private readonly stats: Record<string, number> = {};
  private readonly store: SimStore | undefined;
  private readonly logger: Logger;
  /** Draws the unknown-outcome answers (SimOptions.unknownOutcomes) apart from the world's stream. */
  private readonly outcomeRnd: Random;
  private phase: 'chaos' | 'calm' | 'close' | 'done' = 'chaos';
  private startedAt = 0;
  private steps = 0;
  private calmSince = 0;
  private settledSince: number | undefined;
  /** An action to run from inside the library's next handler call or rebalance event. */
  private reentrant: ActionKind | undefined;
  private closeSince = 0;

  constructor(
    private readonly cfg: SimConfig,
    private readonly options: SimOptions = {},
  ) {
    this.rnd = new Random(cfg.seed ^ 0x5eed);
    this.outcomeRnd = new Random(cfg.seed ^ 0x0dd);
    this.libRandom = this.rnd.fork();
    this.checker = new InvariantChecker(
      () => this.clock.now - this.startedAt,
      (p) => this.logs.get(keyOf(p))?.length ?? 0,
      (v) => this.log(`!! VIOLATION ${v.kind}: ${v.message}`),
    );
    this.store = cfg.rememberCompleted ? new SimStore(() => this.storeDelay()) : undefined;
    this.coordinator = new Coordinator<Life>({
      protocol: cfg.protocol,
      partitions: cfg.partitions,
      topic: TOPIC,
      rnd: this.rnd,
      members: () => this.lives,
      defer: (fn) => void this.clock.schedule(0, fn),
      log: (line) => this.log(line),
      count: (what) => this.count(what),
    });
    this.logger = pino(
      { level: 'warn', base: undefined, timestamp: false },
      { write: (line: string) => this.onLibraryLog(line) },
    );
  }

  async run(): Promise<SimResult> {
    const savedListeners = process.listeners('unhandledRejection');
    process.removeAllListeners('unhandledRejection');
    const onUnhandled = (reason: unknown): void => {
      this.unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    this.clock.install();
    try {
      this.startedAt = this.clock.now;
      await this.loop();
    } finally {
      this.clock.uninstall();
      process.removeListener('unhandledRejection', onUnhandled);
      for (const l of savedListeners) process.on('unhandledRejection', l);
    }
    return {
      config: this.cfg,
      violations: this.checker.violations,
      graceful: this.checker.graceful,
      notGraceful: this.checker.notGraceful,
      trace: this.options.fullTrace ? this.trace : this.trace.slice(-TRACE_TAIL),
      virtualMs: this.clock.now - this.startedAt,
      steps: this.steps,
      stats: this.stats,
    };
  }

  // --- the scheduler ----------------------------------------------------------------------------

  private async loop(): Promise<void> {
    this.cfg.messages.forEach((n, p) => this.produce(p, n));
    for (let slot = 0; slot < this.cfg.members; slot++) this.startLife(slot);
    this.log(`chaos phase for ${this.cfg.chaosMs} ms`);
    this.scheduleAction();
    this.clock.schedule(this.cfg.chaosMs, () => this.enterCalm());
    await this.clock.settle();
    while (this.phase !== 'done') {
      const more = await this.clock.step();
      this.steps += 1;
      this.checkStep();
      if (this.checker.violations.length > 0) return;
      if (!more) {
        this.checker.fail('close-failed', 'the world ran out of timers before every member closed');
        return;
      }
    }
  }

  private scheduleAction(): void {
    const gap = this.rnd.int(0, 2 * this.cfg.actionGapMs);
    this.clock.schedule(gap, () => {
      if (this.phase !== 'chaos') return;
      this.act(this.pickAction());
      this.scheduleAction();
    });
  }

  private pickAction(): ActionKind | undefined {
    return this.rnd.weighted(Object.entries(this.cfg.weights) as [ActionKind, number][]);
  }

  private act(kind: ActionKind | undefined, depth = 0): void {
    switch (kind) {
      case undefined:
        return;
      case 'rebalance':
        this.coordinator.rebalance();
        return;
      case 'close':
      case 'unsubscribe':
      case 'takeUntil': {
        const life = this.pickRunning();
        if (life) this.stop(life, kind);
        return;
      }
      case 'restart':
        this.restart();
        return;
      case 'seek':
        this.seek();
        return;
      case 'pause':
      case 'resume':
        this.pauseOrResume(kind);
        return;
      case 'settle': {
        const all = [...this.pendingHandlers];
        if (all.length > 0) this.rnd.pick(all).settle();
        return;
      }
      case 'fence':
        this.fence();
        return;
      case 'reentrant':
        if (depth > 0) return;
        this.reentrant = this.rnd.pick<ActionKind>([
          'seek',
          'pause',
          'resume',
          'close',
          'unsubscribe',
          'takeUntil',
          'rebalance',
        ]);
        return;
      case 'combo':
        if (depth > 0) return;
        this.log('combo: two actions at the same instant');
        this.act(this.pickAction(), 1);
        this.act(this.pickAction(), 1);
        return;
    }
  }

  private runReentrant(where: string): void {
    const kind = this.reentrant;
    if (kind === undefined || this.phase !== 'chaos') return;
    this.reentrant = undefined;
    this.count('reentrant');
    this.log(`reentrant ${kind} ${where}`);
    this.act(kind, 1);
  }

  /** How long a completed-offset memory write takes (slow ones cross a revoke). */
  private storeDelay(): number {
    if (this.phase !== 'chaos') return 0;
    if (this.rnd.chance(this.cfg.chaos ? 0.15 : 0.05)) {
      const ms = this.rnd.int(100, this.cfg.chaos ? TIMINGS.drainTimeoutMs + 1000 : 1000);
      if (ms > 1000) this.checker.markNotGraceful(`a memory write takes ${ms} ms`);
      this.count('slowMemoryWrites');
      return ms;
    }
    return this.rnd.int(0, 20);
  }

  private checkStep(): void {
    const now = this.clock.now;
    for (const err of this.clock.uncaught.splice(0)) {
      this.checker.fail('uncaught-error', `a timer callback threw: ${describeError(err)}`);
    }
    for (const err of this.unhandled.splice(0)) {
      this.checker.fail('uncaught-error', `unhandled rejection: ${describeError(err)}`);
    }
    for (const life of this.lives) {
      for (const c of life.fake.unanswered()) {
        if (now - c.at > CALLBACK_BOUND_MS && !life.reported.has(c)) {
          life.reported.add(c);
          this.checker.fail(
            'unanswered-callback',
            `${life.id}: the ${c.kind} of [${c.keys.map(partitionOf).join(',')}] fired ${now - c.at} ms ago is still unanswered`,
          );
        }
      }
      if (
        life.closeStartedAt !== undefined &&
        life.closedAt === undefined &&
        !life.closeReported &&
        now - life.closeStartedAt > CLOSE_TIMEOUT_MS + 1000
      ) {
        life.closeReported = true;
        this.checker.fail(
          'close-failed',
          `${life.id}: close() has not resolved ${now - life.closeStartedAt} ms after it was called (closeTimeoutMs ${CLOSE_TIMEOUT_MS})`,
        );
      }
    }
    if (this.phase === 'close') this.checkClosed();
  }

  // --- phases -------------------------------------------------------------------------------------

  private enterCalm(): void {
    if (this.phase !== 'chaos') return;
    this.phase = 'calm';
    this.calmSince = this.clock.now;
    this.log('calm phase: no new trouble; resume, assign and finish everything');
    for (const life of this.lives) life.fake.releaseHeld();
    for (const life of this.running()) life.consumer.resume();
    const tick = (): void => {
      if (this.phase !== 'calm') return;
      if (this.running().length === 0) this.startLife(0);
      for (const life of this.lives) life.fake.releaseHeld();
      this.coordinator.assignFree();
      this.checkCalm();
      this.clock.schedule(5, tick);
    };
    tick();
  }

  private checkCalm(): void {
    const missing = this.checker.missing(this.cfg.partitions);
    const settled =
      missing.length === 0 &&
      this.pendingHandlers.size === 0 &&
      this.lives.every((l) => l.fake.unanswered().length === 0);
    if (!settled) this.settledSince = undefined;
    else this.settledSince ??= this.clock.now;
    // Settled for a while: a seek back (a replay) shows in the committed offset at the next commit.
    if (this.settledSince !== undefined && this.clock.now - this.settledSince >= CALM_SETTLE_MS) {
      this.enterClose();
      return;
    }
    if (this.clock.now - this.calmSince > CALM_BOUND_MS) {
      this.checker.fail(
        'not-all-processed',
        `${CALM_BOUND_MS} ms into the calm phase: ${missing.join('; ')}; holders ${this.coordinator.describe()}`,
      );
    }
  }

  private enterClose(): void {
    this.phase = 'close';
    this.closeSince = this.clock.now;
    this.log('close phase: every member closes');
    for (const life of this.running()) this.stop(life, 'close');
  }

  private checkClosed(): void {
    const open = this.lives.filter((l) => l.closedAt === undefined);
    if (open.length > 0 || this.pendingHandlers.size > 0) return;
    const lastClose = Math.max(...this.lives.map((l) => l.closedAt ?? 0));
    const hanging = this.lives.filter((l) => l.pipeline === 'running');
    if (hanging.length > 0 && this.clock.now - lastClose < 2000) return;
    for (const l of hanging) {
      this.checker.fail(
        'pipeline-failed',
        `${l.id}: the process() pipeline did not complete after close`,
      );
    }
    for (const l of this.lives) {
      for (const c of l.fake.unanswered()) {
        if (l.reported.has(c)) continue;
        this.checker.fail(
          'unanswered-callback',
          `${l.id}: the ${c.kind} of [${c.keys.map(partitionOf).join(',')}] was never answered`,
        );
      }
    }
    const missing = this.checker.missing(this.cfg.partitions);
    if (missing.length > 0) {
      this.checker.fail('not-all-processed', `after every member closed: ${missing.join('; ')}`);
    }
    this.log(`done (${this.clock.now - this.closeSince} ms to close)`);
    this.phase = 'done';
  }

  // --- members --------------------------------------------------------------------------------

  private produce(partition: number, count: number): void {
    const log: Message[] = [];
    for (let offset = 0; offset < count; offset++) {
      log.push({
        topic: TOPIC,
        partition,
        offset,
        key: this.cfg.keys === 0 ? null : Buffer.from(`k${offset % this.cfg.keys}`),
        value: Buffer.from(`v${offset}`),
        size: 8,
        timestamp: offset,
      } as Message);
    }
    this.logs.set(keyOf(partition), log);
  }

  private running(): Life[] {
    return this.lives.filter((l) => l.closeStartedAt === undefined && l.pipeline === 'running');
  }

  private pickRunning(): Life | undefined {
    const r = this.running();
    return r.length > 0 ? this.rnd.pick(r) : undefined;
  }

  private startLife(slot: number): Life {
    const n = (this.livesPerSlot.get(slot) ?? 0) + 1;
    this.livesPerSlot.set(slot, n);
    const id = `m${slot}#${n}`;
    let fake: FakeConsumer | undefined;
    const holder: { life?: Life } = {};
    const factory = (g: Record<string, unknown>): FakeConsumer => {
      fake = new FakeConsumer(g, {
        protocol: this.cfg.protocol === 'eager' ? 'EAGER' : 'COOPERATIVE',
        ...(this.cfg.protocol === 'kip848' ? { groupProtocol: 'consumer' as const } : {}),
        member: true,
        shared: { logs: this.logs, commits: this.commits },
        lateApplyWindowMs: TIMINGS.lateCommitWindowMs,
        commitPlan: (offsets) => this.plan(holder.life as Life, offsets),
        hooks: {
          call: (c) => this.onCall(holder.life as Life, c),
          commitSent: (offsets, plan) => this.onCommitSent(holder.life as Life, offsets, plan),
          commitApplied: (offsets, error, late) =>
            this.onCommitApplied(holder.life as Life, offsets, error, late === true),
          released: (keys) => this.coordinator.released(holder.life as Life, keys),
          left: () => this.coordinator.dropped(holder.life as Life, 'left the group'),
        },
      });
      this.options.mutate?.(fake);
      return fake;
    };
    const consumer = new ReactiveConsumer(
      {
        config: {
          'bootstrap.servers': 'sim:9092',
          'group.id': 'sim',
          ...(this.cfg.protocol === 'kip848' ? { 'group.protocol': 'consumer' } : {}),
          'max.poll.interval.ms': TIMINGS.maxPollIntervalMs,
        },
        topicConfig: { 'auto.offset.reset': 'earliest' },
        topics: [TOPIC],
        logger: this.logger.child({ life: id }),
        commitIntervalMs: this.cfg.commitIntervalMs,
        commitTimeoutMs: TIMINGS.commitTimeoutMs,
        lateCommitWindowMs: TIMINGS.lateCommitWindowMs,
        drainTimeoutMs: TIMINGS.drainTimeoutMs,
        closeTimeoutMs: CLOSE_TIMEOUT_MS,
        consumeTimeoutMs: TIMINGS.consumeTimeoutMs,
        consumeBatchSize: this.cfg.consumeBatchSize,
        maxBufferedMessages: this.cfg.maxBufferedMessages,
        stallThresholdMs: 0,
        ...(this.cfg.rememberCompleted ? { rememberCompleted: { topic: 'sim.completed' } } : {}),
      },
      {
        consumerFactory: factory as never,
        ...(this.store ? { storeFactory: () => this.store as CompletedStore } : {}),
        random: () => this.libRandom.next(),
      },
    );
    if (!fake) throw new Error('the consumer did not create its client');
    const life: Life = {
      id,
      slot,
      consumer,
      fake,
      stop$: new Subject<void>(),
      sub: undefined,
      pipeline: 'running',
      closeStartedAt: undefined,
      closedAt: undefined,
      handlers: new Set(),
      reported: new Set(),
      closeReported: false,
      unreachableUntil: undefined,
    };
    holder.life = life;
    this.lives.push(life);
    this.log(`${id} starts`);
    consumer.rebalances$.subscribe({
      next: (e) => this.onRebalanceEvent(life, e),
      complete: () => this.checker.rebalancesCompleted(life.id),
    });
    life.sub = consumer
      .process(this.handler(life), {
        concurrency: this.cfg.concurrency,
        partitionConcurrency: this.cfg.partitionConcurrency,
        ordering: this.cfg.ordering,
        retry: {
          count: this.cfg.retryCount,
          initialDelayMs: this.cfg.retryDelayMs,
          maxDelayMs: this.cfg.retryDelayMs * 4,
          factor: 2,
          jitter: 0.2,
        },
      })
      .pipe(takeUntil(life.stop$))
      .subscribe({
        complete: () => {
          if (life.pipeline === 'running') life.pipeline = 'completed';
          this.log(`${id} pipeline completed`);
        },
        error: (err: unknown) => {
          life.pipeline = 'errored';
          this.log(`${id} pipeline errored: ${describeError(err)}`);
          this.checker.fail(
            'pipeline-failed',
            `${id}: the process() pipeline errored: ${describeError(err)}`,
          );
        },
      });
    return life;
  }

  private handler(life: Life) {
    return (m: KafkaMessage): Promise<void> => {
      const attemptKey = `${life.id}/${m.generation}/${m.partition}@${m.offset}`;
      const attempt = (this.attempts.get(attemptKey) ?? 0) + 1;
      this.attempts.set(attemptKey, attempt);
      const fails =
        this.phase === 'chaos' &&
        attempt <= this.cfg.retryCount &&
        this.rnd.chance(this.cfg.failureRate);
      let duration = this.rnd.int(0, this.cfg.handlerMaxMs);
      if (this.cfg.chaos && this.phase === 'chaos' && this.rnd.chance(0.01)) {
        duration = TIMINGS.drainTimeoutMs + 1000;
        this.checker.markNotGraceful(
          `handler of p${m.partition}@${m.offset} runs past the drain deadline`,
        );
      }
      this.log(
        `${life.id} g${m.generation} handler p${m.partition}@${m.offset} starts (attempt ${attempt}, ${duration} ms${fails ? ', fails' : ''})`,
      );
      this.runReentrant('in a handler');
      return new Promise<void>((resolve, reject) => {
        const h: PendingHandler = {
          life,
          partition: m.partition,
          offset: m.offset,
          timer: 0,
          settle: () => {
            if (!this.pendingHandlers.delete(h)) return;
            life.handlers.delete(h);
            this.clock.cancel(h.timer);
            if (fails) {
              this.log(`${life.id} handler p${m.partition}@${m.offset} fails`);
              this.count('handlerFailures');
              reject(new Error('transient failure (simulated)'));
              return;
            }
            this.count('handled');
            this.log(`${life.id} handler p${m.partition}@${m.offset} ok`);
            this.checker.handlerSucceeded(life.id, m.partition, m.offset);
            resolve();
          },
        };
        h.timer = this.clock.schedule(duration, () => h.settle());
        this.pendingHandlers.add(h);
        life.handlers.add(h);
      });
    };
  }

  private stop(life: Life, how: 'close' | 'unsubscribe' | 'takeUntil'): void {
    if (life.fake.revokeInProgress) this.count('stopWhileRevoking');
    if (life.handlers.size > 0) this.count('stopWithHandlersRunning');
    this.log(
      `${life.id} ${how === 'close' ? 'close()' : how === 'unsubscribe' ? 'unsubscribes the pipeline' : 'takeUntil fires'}`,
    );
    life.closeStartedAt = this.clock.now;
    if (how === 'unsubscribe') {
      life.pipeline = 'detached';
      life.sub?.unsubscribe();
    } else if (how === 'takeUntil') {
      life.stop$.next();
    }
    life.consumer.close().then(
      () => {
        life.closedAt = this.clock.now;
        this.log(
          `${life.id} close() resolved after ${this.clock.now - (life.closeStartedAt ?? 0)} ms`,
        );
      },
      (err: unknown) => {
        life.closedAt = this.clock.now;
        this.checker.fail('close-failed', `${life.id}: close() rejected: ${describeError(err)}`);
      },
    );
  }

  private restart(): void {
    const active = this.lives.filter((l) => l.closedAt === undefined).length;
    if (active >= this.cfg.members + 1) return;
    const slots = [...Array(this.cfg.members).keys()].filter(
      (s) => !this.running().some((l) => l.slot === s),
    );
    if (slots.length > 0) this.startLife(this.rnd.pick(slots));
  }

  private seek(): void {
    const life = this.pickRunning();
    if (!life || !life.fake.isConnected()) return;
    const owned = life.fake.assignments().map((a) => a.partition);
    const p =
      owned.length > 0 && this.rnd.chance(0.85)
        ? this.rnd.pick(owned)
        : this.rnd.int(0, this.cfg.partitions - 1);
    const end = this.logs.get(keyOf(p))?.length ?? 0;
    const offset = this.rnd.int(0, end);
    const token = this.checker.seekCalled(life.id, p, offset);
    this.log(`${life.id} seek(p${p}, ${offset})`);
    life.consumer.seek({ topic: TOPIC, partition: p }, { offset }).then(
      () => this.log(`${life.id} seek(p${p}, ${offset}) resolved`),
      (err: unknown) => {
        this.checker.seekRejected(life.id, p, token);
        this.log(`${life.id} seek(p${p}, ${offset}) rejected: ${describeError(err)}`);
      },
    );
  }

  private pauseOrResume(kind: 'pause' | 'resume'): void {
    const life = this.pickRunning();
    if (!life) return;
    const all = [...Array(this.cfg.partitions).keys()];
    const tps = this.rnd.chance(0.3)
      ? undefined
      : this.rnd.subset(all).map((partition) => ({ topic: TOPIC, partition }));
    this.log(`${life.id} ${kind}(${tps ? tps.map((t) => `p${t.partition}`).join(',') : 'all'})`);
    if (kind === 'pause') life.consumer.pause(tps);
    else life.consumer.resume(tps);
  }

  private fence(): void {
    const candidates = this.lives.filter(
      (l) => l.fake.isConnected() && !l.fake.hasLeft && !l.fake.isFenced,
    );
    if (candidates.length === 0) return;
    const life = this.rnd.pick(candidates);
    const code = this.cfg.protocol === 'kip848' ? this.rnd.pick([110, 25]) : 25;
    this.checker.markNotGraceful(`${life.id} fenced (${code})`);
    this.count('fences');
    this.log(`${life.id} is fenced by the broker (${code}); its partitions are free`);
    this.coordinator.dropped(life, 'is fenced');
    life.fake.fence(code);
  }

  // --- what the fakes report --------------------------------------------------------------------

  private plan(life: Life, offsets: TopicPartitionOffset[]): CommitPlan {
    if (this.phase !== 'chaos') return { polls: 1 };
    if (
      this.cfg.protocol === 'kip848' &&
      life.fake.unanswered().length > 0 &&
      this.rnd.chance(0.3)
    ) {
      // The member epoch moves with the assignment: commits sent meanwhile can be stale.
      this.count('stale');
      return { polls: this.rnd.int(1, 3), error: 113 };
    }
    const unreachable = life.unreachableUntil;
    if (unreachable !== undefined && this.clock.now < unreachable) {
      // The coordinator is still out of reach: this one waits in the same queue.
      this.count('deferred');
      return { polls: 1, held: true, deferred: true };
    }
    const held = life.fake.holdsCommits ? 0 : 4;
    const fate = this.rnd.weighted<'ok' | 'retriable' | 'held' | 'refused'>([
      ['ok', 80],
      ['retriable', 8],
      ['held', held],
      ['refused', this.cfg.chaos ? 2 : 0],
    ]);
    const what = offsets.map((o) => `p${o.partition}@${o.offset}`).join(',');
    switch (fate) {
      case 'retriable': {
        this.count('retriable');
        const codes = this.cfg.protocol === 'kip848' ? [113, 16, 7] : [16, 7];
        return { polls: this.rnd.int(1, 3), error: this.rnd.pick(codes) };
      }
      case 'held': {
        const long = this.cfg.chaos && this.rnd.chance(0.3);
        // A long hold outlasts the revoke's drain deadline, not its hold bound (max.poll).
        const ms = long
          ? TIMINGS.drainTimeoutMs + this.rnd.int(500, 1200)
          : this.rnd.int(TIMINGS.commitTimeoutMs + 1, 3 * TIMINGS.commitTimeoutMs);
        if (long) this.checker.markNotGraceful(`commit ${what} held ${ms} ms`);
        this.count('held');
        // Half of them are sent again after a coordinator change: commits sent later land first.
        const overtaken = this.rnd.chance(0.5);
        if (overtaken) this.count('overtaken');
        // Of the others, half wait in librdkafka's wait-for-coordinator queue (the coordinator
        // unreachable for this member until then: its later commits wait there too), which it
        // serves after the member's rejoin or heartbeat: its releases reach the broker first.
        const deferred = !overtaken && this.rnd.chance(0.5);
        if (deferred) {
          this.count('deferred');
          life.unreachableUntil = this.clock.now + ms;
        }
        this.clock.schedule(ms, () => {
          this.log(`${life.id}: the broker gets the held commits`);
          life.fake.releaseHeld();
        });
        return { polls: 1, held: true, overtaken, deferred };
      }
      case 'refused': {
        const code = this.rnd.pick([27, 22]);
        this.checker.markNotGraceful(`commit ${what} refused with ${code}`);
        return { polls: 1, error: code };
      }
      default:
        return this.unknownOutcome(what, { polls: this.rnd.int(1, 3) });
    }
  }

  /** With SimOptions.unknownOutcomes: the broker's confirmation lost, the commit applied or not. */
  private unknownOutcome(what: string, plan: CommitPlan): CommitPlan {
    const chance = this.options.unknownOutcomes ?? 0;
    if (chance === 0 || !this.outcomeRnd.chance(chance)) return plan;
    // timed out, transport, coordinator not available, failed in the queue at a connection timeout
    const error = this.outcomeRnd.pick([-185, -195, 15, -166]);
    const late = this.outcomeRnd.chance(0.6);
    this.count(late ? 'unknownAppliedLate' : 'unknownNeverApplied');
    this.log(`commit ${what}: answered ${error}, ${late ? 'applied late' : 'never applied'}`);
    return { ...plan, error, ...(late ? { appliesLate: 'after-next' as const } : {}) };
  }

  private onCall(life: Life, c: Call): void {
    switch (c.op) {
      case 'commit':
        this.checker.commitSent(life.id, c.offsets.map(parseOffset));
        return;
      case 'assign': {
        const next = new Set(c.partitions.map(partitionOf));
        const before = life.fake.assignments().map((a) => a.partition);
        this.log(`${life.id} assign([${[...next].join(',')}])`);
        this.checker.unassignCall(
          life.id,
          before.filter((p) => !next.has(p)),
        );
        this.checker.assignCall(life.id, [...next]);
        return;
      }
      case 'incrementalAssign':
        this.log(`${life.id} incrementalAssign([${c.partitions.map(partitionOf).join(',')}])`);
        this.checker.assignCall(life.id, c.partitions.map(partitionOf));
        return;
      case 'unassign': {
        const before = life.fake.assignments().map((a) => a.partition);
        this.log(`${life.id} unassign() of [${before.join(',')}]`);
        this.checker.unassignCall(life.id, before);
        return;
      }
      case 'incrementalUnassign':
        this.log(`${life.id} incrementalUnassign([${c.partitions.map(partitionOf).join(',')}])`);
        this.checker.unassignCall(life.id, c.partitions.map(partitionOf));
        return;
      case 'seek': {
        const o = parseOffset(c.partitions[0] ?? '');
        this.log(`${life.id} native seek p${o.partition}@${o.offset}`);
        this.count('seeksApplied');
        this.checker.nativeSeek(life.id, o.partition, o.offset);
        return;
      }
      case 'subscribe':
      case 'unsubscribe':
      case 'connect':
      case 'disconnect':
        this.log(`${life.id} ${c.op}()`);
        return;
      default:
        return;
    }
  }

  private onCommitSent(life: Life, offsets: TopicPartitionOffset[], plan: CommitPlan): void {
    this.count('commits');
    const what = offsets.map((o) => `p${o.partition}@${o.offset}`).join(',');
    const fate =
      plan.error !== undefined
        ? `answered ${plan.error}`
        : plan.held
          ? plan.overtaken
            ? 'held, to be overtaken by later commits'
            : 'held'
          : `ok after ${plan.polls ?? 1} poll(s)`;
    this.log(`${life.id} commit ${what} sent (${fate})`);
  }

  private onCommitApplied(
    life: Life,
    offsets: TopicPartitionOffset[],
    error: number | undefined,
    late: boolean,
  ): void {
    const what = offsets.map((o) => `p${o.partition}@${o.offset}`).join(',');
    this.log(
      `broker: commit ${what} of ${life.id} ${error === undefined ? (late ? 'applied late' : 'applied') : `refused (${error})`}`,
    );
    if (error === undefined) this.checker.commitApplied(life.id, offsets, late);
  }

  private onRebalanceEvent(life: Life, e: RebalanceEvent): void {
    const ps = e.partitions.map((p) => p.partition);
    let extra = '';
    if (e.type === 'drained') extra = ` inFlight=${e.inFlight} timedOut=${e.timedOut}`;
    if (e.type === 'committed') {
      extra = ` ${e.results.map((r) => `p${r.partition}:${r.status}${'offset' in r ? `@${String(r.offset)}` : ''}`).join(' ')}`;
    }
    if (e.type === 'lost') extra = ` (${e.reason})`;
    this.log(`${life.id} ⟵ ${e.type} g${e.generation} [${ps.join(',')}]${extra}`);
    if (e.type === 'revoking' || e.type === 'assigned')
      this.runReentrant(`in a ${e.type} subscriber`);
    if (e.type === 'committed') {
      this.checker.finalCommitDone(
        life.id,
        e.results.map((r) => ({
          partition: r.partition,
          status: r.status,
          offset: 'offset' in r ? r.offset : undefined,
        })),
      );
    }
    const failed =
      e.type === 'committed'
        ? e.results.filter((r) => r.status === 'failed').map((r) => r.partition)
        : undefined;
    const reason =
      e.type === 'lost'
        ? e.reason
        : e.type === 'committed'
          ? e.results
              .map((r) => ('reason' in r ? r.reason : ''))
              .filter(Boolean)
              .join('; ')
          : undefined;
    this.checker.rebalanceEvent(life.id, e.type, ps, {
      generation: e.generation,
      ...(e.type === 'drained' ? { timedOut: e.timedOut } : {}),
      ...(reason !== undefined ? { reason } : {}),
      ...(failed !== undefined ? { failed } : {}),
    });
  }

  private onLibraryLog(line: string): void {
    try {
      const entry = JSON.parse(line) as { msg?: string; life?: string; level?: number };
      this.log(`${entry.life ?? '?'} log(${entry.level ?? '?'}): ${entry.msg ?? line}`);
    } catch {
      this.log(`log: ${line.trim()}`);
    }
  }

  private log(line: string): void {
    this.trace.push(`[${String(this.clock.now - this.startedAt).padStart(6)}] ${line}`);
    if (!this.options.fullTrace && this.trace.length > 4 * TRACE_TAIL) {
      this.trace.splice(0, this.trace.length - TRACE_TAIL);
    }
  }

  private count(what: string): void {
    this.stats[what] = (this.stats[what] ?? 0) + 1;
  }
}

function parseOffset(s: string): { partition: number; offset: number } {
  const m = /\[(\d+)\]@(-?\d+)/.exec(s);
  return { partition: Number(m?.[1] ?? -1), offset: Number(m?.[2] ?? -1) };
}

function describeError(err: unknown): string {
  if (err instanceof RangeError) {
    // A stack overflow: where it recursed is the explanation.
    const frames = (err.stack ?? '')
      .split('\n')
      .slice(1, 7)
      .map((l) => l.trim());
    return `${err.name}: ${err.message} (${frames.join(' ← ')})`;
  }
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return String(err);
}
