import { EmptyError, filter, firstValueFrom, timeout } from 'rxjs';
import type { Observable } from 'rxjs';
import { timerDelay } from '../internal/loop/timers';
import type { RebalanceEvent, RebalanceEventType, TopicPartition } from '../types';

/** How long the kit's waits last unless told otherwise. */
export const DEFAULT_WAIT_MS = 30_000;

export interface WaitOptions {
  /** Give up (reject) after this long. @default 30000 */
  timeoutMs?: number;
  /** How often the condition is asked. @default 20 */
  intervalMs?: number;
  /** What is awaited, for the error message. */
  what?: string;
}

/**
 * Resolves when `condition()` returns true (or a Promise of true); rejects with an `Error` naming
 * `what` when `timeoutMs` passes first. A condition that throws rejects at once.
 */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  options: WaitOptions = {},
): Promise<void> {
  const { timeoutMs = DEFAULT_WAIT_MS, intervalMs = 20, what = 'the condition' } = options;
  const deadline = Date.now() + timeoutMs;
  const late = (): Error => new Error(`waitFor: ${what} did not hold within ${timeoutMs} ms`);
  for (;;) {
    const answer = condition();
    if (typeof answer === 'boolean') {
      if (answer) return;
    } else {
      // An async condition still pending at the deadline does not hold the wait past it.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const expired = new Promise<'expired'>((r) => {
        timer = setTimeout(() => r('expired'), timerDelay(deadline - Date.now()));
      });
      const result = await Promise.race([answer, expired]).finally(() => clearTimeout(timer));
      if (result === 'expired') throw late();
      if (result) return;
    }
    if (Date.now() >= deadline) throw late();
    await new Promise((r) => setTimeout(r, timerDelay(intervalMs)));
  }
}

export interface NextRebalanceOptions {
  /** Only an event naming at least one of these partitions counts. */
  partitions?: readonly TopicPartition[];
  /** Give up (reject) after this long. @default 30000 */
  timeoutMs?: number;
}

/**
 * The consumer's next rebalance event of `type` (`'assigned'`, `'revoked'`, `'lost'`, …). Call it
 * **before** what triggers the rebalance (it only sees events emitted after the call):
 *
 * ```ts
 * const revoked = nextRebalance(consumer, 'revoked');
 * const member = await cluster.joinGroup(groupId, [topic]);
 * await revoked; // the consumer drained, committed and released what the member took
 * ```
 */
export function nextRebalance<T extends RebalanceEventType>(
  consumer: { readonly rebalances$: Observable<RebalanceEvent> },
  type: T,
  options: NextRebalanceOptions = {},
): Promise<Extract<RebalanceEvent, { type: T }>> {
  const { partitions, timeoutMs = DEFAULT_WAIT_MS } = options;
  const wanted = (e: RebalanceEvent): boolean =>
    partitions === undefined ||
    e.partitions.some((p) =>
      partitions.some((w) => w.topic === p.topic && w.partition === p.partition),
    );
  return firstValueFrom(
    consumer.rebalances$.pipe(
      filter((e): e is Extract<RebalanceEvent, { type: T }> => e.type === type && wanted(e)),
      timeout({
        first: timerDelay(timeoutMs),
        with: () => {
          throw new Error(`nextRebalance: no '${type}' event within ${timeoutMs} ms`);
        },
      }),
    ),
  ).catch((err: unknown) => {
    if (err instanceof EmptyError)
      throw new Error(`nextRebalance: the consumer closed before a '${type}' event`);
    throw err;
  });
}
