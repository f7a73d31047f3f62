/**
 * The warning when a process runs more consumers at once than libuv has pool threads. Each
 * consumer keeps one consume(n) in flight on a libuv pool thread (node-rdkafka runs it there), so
 * past that number consumers slow each other down, and dns or fs calls wait behind them. Counted
 * per process (a consumer counts from its start until it ended), warned once.
 */
import type { Observable } from 'rxjs';
import type { Logger } from '../../logger';

let runningConsumers = 0;
let threadPoolWarned = false;

/** Consumers of this process counted as running now (for tests). */
export function consumersRunning(): number {
  return runningConsumers;
}

/**
 * Counts a consumer that starts until `ended$` completes or errors (the consumer closed or
 * failed); warns once per process when more run at once than the pool has threads to spare.
 */
export function checkThreadPool(logger: Logger, ended$: Observable<unknown>): void {
  runningConsumers += 1;
  // An observable ends once: by completing or by erroring.
  const release = (): void => void (runningConsumers -= 1);
  ended$.subscribe({ complete: release, error: release });
  const pool = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  // Each consumer keeps one consume(n) in flight on a libuv pool thread; leave room for dns/fs.
  if (!threadPoolWarned && runningConsumers >= pool) {
    threadPoolWarned = true;
    logger.warn(
      { consumers: runningConsumers, UV_THREADPOOL_SIZE: pool },
      'more consumers in this process than free libuv pool threads: set UV_THREADPOOL_SIZE ≥ consumers + 4 before Node starts, or consumers will slow each other down',
    );
  }
}
