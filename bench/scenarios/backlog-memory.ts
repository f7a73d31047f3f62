/**
 * Memory under backlog: this library's `process()` with its default buffer bounds on a topic with a
 * large backlog and a deliberately slow handler. RSS is sampled for a bounded time (the backlog is
 * far from consumed by then); a bounded consumer's RSS levels off instead of growing with the
 * backlog.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { loadLibrary } from '../peers';
import type { MemoryResult, MemorySample, Send, Task } from '../tasks';

export async function runMemory(
  task: Extract<Task, { kind: 'memory' }>,
  send: Send,
): Promise<MemoryResult> {
  const { ReactiveConsumer } = loadLibrary();
  const baselineRss = process.memoryUsage().rss;
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': task.brokers,
      'group.id': `bench-memory-${Date.now().toString(36)}`,
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [task.topic],
  });
  let processed = 0;
  const startedAt = performance.now();
  consumer
    .process(async () => {
      await sleep(task.handlerMs);
      processed += 1;
    })
    .subscribe({ error: (err: unknown) => console.error('memory scenario', err) });
  const samples: MemorySample[] = [];
  const sample = () => {
    const m = process.memoryUsage();
    samples.push({
      t: performance.now() - startedAt,
      rss: m.rss,
      heapUsed: m.heapUsed,
      processed,
    });
  };
  sample();
  while (performance.now() - startedAt < task.sampleMs) {
    await sleep(task.intervalMs);
    sample();
    if (samples.length % 8 === 0) send({ type: 'progress', count: processed });
  }
  await consumer.close();
  return {
    kind: 'memory',
    samples,
    baselineRss,
    peakRss: Math.max(...samples.map((s) => s.rss)),
    processed,
  };
}
