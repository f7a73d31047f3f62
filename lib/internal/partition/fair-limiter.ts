import { Observable } from 'rxjs';

/** A place in the limiter's queue: `granted()` is called once, with a slot held for it. */
export interface LimiterWaiter {
  granted(): void;
}

/**
 * A FIFO concurrency limiter shared by every partition of one pipeline: at most `max` tasks run at
 * once and waiting tasks start in arrival order. Each partition has at most `partitionConcurrency`
 * tasks waiting, so with fewer slots than partitions every partition still progresses.
 *
 * Two ways to use it: {@link run} wraps a task in an Observable; the counter-and-queue calls
 * ({@link tryAcquire}, {@link enqueue}, {@link release}) do the same without allocating anything
 * per task, for the per-message path of `process()`.
 */
export class FairLimiter {
  private active = 0;
  private queue: (LimiterWaiter | undefined)[] = [];
  private head = 0;
  /** Slots released while {@link release} is already running, served by its loop. */
  private freed = 0;
  private releasing = false;

  constructor(private readonly max: number) {}

  /**
   * Runs `task` once a slot is free; unsubscribing before it starts gives the place up, and so
   * does `cancel` aborting (the waiting Observable then completes without running the task).
   */
  run<T>(task: () => Observable<T>, cancel?: AbortSignal): Observable<T> {
    return new Observable<T>((subscriber) => {
      let cancelled = false;
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        this.release();
      };
      let teardown: (() => void) | undefined;
      const start = (): void => {
        if (cancelled) {
          release();
          return;
        }
        const sub = task().subscribe({
          next: (v) => subscriber.next(v),
          error: (e: unknown) => {
            release();
            subscriber.error(e);
          },
          complete: () => {
            release();
            subscriber.complete();
          },
        });
        teardown = () => {
          sub.unsubscribe();
          release();
        };
      };
      if (this.active < this.max) {
        this.active += 1;
        start();
        return () => {
          cancelled = true;
          teardown?.();
        };
      }
      if (cancel?.aborted) {
        subscriber.complete();
        return undefined;
      }
      const onCancel = (): void => {
        cancelled = true;
        subscriber.complete();
      };
      cancel?.addEventListener('abort', onCancel, { once: true });
      this.queue.push({
        granted: () => {
          cancel?.removeEventListener('abort', onCancel);
          start();
        },
      });
      return () => {
        cancelled = true;
        cancel?.removeEventListener('abort', onCancel);
        teardown?.();
      };
    });
  }

  /**
   * Takes a slot if one is free, without queueing. Never passes a waiter: while anyone waits, every
   * slot is taken (a freed slot goes straight to the next waiter).
   */
  tryAcquire(): boolean {
    if (this.active < this.max) {
      this.active += 1;
      return true;
    }
    return false;
  }

  /**
   * Queues `waiter` for the next free slot (call it after {@link tryAcquire} failed). A waiter that
   * no longer wants its slot when granted gives it back with {@link release}.
   */
  enqueue(waiter: LimiterWaiter): void {
    this.queue.push(waiter);
  }

  /** Tasks running now. */
  get running(): number {
    return this.active;
  }

  /** Tasks waiting for a slot (including given-up places not yet skipped). */
  get waiting(): number {
    return this.queue.length - this.head;
  }

  /**
   * Frees a slot: hands it to the next waiter, or returns it. Iterative, not recursive: a waiter
   * that was cancelled, or a task that completes synchronously, releases again from inside `next()`;
   * that release is only counted here and served by the loop below, so skipping thousands of
   * cancelled waiters at once (a revoke, a close) never grows the stack.
   */
  release(): void {
    this.freed += 1;
    if (this.releasing) return;
    this.releasing = true;
    try {
      while (this.freed > 0) {
        this.freed -= 1;
        if (this.head < this.queue.length) {
          const next = this.queue[this.head];
          this.queue[this.head] = undefined;
          this.head += 1;
          if (this.head > 1024 && this.head * 2 > this.queue.length) {
            this.queue = this.queue.slice(this.head);
            this.head = 0;
          }
          next?.granted();
        } else {
          this.active -= 1;
        }
      }
    } finally {
      this.releasing = false;
    }
  }
}
