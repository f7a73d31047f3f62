/**
 * How far the consumer is from its end, and by when each step of a close must be done. The engine
 * moves it (`begin`, `disconnecting`, `closed`); the rebalance units read it: a revoke fits its
 * drain and final commit before `revokeBy()`, leaving the group waits until `releaseBy()`, and
 * every wait on it re-reads the times, because a later `close()` with a shorter timeout (a
 * SIGTERM after an unsubscribe, say) brings the deadline forward.
 */
import type { Conditions } from './wait-conditions';

/**
 * `open` until close() begins; `closing` while the loop still polls, so revokes and commits are
 * served; `disconnecting` once the loop stopped (only unassign works then,
 * docs/binding-behaviours.md, "Closing") and after.
 */
export type Stage = 'open' | 'closing' | 'disconnecting';

export class Shutdown {
  private stage_: Stage = 'open';
  private since_ = 0;
  private deadline_ = Number.POSITIVE_INFINITY;

  constructor(
    private readonly conditions: Conditions,
    /** Ends the consumer with an error (it closes, then fails its streams). */
    private readonly onFailure: (err: Error) => void,
  ) {}

  get stage(): Stage {
    return this.stage_;
  }

  /** When close() must be done by (+Infinity while open). */
  get deadline(): number {
    return this.deadline_;
  }

  /** close() began at `now` with `timeoutMs`. */
  begin(now: number, timeoutMs: number): void {
    this.stage_ = 'closing';
    this.since_ = now;
    this.deadline_ = now + timeoutMs;
    this.conditions.changed(); // revokes in flight shorten their deadline to fit
  }

  /**
   * A later close() with a shorter timeout wins — also once the close is disconnecting (the waits
   * for native calls and for the disconnect fit the new deadline); false when it does not shorten
   * the deadline.
   */
  shorten(timeoutMs: number): boolean {
    if (this.stage_ === 'open' || Date.now() + timeoutMs >= this.deadline_) return false;
    this.deadline_ = Date.now() + timeoutMs;
    this.conditions.changed();
    return true;
  }

  /** The consume loop stops: only unassign works from now on. */
  disconnecting(): void {
    this.stage_ = 'disconnecting';
  }

  /**
   * The latest a revoke may end while the consumer closes (+Infinity otherwise): leaves time to
   * unsubscribe, leave the group and disconnect after it.
   */
  revokeBy(): number {
    if (this.stage_ === 'open') return Number.POSITIVE_INFINITY;
    const total = this.deadline_ - this.since_;
    return this.deadline_ - Math.min(2500, Math.floor(total / 5));
  }

  /** When every partition must be released while closing; the rest is for leaving and disconnecting. */
  releaseBy(): number {
    return this.deadline_ - Math.min(2000, Math.floor((this.deadline_ - this.since_) / 10));
  }

  /** Ends the consumer with an error. */
  fail(err: Error): void {
    this.onFailure(err);
  }
}
