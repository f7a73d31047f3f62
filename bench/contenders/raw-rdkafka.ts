/**
 * The ceiling: node-rdkafka's `consume(n)` in a loop with no library around it. Same batch size
 * (500) and 1 ms per-message timeout as the library's busy cadence, no commits, librdkafka's own
 * assignment (no rebalance callback), librdkafka's default prefetch bounds with
 * `fetch.queue.backoff.ms` lowered to 10 ms (FAST_FETCH): the binding at its best. Its default of
 * 1000 ms postpones a partition's next fetch by a second whenever a prefetch bound is reached.
 * A second variant keeps every librdkafka default.
 */
import * as Kafka from 'node-rdkafka';
import type { Message } from 'node-rdkafka';
import type { Contender } from './types';

/** The fetch override of the ceiling and of the library's "fetch backoff tuned" variants. */
export const FAST_FETCH = { 'fetch.queue.backoff.ms': 10 } as const;

const raw =
  (fastFetch: boolean): Contender =>
  async ({ brokers, topic, groupId, meter }) => {
    const consumer = new Kafka.KafkaConsumer(
      {
        'bootstrap.servers': brokers,
        'group.id': groupId,
        'enable.auto.commit': false,
        ...(fastFetch ? FAST_FETCH : {}),
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

export const rawRdkafka = raw(true);
export const rawRdkafkaDefaults = raw(false);
