import { Observable } from 'rxjs';
import { startInner } from './drop-on-end-merge';
import type { ObservableInput, OperatorFunction, Subscription } from 'rxjs';

/**
 * Like {@link dropOnEndMerge}, for one partition's messages under `ordering: 'key'`: values with
 * the same key run one at a time in arrival (offset) order, values with different keys run
 * concurrently, at most `concurrency` at once. A key becomes ready when its previous value
 * finished; ready keys start in the order they became ready, so no key starves.
 *
 * When `ended` aborts (a revoke or close), values after the last one projected are dropped (never
 * projected), but waiting values *before* it still run: a later offset of another key may already
 * be done, and leaving an earlier one undone would either hold the committed offset below finished
 * work (the next owner would redo it: duplicates on a graceful rebalance) or lose it. When `stop`
 * aborts (partition lost, drain deadline passed), everything waiting is dropped. Waiting values are
 * started from a loop, not by recursion. Memory: every waiting value is a delivered, unfinished
 * message, so the partition's buffer limits (backpressure) bound it — a hot key cannot make it grow
 * without limit.
 */
export function keyOrderedMerge<T, R>(
  project: (value: T) => ObservableInput<R>,
  concurrency: number,
  keyOf: (value: T) => unknown,
  positionOf: (value: T) => number,
  ended: AbortSignal,
  stop: AbortSignal,
): OperatorFunction<T, R> {
  return (source) =>
    new Observable<R>((subscriber) => {
      /** Per key: its waiting values (from `head` on) and whether one of them is running. */
      const keys = new Map<unknown, { queue: T[]; head: number; running: boolean }>();
      /** Keys with a waiting value and nothing running, in the order they became ready. */
      let ready: unknown[] = [];
      let readyHead = 0;
      let active = 0;
      let waiting = 0;
      let sourceDone = false;
      let draining = false;
      let cutDone = false;
      /** The highest position projected so far. */
      let lastProjected = Number.NEGATIVE_INFINITY;
      const inners = new Set<Subscription>();

      const checkComplete = (): void => {
        if ((sourceDone || ended.aborted) && active === 0 && waiting === 0) subscriber.complete();
      };
      const finished = (key: unknown): void => {
        const entry = keys.get(key);
        if (!entry) return;
        entry.running = false;
        if (entry.head < entry.queue.length) ready.push(key);
        else keys.delete(key);
      };
      const startOne = (value: T, key: unknown): void => {
        active += 1;
        lastProjected = Math.max(lastProjected, positionOf(value));
        startInner(project, value, subscriber, inners, () => {
          active -= 1;
          finished(key);
          drain();
        });
      };
      /** Keeps only what must still run: waiting values before the last projected one. */
      const cut = (keepBelow: number): void => {
        waiting = 0;
        const next: unknown[] = [];
        for (const [k, e] of keys) {
          const kept = e.queue.slice(e.head).filter((v) => positionOf(v) < keepBelow);
          e.queue = kept;
          e.head = 0;
          waiting += kept.length;
          if (kept.length === 0 && !e.running) keys.delete(k);
          else if (kept.length > 0 && !e.running) next.push(k);
        }
        ready = next;
        readyHead = 0;
      };
      const drain = (): void => {
        if (draining) return; // the loop below picks up what a nested completion freed
        draining = true;
        try {
          if (stop.aborted) cut(Number.NEGATIVE_INFINITY);
          else if (ended.aborted && !cutDone) {
            cutDone = true;
            cut(lastProjected);
          }
          while (active < concurrency && readyHead < ready.length && !subscriber.closed) {
            const key = ready[readyHead];
            readyHead += 1;
            const entry = keys.get(key);
            if (!entry || entry.running || entry.head >= entry.queue.length) continue;
            const value = entry.queue[entry.head] as T;
            entry.queue[entry.head] = undefined as T;
            entry.head += 1;
            if (entry.head > 64 && entry.head * 2 > entry.queue.length) {
              entry.queue = entry.queue.slice(entry.head);
              entry.head = 0;
            }
            entry.running = true;
            waiting -= 1;
            startOne(value, key);
          }
          if (readyHead > 1024 && readyHead * 2 > ready.length) {
            ready = ready.slice(readyHead);
            readyHead = 0;
          }
        } finally {
          draining = false;
        }
        checkComplete();
      };
      const onEnded = (): void => drain();
      ended.addEventListener('abort', onEnded, { once: true });
      stop.addEventListener('abort', onEnded, { once: true });
      const sourceSub = source.subscribe({
        next: (value) => {
          if (ended.aborted) return;
          const key = keyOf(value);
          let entry = keys.get(key);
          if (!entry) {
            entry = { queue: [], head: 0, running: false };
            keys.set(key, entry);
          }
          entry.queue.push(value);
          waiting += 1;
          if (!entry.running && entry.queue.length - entry.head === 1) ready.push(key);
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
        stop.removeEventListener('abort', onEnded);
        sourceSub.unsubscribe();
        for (const s of inners) s.unsubscribe();
        inners.clear();
      };
    });
}
