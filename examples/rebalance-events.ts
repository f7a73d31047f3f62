/**
 * Watching rebalances with `rebalances$`. Every revoke emits `revoking → drained → committed →
 * revoked` (or `lost` when the partitions were taken away without a chance to commit), and every
 * assignment emits `assigned`. This example logs each phase and flags the ones an operator should
 * look at: a drain that hit its deadline, a final commit that failed, lost partitions.
 *
 * Run (needs a broker and the topic); start a second copy to see a rebalance:
 *   KAFKA_BROKERS=127.0.0.1:9092 TOPIC=orders npx tsx examples/rebalance-events.ts
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import type { Logger } from 'pino';
import { ReactiveConsumer } from 'reactive-rdkafka';
import type { RebalanceEvent } from 'reactive-rdkafka';

const names = (event: RebalanceEvent): string[] =>
  event.partitions.map((tp) => `${tp.topic}[${tp.partition}]`);

export function logRebalance(logger: Logger, event: RebalanceEvent): void {
  const base = { generation: event.generation, protocol: event.protocol, partitions: names(event) };
  switch (event.type) {
    case 'assigned':
    case 'revoking':
      logger.info(base, event.type);
      break;
    case 'drained':
      // inFlight: handlers running when the revoke arrived. A timeout means stragglers were
      // aborted and their messages will be processed again by the next owner.
      if (event.timedOut) logger.warn({ ...base, stragglers: event.stragglers }, 'drain timed out');
      else logger.info({ ...base, inFlight: event.inFlight, ms: event.durationMs }, 'drained');
      break;
    case 'committed': {
      const failed = event.results.filter((r) => r.status === 'failed' || r.status === 'lost');
      if (failed.length > 0) logger.warn({ ...base, failed }, 'final commit incomplete');
      else logger.info({ ...base, results: event.results, ms: event.durationMs }, 'committed');
      break;
    }
    case 'revoked':
      logger.info({ ...base, totalMs: event.totalMs }, 'revoked');
      break;
    case 'lost':
      // Nothing was committed for these partitions: their unfinished work is redone elsewhere.
      logger.warn({ ...base, reason: event.reason }, 'partitions lost');
      break;
  }
}

export function main(): ReactiveConsumer {
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' });
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': process.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
      'group.id': 'rebalance-watcher',
      'group.protocol': 'consumer', // KIP-848: needs Kafka 4.0 or later
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [process.env.TOPIC ?? 'orders'],
    logger: logger.child({}, { level: 'warn' }), // the library's own logs: warnings only
  });

  // Hot: subscribe before the pipeline starts so the first `assigned` is not missed. It
  // completes when the consumer is closed.
  consumer.rebalances$.subscribe((event) => logRebalance(logger, event));

  consumer
    .process((message) => sleep(20, undefined, { signal: message.signal }), { concurrency: 8 })
    .subscribe({
      error: (err: unknown) => {
        logger.error({ err }, 'consumer stopped');
        process.exitCode = 1;
      },
    });

  process.once('SIGINT', () => void consumer.close());
  process.once('SIGTERM', () => void consumer.close());
  return consumer;
}

// Runs only when executed, not when imported or type-checked.
if (require.main === module) main();
