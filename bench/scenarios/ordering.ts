/**
 * Ordering modes on a workload with per-message latency, as Parallel Consumer publishes it: one
 * partition, 10,000 messages over 100 keys, each handler taking a seeded random 0–5 ms. Under
 * `'partition'` one message runs at a time; `'key'` runs different keys concurrently; `'none'` any
 * message, up to `partitionConcurrency`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { seededRandom } from '../../integration/helpers/random';
import { loadLibrary } from '../peers';
import type { OrderingResult, Send, Task } from '../tasks';

export async function runOrdering(
  task: Extract<Task, { kind: 'ordering' }>,
  send: Send,
): Promise<OrderingResult> {
  const { ReactiveConsumer } = loadLibrary();
  const random = seededRandom(task.seed);
  const latency = Array.from({ length: task.messages }, () => random() * task.maxLatencyMs);
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': task.brokers,
      'group.id': `bench-ordering-${task.ordering}-${Date.now().toString(36)}`,
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [task.topic],
  });
  let processed = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let firstAt: number | undefined;
  let lastAt = 0;
  const done = new Promise<void>((resolve, reject) => {
    consumer
      .process(
        async (m: { offset: number }) => {
          firstAt ??= performance.now();
          inFlight += 1;
          maxInFlight = Math.max(maxInFlight, inFlight);
          await sleep(latency[m.offset % latency.length] ?? 0);
          inFlight -= 1;
          processed += 1;
          lastAt = performance.now();
          if (processed % 1000 === 0) send({ type: 'progress', count: processed });
          if (processed === task.messages) resolve();
        },
        task.ordering === 'partition'
          ? { ordering: 'partition' }
          : { ordering: task.ordering, partitionConcurrency: task.partitionConcurrency },
      )
      .subscribe({ error: reject });
  });
  await done;
  await consumer.close();
  const durationMs = lastAt - (firstAt ?? lastAt);
  return {
    kind: 'ordering',
    ordering: task.ordering,
    messages: processed,
    durationMs,
    msgPerSec: durationMs > 0 ? (processed / durationMs) * 1000 : 0,
    maxInFlight,
  };
}
