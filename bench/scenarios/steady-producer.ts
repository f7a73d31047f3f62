/** Produces 100-byte records at a steady rate, round-robin over the partitions, until stopped. */
import * as Kafka from 'node-rdkafka';

export interface SteadyProducer {
  readonly produced: number;
  /** Stops producing and resolves once every record is confirmed. */
  stop(): Promise<void>;
}

export async function steadyProducer(
  brokers: string,
  topic: string,
  partitions: number,
  ratePerSecond: number,
): Promise<SteadyProducer> {
  const producer = new Kafka.Producer({
    'bootstrap.servers': brokers,
    dr_cb: true,
    'linger.ms': 2,
    'enable.idempotence': true,
  } as Kafka.ProducerGlobalConfig);
  await new Promise<void>((resolve, reject) =>
    producer.connect({ timeout: 30_000 }, (err) => (err ? reject(err) : resolve())),
  );
  producer.setPollInterval(10);
  let confirmed = 0;
  let failure: unknown;
  producer.on('delivery-report', (err) => {
    if (err) failure ??= err;
    confirmed += 1;
  });
  const value = Buffer.alloc(100, 'x');
  let produced = 0;
  const startedAt = performance.now();
  const tick = setInterval(() => {
    const due = Math.floor(((performance.now() - startedAt) / 1000) * ratePerSecond);
    for (; produced < due; produced++) {
      producer.produce(topic, produced % partitions, value, String(produced));
    }
  }, 10);
  return {
    get produced() {
      return produced;
    },
    stop: async () => {
      clearInterval(tick);
      const deadline = Date.now() + 30_000;
      while (confirmed < produced && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      await new Promise<void>((resolve) => producer.disconnect(() => resolve()));
      if (failure) throw failure;
      if (confirmed < produced) throw new Error(`only ${confirmed}/${produced} records confirmed`);
    },
  };
}
