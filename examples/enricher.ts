/**
 * An exactly-once pipeline shaped to be tested (see enricher.test.ts, which `make test-unit` runs
 * on MockKafka): every order read from the input is written to `enriched` and, when large, to
 * `large`, in transactions that carry the input offsets (examples/exactly-once.ts runs the same
 * against a broker).
 */
import { ReactiveConsumer } from 'reactive-rdkafka';
import type { OutputRecord, ReactiveConsumerOptions } from 'reactive-rdkafka';

export interface Order {
  id: string;
  amount: number;
}

export function startEnricher(
  options: ReactiveConsumerOptions,
  outputs: { enriched: string; large: string },
  instanceId = 'local',
): ReactiveConsumer {
  const consumer = new ReactiveConsumer(options);
  consumer
    .processTransactional<Order>(
      (message): OutputRecord[] => {
        const order = message.value;
        const out: OutputRecord[] = [
          { topic: outputs.enriched, key: order.id, value: JSON.stringify({ ...order, ok: true }) },
        ];
        if (order.amount > 1000) {
          out.push({ topic: outputs.large, key: order.id, value: JSON.stringify(order) });
        }
        return out;
      },
      { value: 'json', transactionalIdPrefix: 'enricher', instanceId },
    )
    .subscribe({ error: (err: unknown) => console.error('enricher stopped', err) });
  return consumer;
}
