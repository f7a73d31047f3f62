/**
 * A virtual clock for fast, deterministic tests (`reactive-rdkafka/testing`): while installed,
 * `setTimeout`, `setInterval`, `setImmediate` (and their `clear*`) and `Date.now` are served by
 * this clock. Timers fire only when virtual time reaches them, and virtual time moves only when
 * the test says so (`runUntil`, `advance`, `step`) or, with `autoAdvance`, whenever nothing else is
 * left to run. Immediates run on the real event loop as they come (no virtual time passes), and
 * promise jobs run natively.
 *
 * With {@link MockKafka} (whose clients schedule on the same timers) a pipeline's hours of
 * backoff, commit intervals and deadlines pass in milliseconds. Mocha and node:test keep their
 * own references to the real timers (taken when they loaded), so their timeouts are unaffected; a
 * runner that fakes timers itself (jest's fake timers) must not be used with it. Uninstall in a
 * `finally` or `afterEach`: timers left in the queues are dropped with the clock.
 */
import { promisify } from 'node:util';
import { TimerHeap } from './timer-heap';
import type { Callback, Timer } from './timer-heap';

/** What `setTimeout` returns under the clock: enough of Node's `Timeout` for the library. */
class VirtualTimeout {
  constructor(
    readonly id: number,
    private readonly clock: VirtualClock,
    /** Its timer (immediates have none): a refresh after it fired re-arms it, as Node does. */
    readonly timer?: Timer,
  ) {}
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
  hasRef(): boolean {
    return true;
  }
  refresh(): this {
    if (this.timer) this.clock.refresh(this.timer);
    return this;
  }
  close(): this {
    if (this.timer) this.timer.state.cleared = true;
    this.clock.cancel(this.id);
    return this;
  }
  [Symbol.toPrimitive](): number {
    return this.id;
  }
}

const real = {
  setTimeout: globalThis.setTimeout,
  clearTimeout: globalThis.clearTimeout,
  setInterval: globalThis.setInterval,
  clearInterval: globalThis.clearInterval,
  setImmediate: globalThis.setImmediate,
  clearImmediate: globalThis.clearImmediate,
  dateNow: Date.now,
  performanceNow: performance.now,
};

/** Node's longest timer delay; a longer (or invalid) one is 1 ms, as Node makes it. */
const TIMEOUT_MAX = 2 ** 31 - 1;

/** The clock installed now: one at a time. */
const installedNow: { clock?: VirtualClock } = {};

/** Yields to the real event loop once: every pending promise job has run when it resolves. */
export const realTick = (): Promise<void> => new Promise((resolve) => real.setImmediate(resolve));

export interface VirtualClockOptions {
  /** Where virtual time starts (ms since the epoch, what `Date.now()` returns). @default 1_700_000_000_000 */
  start?: number;
  /**
   * Move time on by itself: whenever nothing is left to run at the current instant, the next
   * timer fires. Await anything, as without the clock, and time jumps over every wait. Without
   * it, time moves only through {@link VirtualClock.runUntil}, {@link VirtualClock.advance} and
   * {@link VirtualClock.step}. @default false
   */
  autoAdvance?: boolean;
  /**
   * @internal For a simulation that owns the whole schedule: immediates run only inside
   * `settle()`/`step()`, and exceptions of callbacks are only collected in `uncaught`.
   */
  deterministic?: boolean;
}

export class VirtualClock {
  private time: number;
  private nextId = 1;
  private seq = 0;
  private readonly heap = new TimerHeap();
  private readonly timers = new Map<number, Timer>();
  private immediates: { id: number; fn: Callback; args: unknown[] }[] = [];
  private readonly cancelledImmediates = new Set<number>();
  private installed = false;
  private driving = false;
  /** Rounds of the drive loop that ran only immediates since a timer last fired. */
  private immediateRounds = 0;
  private readonly autoAdvance: boolean;
  private readonly deterministic: boolean;
  /**
   * Exceptions thrown by callbacks. Each is also thrown again on the real event loop (an uncaught
   * exception, as without the clock: the test runner fails the test).
   */
  readonly uncaught: unknown[] = [];

  constructor(options: VirtualClockOptions = {}) {
    this.time = options.start ?? 1_700_000_000_000;
    if (!Number.isFinite(this.time)) throw new RangeError('Expected `start` to be a finite number');
    this.autoAdvance = options.autoAdvance === true;
    this.deterministic = options.deterministic === true;
  }

  /** Virtual time: what `Date.now()` returns while installed. */
  get now(): number {
    return this.time;
  }

  /** Timers (not immediates) waiting to fire. */
  get pending(): number {
    return this.timers.size;
  }

  install(): void {
    if (this.installed) throw new Error('this clock is installed already');
    if (installedNow.clock !== undefined) {
      throw new Error('another VirtualClock is installed: uninstall it first');
    }
    installedNow.clock = this;
    this.installed = true;
    const g = globalThis as unknown as Record<string, unknown>;
    const setTimeout = (fn: Callback, ms?: unknown, ...args: unknown[]) =>
      this.add(fn, ms, args, false);
    const setImmediate = (fn: Callback, ...args: unknown[]) => {
      checkCallback(fn);
      const id = this.nextId++;
      this.immediates.push({ id, fn, args });
      this.drive();
      return new VirtualTimeout(id, this);
    };
    // util.promisify(setTimeout) and (setImmediate), on this clock.
    Object.assign(setTimeout, {
      [promisify.custom]: (ms?: number, value?: unknown) =>
        new Promise((resolve) => this.add(() => resolve(value), ms, [], false)),
    });
    Object.assign(setImmediate, {
      [promisify.custom]: (value?: unknown) =>
        new Promise((resolve) => setImmediate(() => resolve(value))),
    });
    g.setTimeout = setTimeout;
    g.setInterval = (fn: Callback, ms?: unknown, ...args: unknown[]) =>
      this.add(fn, ms, args, true);
    g.clearTimeout = (h: unknown) => this.clear(h);
    g.clearInterval = (h: unknown) => this.clear(h);
    g.setImmediate = setImmediate;
    g.clearImmediate = (h: unknown) => {
      if (h instanceof VirtualTimeout) this.cancelledImmediates.add(h.id);
    };
    Date.now = () => this.time;
    // performance.now() moves with virtual time too (stall detection reads it), from where it was.
    const origin = real.performanceNow.call(performance) - this.time;
    Object.defineProperty(performance, 'now', {
      value: () => origin + this.time,
      configurable: true,
      writable: true,
    });
  }

  uninstall(): void {
    if (!this.installed) return;
    this.installed = false;
    if (installedNow.clock === this) installedNow.clock = undefined;
    const g = globalThis as unknown as Record<string, unknown>;
    g.setTimeout = real.setTimeout;
    g.clearTimeout = real.clearTimeout;
    g.setInterval = real.setInterval;
    g.clearInterval = real.clearInterval;
    g.setImmediate = real.setImmediate;
    g.clearImmediate = real.clearImmediate;
    Date.now = real.dateNow;
    delete (performance as { now?: unknown }).now; // the prototype's again
    this.heap.clear();
    this.timers.clear();
    this.immediates = [];
  }

  /** Schedules `fn` at `now + ms` (a world event; the same queue as the library's timers). */
  schedule(ms: number, fn: () => void): number {
    return this.add(fn as Callback, ms, [], false).id;
  }

  /** @internal A timer's clear (VirtualTimeout's). */
  cancel(id: number): void {
    const t = this.timers.get(id);
    if (t) {
      t.cancelled = true;
      this.timers.delete(id);
    }
  }

  /** @internal Re-arms a timer `delay` from now, whether or not it fired already (not once cleared). */
  refresh(timer: Timer): void {
    if (timer.state.cleared || !this.installed) return;
    const current = this.timers.get(timer.id);
    if (current) current.cancelled = true;
    const again: Timer = {
      ...timer,
      cancelled: false,
      seq: this.seq++,
      at: this.time + timer.delay,
    };
    this.timers.set(timer.id, again);
    this.heap.push(again);
  }

  /**
   * Runs promise jobs and queued immediates until none is left at the current instant. Throws if
   * immediates keep scheduling immediates without end (a busy loop that would never yield).
   */
  async settle(): Promise<void> {
    for (let round = 0; ; round++) {
      await realTick();
      if (this.immediates.length === 0) return;
      if (round > 100_000) throw new Error('immediates never settle (a busy loop?)');
      this.runImmediates();
    }
  }

  /** When the next timer fires (undefined if none). */
  nextAt(): number | undefined {
    return this.heap.peek()?.at;
  }

  /**
   * Fires timers in order (settling after each) until `condition` holds — checked first, and after
   * each timer — and resolves with the virtual milliseconds that passed. Rejects, naming `what`,
   * once `withinMs` of virtual time passed without it, or when nothing is left to run.
   */
  async runUntil(
    condition: () => boolean,
    options: { withinMs?: number; what?: string } = {},
  ): Promise<number> {
    const withinMs = options.withinMs ?? 3_600_000;
    if (!(withinMs >= 0) || !Number.isFinite(withinMs)) {
      throw new RangeError(`Expected \`withinMs\` to be a finite number ≥ 0, got ${withinMs}`);
    }
    const startedAt = this.time;
    const limit = startedAt + withinMs;
    const what = options.what ?? 'the condition';
    const late = () => new Error(`${what}: still false after ${this.time - startedAt} virtual ms`);
    const idle = () => new Error(`${what}: nothing left to run (no timer) and it is false`);
    await this.settle();
    while (!condition()) {
      if (this.autoAdvance) {
        if (this.time > limit) throw late();
        if (this.nextAt() === undefined && this.immediates.length === 0) throw idle();
        await realTick();
        continue;
      }
      const next = this.nextAt();
      if (next === undefined) throw idle();
      if (next > limit) {
        this.time = Math.max(this.time, limit);
        throw late();
      }
      await this.step();
    }
    return this.time - startedAt;
  }

  /** Fires every timer due within `ms` of virtual time, in order, then moves time to `now + ms`. */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0) || !Number.isFinite(ms)) {
      throw new RangeError(`Expected \`ms\` to be a finite number ≥ 0, got ${ms}`);
    }
    const until = this.time + ms;
    await this.settle();
    for (let next = this.nextAt(); next !== undefined && next <= until; next = this.nextAt()) {
      await this.step();
    }
    this.time = Math.max(this.time, until);
  }

  /** Fires the earliest timer (moving time to it), then settles. False when no timer is left. */
  async step(): Promise<boolean> {
    if (!this.fireNext()) return false;
    await this.settle();
    return true;
  }

  /**
   * Keeps the queues moving on the real event loop (not in `deterministic` mode): immediates run
   * as they come, and with `autoAdvance` the next timer fires whenever nothing else is queued.
   */
  private drive(): void {
    if (this.driving || this.deterministic || !this.installed) return;
    this.driving = true;
    real.setImmediate(() => {
      this.driving = false;
      if (!this.installed) return;
      // Immediates first, as Node's check phase; but a loop of immediates that never ends (one
      // waiting for Date.now() to pass a deadline) must not starve the timers for good.
      const starving = this.immediateRounds >= 1000 && this.nextAt() !== undefined;
      if (this.immediates.length > 0 && !starving) {
        this.immediateRounds += 1;
        this.runImmediates();
      } else if (this.autoAdvance && this.fireNext()) {
        this.immediateRounds = 0;
      } else if (this.immediates.length > 0) {
        this.immediateRounds = 0;
        this.runImmediates();
      } else {
        return; // idle until something is scheduled
      }
      this.drive();
    });
  }

  private runImmediates(): void {
    const batch = this.immediates;
    this.immediates = [];
    for (const im of batch) {
      if (this.cancelledImmediates.delete(im.id)) continue;
      this.run(im.fn, im.args);
    }
  }

  /** Fires the earliest timer, moving time to it. False when no timer is left. */
  private fireNext(): boolean {
    const t = this.heap.take();
    if (!t) return false;
    if (t.at > this.time) this.time = t.at;
    if (t.interval !== undefined) {
      t.at = this.time + t.interval;
      t.seq = this.seq++;
      this.heap.push(t);
    } else {
      this.timers.delete(t.id);
    }
    this.run(t.fn, t.args);
    return true;
  }

  private run(fn: Callback, args: unknown[]): void {
    try {
      fn(...args);
    } catch (err) {
      this.uncaught.push(err);
      if (!this.deterministic) {
        real.setImmediate(() => {
          throw err;
        });
      }
    }
  }

  private add(fn: Callback, ms: unknown, args: unknown[], repeat: boolean): VirtualTimeout {
    checkCallback(fn);
    // As Node: a delay is a number of ms, at least 1 (an invalid or too long one is 1).
    let delay = Math.trunc(Number(ms));
    if (!(delay >= 1 && delay <= TIMEOUT_MAX)) delay = 1;
    const id = this.nextId++;
    const t: Timer = {
      id,
      at: this.time + delay,
      seq: this.seq++,
      fn,
      args,
      delay,
      interval: repeat ? delay : undefined,
      cancelled: false,
      state: { cleared: false },
    };
    this.timers.set(id, t);
    this.heap.push(t);
    this.drive();
    return new VirtualTimeout(id, this, t);
  }

  private clear(h: unknown): void {
    if (h instanceof VirtualTimeout) {
      if (h.timer) h.timer.state.cleared = true;
      this.cancel(h.id);
    } else if (typeof h === 'number') {
      const t = this.timers.get(h);
      if (t) t.state.cleared = true;
      this.cancel(h);
    }
  }
}

function checkCallback(fn: unknown): void {
  if (typeof fn !== 'function') {
    throw Object.assign(
      new TypeError(`The "callback" argument must be of type function. Received ${typeof fn}`),
      { code: 'ERR_INVALID_ARG_TYPE' },
    );
  }
}
