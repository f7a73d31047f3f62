/**
 * Topic to topic: read the input, write one record per input to an output topic. Transactional
 * (`processTransactional()`: outputs and input offsets in one Kafka transaction, exactly once for
 * read_committed readers) against the plain way (`process()` whose handler produces the record
 * with an idempotent producer and waits for its delivery report: at least once).
 */
import * as Kafka from 'node-rdkafka';
import { loadLibrary } from '../peers';
import { createTopic, deleteTopic } from '../kafka-admin';
import type { Send, Task, TransformResult } from '../tasks';

export async function runTransform(
  task: Extract<Task, { kind: 'transform' }>,
  send: Send,
): Promise<TransformResult> {
  const { ReactiveConsumer } = loadLibrary();
  const output = `${task.topic}-out-${task.mode}-${Date.now().toString(36)}`;
  await createTopic(task.brokers, output, task.partitions);
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': task.brokers,
      'group.id': `bench-transform-${task.mode}-${Date.now().toString(36)}`,
      ...(task.mode === 'transactional' ? { 'isolation.level': 'read_committed' } : {}),
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: [task.topic],
  });
  let processed = 0;
  let firstAt: number | undefined;
  let lastAt = 0;
  const cpu0 = process.cpuUsage();
  let producer: Kafka.Producer | undefined;
  const tick = (): void => {
    processed += 1;
    lastAt = performance.now();
    if (processed % 5000 === 0) send({ type: 'progress', count: processed });
  };
  const done = new Promise<void>((resolve, reject) => {
    if (task.mode === 'transactional') {
      consumer
        .processTransactional(
          (m) => {
            firstAt ??= performance.now();
            return [{ topic: output, key: m.key, value: m.value }];
          },
          { transactionalId: `bench-transform-${process.pid}`, concurrency: 64 },
        )
        .subscribe({
          next: () => {
            tick();
            if (processed === task.messages) resolve();
          },
          error: reject,
        });
      return;
    }
    const p = new Kafka.Producer({
      'bootstrap.servers': task.brokers,
      'enable.idempotence': true,
      dr_cb: true,
      'linger.ms': 5,
    });
    producer = p;
    const pending = new Map<number, () => void>();
    let next = 0;
    p.on('delivery-report', (err, report) => {
      const settle = pending.get(report.opaque as number);
      pending.delete(report.opaque as number);
      if (err) reject(err);
      else settle?.();
    });
    p.setPollInterval(5);
    p.connect({}, (err) => {
      if (err) return reject(err);
      consumer
        .process(
          (m) =>
            new Promise<void>((delivered) => {
              firstAt ??= performance.now();
              const id = next++;
              pending.set(id, delivered);
              p.produce(output, null, m.value, m.key, null, id);
            }),
          { concurrency: 64 },
        )
        .subscribe({
          next: () => {
            tick();
            if (processed === task.messages) resolve();
          },
          error: reject,
        });
    });
  });
  await done;
  if (task.mode === 'transactional') {
    // Outputs are visible (and inputs done) only once their transaction committed: measure to there.
    const deadline = Date.now() + 60_000;
    while ((consumer.metrics().transactions?.messages ?? 0) < task.messages) {
      if (Date.now() > deadline)
        throw new Error('the last transactions did not commit within 60 s');
      await new Promise((r) => setTimeout(r, 2));
    }
    lastAt = performance.now();
  }
  const metrics = consumer.metrics();
  await consumer.close();
  if (producer) await new Promise<void>((resolve) => producer?.disconnect(() => resolve()));
  await deleteTopic(task.brokers, output).catch(() => undefined);
  const cpu = process.cpuUsage(cpu0);
  const durationMs = lastAt - (firstAt ?? lastAt);
  return {
    kind: 'transform',
    mode: task.mode,
    messages: processed,
    durationMs,
    msgPerSec: durationMs > 0 ? (processed / durationMs) * 1000 : 0,
    cpuUsPerMsg: processed > 0 ? (cpu.user + cpu.system) / processed : 0,
    transactions: metrics.transactions?.committed,
  };
}
