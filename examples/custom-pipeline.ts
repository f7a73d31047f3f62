/**
 * Your own per-partition pipeline with `partitions$`: here, messages are written in batches.
 *
 * - `partitions$` emits one PartitionStream per assigned partition per assignment; its `messages$`
 *   completes when the partition is revoked (or the consumer closes).
 * - `partition.acknowledge()` goes last: it acks every message it sees (the library commits up to
 *   the contiguous acked prefix), and its completion tells the library the partition is drained.
 * - Use `partition.run(project, concurrency)` rather than mergeMap/concatMap: work still queued
 *   when the partition is revoked is dropped unacked (not committed; the next owner gets it), so
 *   the revoke does not wait for it.
 *
 * Run (needs a broker and the topic):
 *   KAFKA_BROKERS=127.0.0.1:9092 TOPIC=orders npx tsx examples/custom-pipeline.ts
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { bufferTime, filter, from, mergeMap } from 'rxjs';
import pino from 'pino';
import { ReactiveConsumer } from 'reactive-rdkafka';
import type { KafkaMessage, PartitionStream } from 'reactive-rdkafka';

/** Stands in for one bulk write (a database insert of many rows, say). */
async function saveBatch(batch: readonly KafkaMessage[], signal: AbortSignal): Promise<void> {
  await sleep(5 + batch.length / 10, undefined, { signal });
}

/** Batches of up to 100 messages or 200 ms, written one batch at a time, in offset order. */
function pipeline(partition: PartitionStream) {
  return partition.messages$.pipe(
    bufferTime(200, null, 100),
    filter((batch) => batch.length > 0),
    // One batch at a time; batches still queued when the partition is revoked are dropped (not
    // committed, the next owner gets them), so the revoke never waits for them.
    partition.run(
      (batch: KafkaMessage[]) =>
        from(saveBatch(batch, partition.signal)).pipe(mergeMap(() => from(batch))),
      1,
    ),
    partition.acknowledge(),
  );
}

export function main(): ReactiveConsumer {
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' });
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': process.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
      'group.id': 'order-archiver',
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [process.env.TOPIC ?? 'orders'],
    logger,
  });

  consumer.partitions$
    .pipe(
      // mergeMap: every partition runs its own pipeline concurrently.
      mergeMap((partition) => pipeline(partition)),
    )
    .subscribe({
      error: (err: unknown) => {
        logger.error({ err }, 'consumer stopped');
        process.exitCode = 1;
      },
      complete: () => logger.info('consumer closed'),
    });

  process.once('SIGINT', () => void consumer.close());
  process.once('SIGTERM', () => void consumer.close());
  return consumer;
}

// Runs only when executed, not when imported or type-checked.
if (require.main === module) main();
