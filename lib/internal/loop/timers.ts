/**
 * Node's largest timer delay (ms). A longer delay — a deadline of `Number.MAX_SAFE_INTEGER` ms,
 * a token that lives for months — fires after 1 ms instead (with a TimeoutOverflowWarning).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` as a timer delay: at least 0, at most {@link MAX_TIMER_MS} (about 24.8 days). */
export function timerDelay(ms: number): number {
  return Math.min(MAX_TIMER_MS, Math.max(0, ms));
}

/**
 * The longest one native call that holds the consumer may wait (a broker read on the libuv pool, a
 * transactional call): the calls that must wait longer are made again (librdkafka resumes the
 * resumable ones), so that a close — which must not disconnect the consumer under such a call —
 * waits at most this long for the one in flight.
 */
export const NATIVE_CALL_MS = 1000;
