/**
 * `ready()`: the consumer has joined its group and received its first assignment (possibly empty:
 * more members than partitions) — what a service waits for before it reports itself ready.
 */
import { ClosedError } from '../../errors';
import type { ConsumerEngine } from './consumer-engine';

/** Resolves at the first assignment; rejects if the consumer ends before it. */
export function firstAssignment(engine: ConsumerEngine): Promise<void> {
  if (engine.assignedOnce) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    let done = false;
    const sub = engine.rebalances.subscribe({
      next: (e) => {
        if (e.type !== 'assigned' || done) return;
        done = true;
        sub?.unsubscribe();
        // Decided once the assignment's handling is over: an onAssign hook that failed ends the
        // consumer right after its assignment was answered, and then it is not ready.
        queueMicrotask(() => {
          const failure = engine.failure;
          if (failure === undefined) resolve();
          else reject(failure);
        });
      },
      // The consumer closed (or failed) before it was assigned anything.
      complete: () => {
        if (done) return;
        done = true;
        reject(
          engine.failure ??
            new ClosedError('the consumer closed before it received its first assignment'),
        );
      },
    });
  });
}
