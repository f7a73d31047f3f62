import { Observable, from, isObservable } from 'rxjs';
import type { ObservableInput, OperatorFunction, Subscriber, Subscription } from 'rxjs';

/**
 * `mergeMap(project, concurrency)` for one partition's messages, with two differences that the
 * revoke protocol needs:
 * - when `ended` aborts, values waiting for a slot are dropped (never projected): a revoked
 *   partition does not start buffered work;
 * - waiting values are started from a loop, not by recursion. rxjs's mergeMap starts the next
 *   buffered value from inside the previous inner's teardown, so a long buffer of inners that
 *   complete synchronously nests one stack level group per value and can overflow the stack.
 * Completes when the source completed (or `ended` aborted) and every started inner completed.
 */
export function dropOnEndMerge<T, R>(
  project: (value: T) => ObservableInput<R>,
  concurrency: number,
  ended: AbortSignal,
): OperatorFunction<T, R> {
  return (source) =>
    new Observable<R>((subscriber) => {
      let queue: T[] = [];
      let head = 0;
      let active = 0;
      let sourceDone = false;
      let draining = false;
      const inners = new Set<Subscription>();

      const checkComplete = (): void => {
        if ((sourceDone || ended.aborted) && active === 0 && head >= queue.length) {
          subscriber.complete();
        }
      };
      const startOne = (value: T): void => {
        active += 1;
        startInner(project, value, subscriber, inners, () => {
          active -= 1;
          drain();
        });
      };
      const drain = (): void => {
        if (draining) return; // the loop below picks up what a nested completion freed
        draining = true;
        try {
          while (
            active < concurrency &&
            head < queue.length &&
            !ended.aborted &&
            !subscriber.closed
          ) {
            const value = queue[head] as T;
            queue[head] = undefined as T;
            head += 1;
            startOne(value);
          }
          if (head > 1024 && head * 2 > queue.length) {
            queue = queue.slice(head);
            head = 0;
          }
        } finally {
          draining = false;
        }
        if (ended.aborted) {
          queue = [];
          head = 0;
        }
        checkComplete();
      };
      const onEnded = (): void => drain();
      ended.addEventListener('abort', onEnded, { once: true });
      const sourceSub = source.subscribe({
        next: (value) => {
          if (ended.aborted) return;
          queue.push(value);
          drain();
        },
        error: (e: unknown) => subscriber.error(e),
        complete: () => {
          sourceDone = true;
          checkComplete();
        },
      });
      return () => {
        ended.removeEventListener('abort', onEnded);
        sourceSub.unsubscribe();
        for (const s of inners) s.unsubscribe();
        inners.clear();
      };
    });
}

/**
 * Projects `value` and forwards the inner Observable's values and errors to `subscriber`; calls
 * `completed` when it completes. The inner subscription stays in `inners` while it runs.
 */
export function startInner<T, R>(
  project: (value: T) => ObservableInput<R>,
  value: T,
  subscriber: Subscriber<R>,
  inners: Set<Subscription>,
  completed: () => void,
): void {
  const holder: { sub?: Subscription } = {};
  let done = false;
  let input: ObservableInput<R>;
  try {
    input = project(value);
  } catch (err) {
    subscriber.error(err);
    return;
  }
  holder.sub = (isObservable(input) ? input : from(input)).subscribe({
    next: (v) => subscriber.next(v),
    error: (e: unknown) => subscriber.error(e),
    complete: () => {
      done = true;
      if (holder.sub) inners.delete(holder.sub);
      completed();
    },
  });
  if (!done) inners.add(holder.sub);
}
