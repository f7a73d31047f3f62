/**
 * The ceiling: node-rdkafka's `consume(n)` in a loop with no library around it. Same batch size
 * (500) and 1 ms per-message timeout as the library's busy cadence, no commits, librdkafka's own
 * assignment (no rebalance callback), librdkafka's default prefetch bounds with
 * `fetch.queue.backoff.ms` lowered to 10 ms (FAST_FETCH): the binding at its best. Its default of
 * 1000 ms postpones a partition's next fetch by a second whenever a prefetch bound is reached.
 * A second variant keeps every librdkafka default; two more run the ceiling's loop on the companion
 * binding (fast-binding/, built by `make bench`): with its default per-message copies, and with
 * values and keys as views of the shared batch buffer.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import * as Kafka from 'node-rdkafka';
import type { Message } from 'node-rdkafka';
import type { Contender } from './types';

/** The fetch override of the ceiling and of the library's "fetch backoff tuned" variants. */
export const FAST_FETCH = { 'fetch.queue.backoff.ms': 10 } as const;

/** Where `make fast-binding` (and `make bench`) build the companion binding (fast-binding/). */
/** The companion binding's package (`BENCH_FAST_BINDING_DIR`: another build of it, for bench/ab.ts). */
export const FAST_BINDING_DIR =
  process.env.BENCH_FAST_BINDING_DIR ?? join(__dirname, '..', '..', 'fast-binding');

/** Why the companion-binding contenders cannot run, or undefined when its build is there. */
export function fastBindingMissing(): string | undefined {
  return existsSync(
    join(FAST_BINDING_DIR, 'dist', 'node-rdkafka', 'build', 'Release', 'node-librdkafka.node'),
  )
    ? undefined
    : 'not built: `make fast-binding` builds it (`make bench` does)';
}

type Binding = typeof Kafka;

const raw =
  (fastFetch: boolean, binding: () => Binding, sharing: boolean | number = false): Contender =>
  async ({ brokers, topic, groupId, meter }) => {
    const { KafkaConsumer } = binding();
    const consumer = new KafkaConsumer(
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
    if (sharing !== false) {
      (
        consumer as unknown as { setBatchBufferSharing(shared: boolean | number): void }
      ).setBatchBufferSharing(sharing);
    }
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

const released = (): Binding => Kafka;
const companion = (): Binding => createRequire(__filename)(FAST_BINDING_DIR) as Binding;
/** Loads the companion binding (see ContenderInfo.load). */
export const loadFastBinding = companion;

export const rawRdkafka = raw(true, released);
export const rawRdkafkaDefaults = raw(false, released);
/** The ceiling's loop and settings on the companion binding: values and keys copied per message. */
export const rawRdkafkaFast = raw(true, companion);
/** The same with values and keys as views of the shared batch buffer (no per-message copy). */
export const rawRdkafkaFastShared = raw(true, companion, true);
/** The same with views of buffers of at most 8 KiB (`setBatchBufferSharing(8192)`). */
export const rawRdkafkaFastViews8k = raw(true, companion, 8192);
