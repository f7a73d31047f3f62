import { timerDelay } from './timers';

/**
 * Waiting on state changes with a deadline, without per-message timers. State owners call
 * {@link Conditions.changed} after every change that a waiter might care about; a waiter's
 * condition is checked when it starts waiting, after every change, at its deadline, and (for
 * conditions that depend on state nobody announces, such as librdkafka's assignment) every
 * `pollMs`. A change that happens between the first check and the registration cannot be missed:
 * both run synchronously in the same tick.
 */
export class Conditions {
  private readonly waiters = new Set<() => void>();

  /** Something changed: re-check every waiting condition. */
  changed(): void {
    if (this.waiters.size === 0) return;
    for (const check of [...this.waiters]) check();
  }

  /** Waiters registered now (for tests and diagnostics). */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * Resolves true once `condition` holds, or with the condition's value at `deadline` (ms since the
   * epoch). `pollMs` also re-checks it periodically.
   */
  until(condition: () => boolean, deadline: number, pollMs?: number): Promise<boolean> {
    if (condition()) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const check = (): void => {
        if (condition()) done(true);
      };
      const timer = setTimeout(() => done(condition()), timerDelay(deadline - Date.now()));
      const poll = pollMs === undefined ? undefined : setInterval(check, pollMs);
      const done = (value: boolean): void => {
        clearTimeout(timer);
        if (poll) clearInterval(poll);
        this.waiters.delete(check);
        resolve(value);
      };
      this.waiters.add(check);
    });
  }
}

/**
 * Waits with `until` for `condition` until `by()` — a deadline that may move meanwhile (a close
 * brings it forward): the wait then starts over with the new one. True once `condition` holds.
 */
export async function untilMoving(
  until: (condition: () => boolean, deadline: number) => Promise<boolean>,
  condition: () => boolean,
  by: () => number,
): Promise<boolean> {
  for (;;) {
    const seen = by();
    await until(() => condition() || by() !== seen, seen);
    if (condition()) return true;
    if (by() === seen || Date.now() >= by()) return false;
  }
}

/** Whether `promise` settled within `ms` (its outcome is left to it). */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timerDelay(ms));
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
