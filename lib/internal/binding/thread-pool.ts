/**
 * The warning when a process starts more consumers than libuv has pool threads. Each consumer
 * keeps one consume(n) in flight on a libuv pool thread (node-rdkafka runs it there), so past
 * that number consumers slow each other down, and dns or fs calls wait behind them. Counted per
 * process, warned once.
 */
import type { Logger } from '../../logger';

let startedConsumers = 0;
let threadPoolWarned = false;

/** Counts a consumer that starts; warns once per process when the pool has too few threads. */
export function checkThreadPool(logger: Logger): void {
  startedConsumers += 1;
  const pool = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  // Each consumer keeps one consume(n) in flight on a libuv pool thread; leave room for dns/fs.
  if (!threadPoolWarned && startedConsumers >= pool) {
    threadPoolWarned = true;
    logger.warn(
      { consumers: startedConsumers, UV_THREADPOOL_SIZE: pool },
      'more consumers in this process than free libuv pool threads: set UV_THREADPOOL_SIZE ≥ consumers + 4 before Node starts, or consumers will slow each other down',
    );
  }
}
