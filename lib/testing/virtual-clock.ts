/**
 * A virtual clock for fast, deterministic tests (`reactive-rdkafka/testing`): while installed, `setTimeout`, `setInterval`,
 * `setImmediate` (and their `clear*`) and `Date.now` are served from queues this clock owns, so
 * nothing the library schedules runs until the simulation lets it, and virtual time only moves
 * when the next timer is fired. Promise jobs still run natively: `settle()` lets them drain (and
 * runs the queued immediates) until nothing is left to do at the current instant.
 *
 * With {@link MockKafka} (whose clients schedule on the same timers) a pipeline's hours of
 * backoff, commit intervals and deadlines pass in milliseconds: `runUntil(condition)` fires timers
 * in order until the condition holds. Mocha and node:test keep their own references to the real
 * timers (taken when they loaded), so their timeouts are unaffected; a runner that fakes timers
 * itself (jest's fake timers) must not be used with it. Uninstall in a `finally`: timers left in
 * the queues are dropped with the clock.
 */

type Callback = (...args: unknown[]) => void;

interface Timer {
  readonly id: number;
  at: number;
  seq: number;
  readonly fn: Callback;
  readonly args: unknown[];
  readonly interval: number | undefined;
  cancelled: boolean;
}

/** What `setTimeout` returns under the clock: enough of Node's `Timeout` for the library. */
class VirtualTimeout {
  constructor(
    readonly id: number,
    private readonly clock: VirtualClock,
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
    this.clock.refresh(this.id);
    return this;
  }
  close(): this {
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
};

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
}

export class VirtualClock {
  private time: number;
  private nextId = 1;
  private seq = 0;
  /** A binary min-heap on (at, seq); cancelled timers stay in it until they surface. */
  private heap: Timer[] = [];
  private readonly timers = new Map<number, Timer>();
  private immediates: { id: number; fn: Callback; args: unknown[] }[] = [];
  private readonly cancelledImmediates = new Set<number>();
  private installed = false;
  /** Exceptions thrown by callbacks (a real event loop would report them as uncaught). */
  readonly uncaught: unknown[] = [];

  private readonly autoAdvance: boolean;

  constructor(options: VirtualClockOptions = {}) {
    this.time = options.start ?? 1_700_000_000_000;
    this.autoAdvance = options.autoAdvance === true;
  }

  get now(): number {
    return this.time;
  }

  /** Timers (not immediates) waiting to fire. */
  get pending(): number {
    return this.timers.size;
  }

  install(): void {
    if (this.installed) throw new Error('clock already installed');
    this.installed = true;
    const g = globalThis as unknown as Record<string, unknown>;
    g.setTimeout = (fn: Callback, ms?: number, ...args: unknown[]) =>
      this.add(fn, ms, args, undefined);
    g.setInterval = (fn: Callback, ms?: number, ...args: unknown[]) =>
      this.add(fn, ms, args, Math.max(1, Math.floor(ms ?? 1)));
    g.clearTimeout = (h: unknown) => this.clear(h);
    g.clearInterval = (h: unknown) => this.clear(h);
    g.setImmediate = (fn: Callback, ...args: unknown[]) => {
      const id = this.nextId++;
      this.immediates.push({ id, fn, args });
      return new VirtualTimeout(id, this);
    };
    g.clearImmediate = (h: unknown) => {
      if (h instanceof VirtualTimeout) this.cancelledImmediates.add(h.id);
    };
    Date.now = () => this.time;
    if (this.autoAdvance) this.drive();
  }

  /**
   * `autoAdvance`: whenever nothing is left to run at the current instant (no immediate queued,
   * every promise job done), the next timer fires — virtual time moves on by itself while the
   * test awaits.
   */
  private drive(): void {
    real.setImmediate(() => {
      if (!this.installed) return;
      if (this.immediates.length > 0) {
        this.runImmediates();
        this.drive();
        return;
      }
      this.dropCancelled();
      const t = this.heap[0];
      if (t === undefined) {
        // Nothing scheduled: look again shortly (real time), without spinning.
        real.setTimeout(() => this.drive(), 1);
        return;
      }
      this.fireNext();
      this.drive();
    });
  }

  uninstall(): void {
    if (!this.installed) return;
    this.installed = false;
    const g = globalThis as unknown as Record<string, unknown>;
    g.setTimeout = real.setTimeout;
    g.clearTimeout = real.clearTimeout;
    g.setInterval = real.setInterval;
    g.clearInterval = real.clearInterval;
    g.setImmediate = real.setImmediate;
    g.clearImmediate = real.clearImmediate;
    Date.now = real.dateNow;
    this.heap = [];
    this.timers.clear();
    this.immediates = [];
  }

  /** Schedules `fn` at `now + ms` (a world event; the same queue as the library's timers). */
  schedule(ms: number, fn: () => void): number {
    return (this.add(fn as Callback, ms, [], undefined) as VirtualTimeout).id;
  }

  cancel(id: number): void {
    const t = this.timers.get(id);
    if (t) {
      t.cancelled = true;
      this.timers.delete(id);
    }
  }

  refresh(id: number): void {
    const t = this.timers.get(id);
    if (!t) return;
    t.cancelled = true;
    const again: Timer = { ...t, cancelled: false, seq: this.seq++ };
    again.at = this.time + Math.max(0, again.interval ?? 0);
    this.timers.set(id, again);
    this.push(again);
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

  private runImmediates(): void {
    const batch = this.immediates;
    this.immediates = [];
    for (const im of batch) {
      if (this.cancelledImmediates.delete(im.id)) continue;
      this.run(im.fn, im.args);
    }
  }

  /** When the next timer fires (undefined if none). */
  nextAt(): number | undefined {
    this.dropCancelled();
    return this.heap[0]?.at;
  }

  /**
   * Fires timers in order (settling after each) until `condition` holds — checked first, and after
   * each timer — and resolves with the virtual milliseconds that passed. Rejects, naming `what`,
   * once `withinMs` of virtual time passed without it, or when no timer is left to fire.
   */
  async runUntil(
    condition: () => boolean,
    options: { withinMs?: number; what?: string } = {},
  ): Promise<number> {
    const startedAt = this.time;
    const limit = startedAt + (options.withinMs ?? 3_600_000);
    const what = options.what ?? 'the condition';
    if (this.autoAdvance) {
      while (!condition()) {
        if (this.time > limit) {
          throw new Error(`${what}: still false after ${this.time - startedAt} virtual ms`);
        }
        await realTick();
      }
      return this.time - startedAt;
    }
    await this.settle();
    while (!condition()) {
      const next = this.nextAt();
      if (next === undefined) throw new Error(`${what}: no timer left to fire and it is false`);
      if (next > limit) {
        throw new Error(`${what}: still false after ${limit - startedAt} virtual ms`);
      }
      await this.step();
    }
    return this.time - startedAt;
  }

  /** Fires every timer due within `ms` of virtual time, in order, then moves time to `now + ms`. */
  async advance(ms: number): Promise<void> {
    const until = this.time + Math.max(0, ms);
    await this.settle();
    for (let next = this.nextAt(); next !== undefined && next <= until; next = this.nextAt()) {
      await this.step();
    }
    this.time = until;
  }

  /** Fires the earliest timer (moving time to it), then settles. False when no timer is left. */
  async step(): Promise<boolean> {
    if (!this.fireNext()) return false;
    await this.settle();
    return true;
  }

  /** Fires the earliest timer, moving time to it. False when no timer is left. */
  private fireNext(): boolean {
    this.dropCancelled();
    const t = this.pop();
    if (!t) return false;
    if (t.at > this.time) this.time = t.at;
    if (t.interval !== undefined) {
      t.at = this.time + t.interval;
      t.seq = this.seq++;
      this.push(t);
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
    }
  }

  private add(
    fn: Callback,
    ms: number | undefined,
    args: unknown[],
    interval: number | undefined,
  ): VirtualTimeout {
    const delay = Number.isFinite(ms) && (ms as number) > 0 ? Math.floor(ms as number) : 0;
    const id = this.nextId++;
    const t: Timer = {
      id,
      at: this.time + delay,
      seq: this.seq++,
      fn,
      args,
      interval,
      cancelled: false,
    };
    this.timers.set(id, t);
    this.push(t);
    return new VirtualTimeout(id, this);
  }

  private clear(h: unknown): void {
    if (h instanceof VirtualTimeout) this.cancel(h.id);
    else if (typeof h === 'number') this.cancel(h);
  }

  private dropCancelled(): void {
    while (this.heap.length > 0 && (this.heap[0] as Timer).cancelled) this.pop();
  }

  private less(a: Timer, b: Timer): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  private push(t: Timer): void {
    const h = this.heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i] as Timer, h[parent] as Timer)) break;
      [h[i], h[parent]] = [h[parent] as Timer, h[i] as Timer];
      i = parent;
    }
  }

  private pop(): Timer | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0] as Timer;
    const last = h.pop() as Timer;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l] as Timer, h[m] as Timer)) m = l;
        if (r < h.length && this.less(h[r] as Timer, h[m] as Timer)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m] as Timer, h[i] as Timer];
        i = m;
      }
    }
    return top;
  }
}
