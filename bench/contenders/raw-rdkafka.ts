/**
 * The ceiling: node-rdkafka's `consume(n)` in a loop with no library around it. Same batch size
 * (500) and 1 ms per-message timeout as the library's busy cadence, librdkafka's default prefetch
 * (the binding at its best), no commits, librdkafka's own assignment (no rebalance callback).
 */
import * as Kafka from 'node-rdkafka';
import type { Message } from 'node-rdkafka';
import type { Contender } from './types';

export const rawRdkafka: Contender = async ({ brokers, topic, groupId, meter }) => {
  const consumer = new Kafka.KafkaConsumer(
    {
      'bootstrap.servers': brokers,
      'group.id': groupId,
      'enable.auto.commit': false,
    },
    { 'auto.offset.reset': 'earliest' },
  );
  await new Promise<void>((resolve, reject) =>
    consumer.connect({ timeout: 30_000 }, (err) => (err ? reject(err) : resolve())),
  );
  consumer.setDefaultConsumeTimeout(1);
  consumer.subscribe([topic]);
  let running = true;
  let stopped!: () => void;
  const loopEnded = new Promise<void>((resolve) => (stopped = resolve));
  const handle = (message: Message): number => message.value?.length ?? 0;
  const loop = (): void => {
    if (!running) return stopped();
    consumer.consume(500, (err, messages) => {
      if (!err && messages.length > 0) {
        let bytes = 0;
        for (const m of messages) bytes += handle(m);
        meter.add(messages.length, bytes);
      }
      setImmediate(loop);
    });
  };
  loop();
  return async () => {
    running = false;
    await loopEnded;
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
  };
};
