/**
 * Exactly once from topic to topic: read `orders`, write one record per order to
 * `orders.enriched` and, for large orders, one to `orders.large`, in transactions that carry the
 * input offsets. Readers of the outputs use isolation.level=read_committed.
 *
 *   KAFKA_BROKERS=localhost:9092 POD_NAME=enricher-0 node --import tsx examples/exactly-once.ts
 */
import { ReactiveConsumer } from 'reactive-rdkafka';
import type { OutputRecord } from 'reactive-rdkafka';

const consumer = new ReactiveConsumer({
  config: {
    'bootstrap.servers': process.env.KAFKA_BROKERS ?? 'localhost:9092',
    'group.id': 'enricher',
  },
  topicConfig: { 'auto.offset.reset': 'earliest' },
  topics: ['orders'],
});

interface Order {
  id: string;
  amount: number;
}

consumer
  .processTransactional<Order>(
    (message): OutputRecord[] => {
      const order = message.value;
      const out: OutputRecord[] = [
        {
          topic: 'orders.enriched',
          key: order.id,
          value: JSON.stringify({ ...order, seen: Date.now() }),
        },
      ];
      if (order.amount > 1000)
        out.push({ topic: 'orders.large', key: order.id, value: JSON.stringify(order) });
      return out;
    },
    {
      value: 'json',
      // Unique per live instance, stable across its restarts (see docs/exactly-once.md).
      transactionalIdPrefix: 'enricher',
      instanceId: process.env.POD_NAME ?? 'local',
      maxMessages: 500,
      maxMs: 100,
    },
  )
  .subscribe({ error: (err: unknown) => console.error('stopped:', err) });

process.on('SIGTERM', () => void consumer.close());
