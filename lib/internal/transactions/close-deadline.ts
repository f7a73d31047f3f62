import { timerDelay } from '../loop/timers';

/**
 * The deadline a close() gave the transactions: the soonest of the deadlines its calls asked for,
 * `Infinity` while no close began. A call that may outlast it (a sendOffsetsToTransaction stuck on
 * an unreachable coordinator: librdkafka ends it only at its request timeout) is raced against it.
 */
export class CloseDeadline {
  private soonest = Infinity;
  private readonly due = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  /** Calls raced against the deadline and still running (each stops listening when it settles). */
  private racing = 0;

  /** The deadline (ms since the epoch), `Infinity` while no close began. */
  get by(): number {
    return this.soonest;
  }

  /** Calls raced against the deadline and still running. */
  get waiting(): number {
    return this.racing;
  }

  /** A close must be done by `by`: the sooner of several deadlines holds. */
  tighten(by: number): void {
    this.soonest = Math.min(this.soonest, by);
    this.arm();
  }

  /** Aborts `due` at the deadline (re-armed while it is further away than a timer can wait). */
  private arm(): void {
    clearTimeout(this.timer);
    if (this.due.signal.aborted || this.soonest === Infinity) return;
    this.timer = setTimeout(
      () => {
        if (Date.now() < this.soonest) this.arm();
        else this.due.abort();
      },
      timerDelay(this.soonest - Date.now()),
    );
    this.timer.unref();
  }

  /** `call`'s outcome, or a rejection with `reason` once the deadline came first (the call goes on). */
  race<T>(call: Promise<T>, reason: Error): Promise<T> {
    const signal = this.due.signal;
    if (signal.aborted) {
      call.catch(() => undefined);
      return Promise.reject(reason);
    }
    this.racing += 1;
    return new Promise<T>((resolve, reject) => {
      const onDue = (): void => reject(reason);
      signal.addEventListener('abort', onDue, { once: true });
      const settled = (): void => {
        this.racing -= 1;
        signal.removeEventListener('abort', onDue);
      };
      call.then(
        (value) => {
          settled();
          resolve(value);
        },
        (err: unknown) => {
          settled();
          reject(err);
        },
      );
    });
  }
}
