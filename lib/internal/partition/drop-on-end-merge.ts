import { Observable, from, isObservable } from 'rxjs';
import type { ObservableInput, OperatorFunction, Subscription } from 'rxjs';
import { FairLimiter } from './fair-limiter';
import { PartitionRunner } from './partition-runner';
import type { RunningUnit } from './partition-runner';

/**
 * `mergeMap(project, concurrency)` for one partition's messages (`PartitionControl.run()`), on the
 * same scheduler as `process()` ({@link PartitionRunner}, FIFO, no shared limiter), so both drop
 * what waits the same way when the partition ends:
 * - when `ended` aborts, values waiting for a slot are dropped (never projected): a revoked
 *   partition does not start buffered work; started ones finish;
 * - waiting values are started from a loop, not by recursion (rxjs's mergeMap starts the next
 *   buffered value from inside the previous inner's teardown, so a long buffer of inners that
 *   complete synchronously nests one stack level group per value and can overflow the stack).
 * Completes when the source completed (or `ended` aborted) and every started inner completed.
 */
export function dropOnEndMerge<T, R>(
  project: (value: T) => ObservableInput<R>,
  concurrency: number,
  ended: AbortSignal,
): OperatorFunction<T, R> {
  return (source) =>
    new Observable<R>((subscriber) => {
      const start = (value: T): RunningUnit | undefined => {
        let input: ObservableInput<R>;
        try {
          input = project(value);
        } catch (err) {
          subscriber.error(err);
          return undefined;
        }
        // Set once subscribe() returned: a completion before that was synchronous.
        const inner: { sub?: Subscription } = {};
        let done = false;
        const handle: RunningUnit = { cancel: () => inner.sub?.unsubscribe() };
        inner.sub = (isObservable(input) ? input : from(input)).subscribe({
          next: (v) => subscriber.next(v),
          error: (e: unknown) => subscriber.error(e),
          complete: () => {
            done = true;
            // Synchronous completions are counted by the runner from start()'s answer.
            if (inner.sub !== undefined) runner.finish(handle, value);
          },
        });
        return done ? undefined : handle;
      };
      // The partition's end is also its stop: FIFO drops everything waiting on either.
      const runner: PartitionRunner<T> = new PartitionRunner<T>(
        { start },
        new FairLimiter(Number.POSITIVE_INFINITY),
        concurrency,
        ended,
        ended,
        () => subscriber.complete(),
      );
      const sourceSub = source.subscribe({
        next: (value) => runner.push(value),
        error: (e: unknown) => subscriber.error(e),
        complete: () => runner.sourceComplete(),
      });
      return () => {
        sourceSub.unsubscribe();
        runner.close();
      };
    });
}
