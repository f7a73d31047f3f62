/**
 * A service that shuts down cleanly on SIGTERM (what Kubernetes, systemd and Docker send).
 *
 * `close()` stops intake, lets the running handlers finish, commits their offsets and waits for
 * the broker to confirm, leaves the group and disconnects, all within `closeTimeoutMs`. The next
 * owner of each partition then starts exactly after the last processed message: no duplicates.
 * Give the process manager a grace period longer than `closeTimeoutMs` (Kubernetes:
 * `terminationGracePeriodSeconds`), or it kills the process mid-drain (then at-least-once
 * applies: nothing is lost, the unconfirmed tail is processed again).
 *
 * Run (needs a broker and the topic), then press Ctrl-C or `kill -TERM <pid>`:
 *   KAFKA_BROKERS=127.0.0.1:9092 TOPIC=orders npx tsx examples/graceful-shutdown.ts
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { ReactiveConsumer } from 'reactive-rdkafka';

export function main(): ReactiveConsumer {
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' });
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': process.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
      'group.id': 'shipping',
      // The broker drops a member that does not poll for this long; the drain deadline
      // (drainTimeoutMs, default 60 % of it) and close() are bounded below it.
      'max.poll.interval.ms': 60_000,
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [process.env.TOPIC ?? 'orders'],
    logger,
    drainTimeoutMs: 20_000, // a revoke (or close) waits at most this long for running handlers
    closeTimeoutMs: 25_000, // close() as a whole: drain, final commit, leave, disconnect
  });

  consumer
    .process((message) => sleep(50, message.offset, { signal: message.signal }), {
      concurrency: 16,
    })
    .subscribe({
      error: (err: unknown) => {
        logger.error({ err }, 'consumer stopped');
        process.exitCode = 1;
      },
      // The pipeline completes once close() has finished.
      complete: () => logger.info('pipeline completed'),
    });

  let stopping = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting without waiting for the drain');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const startedAt = Date.now();
    consumer.close().then(
      () => {
        logger.info({ durationMs: Date.now() - startedAt }, 'shut down cleanly');
        // node-rdkafka's native threads can keep the event loop alive briefly after disconnect.
        process.exit(process.exitCode ?? 0);
      },
      (err: unknown) => {
        logger.error({ err }, 'close failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  return consumer;
}

// Runs only when executed, not when imported or type-checked.
if (require.main === module) main();
