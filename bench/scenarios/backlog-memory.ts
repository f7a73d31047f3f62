/**
 * Memory under backlog: a consumer on a topic with a large backlog and a deliberately slow
 * handler, RSS sampled for a bounded time (the backlog is far from consumed by then); a bounded
 * consumer's RSS levels off instead of growing with the backlog. Three variants, so that the
 * report can say whose memory the peak is:
 *
 * - `reactive-rdkafka`: this library's `process()` with its default bounds;
 * - `reactive-rdkafka` with `gcEveryMs`: the same with a full garbage collection before a sample
 *   every `gcEveryMs`: what stays is the live floor, the rest
 *   of the default run's peak is V8 heap holding dead objects between two major collections;
 * - `raw-rdkafka`: node-rdkafka's `consume(n)` loop with the library's librdkafka prefetch bounds,
 *   one batch held and as many handlers in flight as the library runs here (one per partition):
 *   the binding and librdkafka alone, buffering as little as a hand-written loop can.
 *
 * `binding: 'fast'` runs either on the companion binding (fast-binding/) instead of node-rdkafka.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import * as Kafka from 'node-rdkafka';
import type { Message } from 'node-rdkafka';
import { loadFastBinding } from '../contenders/raw-rdkafka';
import { loadLibrary, loadPrefetch } from '../peers';
import type { MemoryResult, MemorySample, Send, Task } from '../tasks';

type MemoryTask = Extract<Task, { kind: 'memory' }>;

/** Starts the consumer of the task's variant; resolves to its close function. */
type Start = (task: MemoryTask, onProcessed: () => void) => Promise<() => Promise<void>>;

/** The binding of the task: node-rdkafka, or the companion. */
const bindingOf = (task: MemoryTask): typeof Kafka =>
  task.binding === 'fast' ? loadFastBinding() : Kafka;

const startReactive: Start = async (task, onProcessed) => {
  const { ReactiveConsumer } = loadLibrary();
  const consumer = new ReactiveConsumer({
    ...(task.binding === 'fast' ? { binding: loadFastBinding() } : {}),
    config: {
      'bootstrap.servers': task.brokers,
      'group.id': `bench-memory-${Date.now().toString(36)}`,
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [task.topic],
  });
  consumer
    .process(async () => {
      await sleep(task.handlerMs);
      onProcessed();
    })
    .subscribe({ error: (err: unknown) => console.error('memory scenario', err) });
  return () => consumer.close();
};

const startRaw: Start = async (task, onProcessed) => {
  const DEFAULT_PREFETCH = loadPrefetch();
  const consumer = new (bindingOf(task).KafkaConsumer)(
    {
      'bootstrap.servers': task.brokers,
      'group.id': `bench-memory-raw-${Date.now().toString(36)}`,
      'enable.auto.commit': false,
      ...DEFAULT_PREFETCH,
    },
    { 'auto.offset.reset': 'earliest' },
  );
  await new Promise<void>((resolve, reject) =>
    consumer.connect({ timeout: 30_000 }, (err) => (err ? reject(err) : resolve())),
  );
  consumer.subscribe([task.topic]);
  let running = true;
  const queue: Message[] = [];
  const consumeBatch = () =>
    new Promise<Message[]>((resolve) =>
      consumer.consume(500, (err, messages) => resolve(err ? [] : messages)),
    );
  const feeding = (async () => {
    while (running) {
      if (queue.length > 0) await sleep(1);
      else queue.push(...(await consumeBatch()));
    }
  })();
  const workers = Array.from({ length: task.partitions }, async () => {
    while (running) {
      if (queue.shift() === undefined) {
        await sleep(1);
        continue;
      }
      await sleep(task.handlerMs);
      onProcessed();
    }
  });
  return async () => {
    running = false;
    await Promise.all([feeding, ...workers]);
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
  };
};

/** V8's `gc()` without a command-line flag (the flag set at run time, then read in a context). */
function exposeGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

export async function runMemory(task: MemoryTask, send: Send): Promise<MemoryResult> {
  const gc = task.gcEveryMs === undefined ? undefined : exposeGc();
  loadLibrary();
  const baselineRss = process.memoryUsage().rss;
  let processed = 0;
  const startedAt = performance.now();
  const close = await (task.client === 'raw-rdkafka' ? startRaw : startReactive)(task, () => {
    processed += 1;
  });
  const samples: MemorySample[] = [];
  let lastGc = startedAt;
  const sample = () => {
    const now = performance.now();
    if (gc && task.gcEveryMs !== undefined && now - lastGc >= task.gcEveryMs) {
      gc();
      lastGc = now;
    }
    const m = process.memoryUsage();
    samples.push({
      t: now - startedAt,
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      external: m.external,
      processed,
    });
  };
  sample();
  while (performance.now() - startedAt < task.sampleMs) {
    await sleep(task.intervalMs);
    sample();
    if (samples.length % 8 === 0) send({ type: 'progress', count: processed });
  }
  await close();
  return {
    kind: 'memory',
    samples,
    baselineRss,
    peakRss: Math.max(...samples.map((s) => s.rss)),
    processed,
  };
}
