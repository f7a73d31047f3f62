/**
 * A pipeline as an application would write it, shaped to be tested: `startBilling()` takes the
 * consumer options and the payment service, so a test can point it at an embedded cluster and a
 * fake service (see billing.test.ts, which `make test-unit` runs).
 */
import { ReactiveConsumer, deserializers } from 'reactive-rdkafka';
import type { ReactiveConsumerOptions } from 'reactive-rdkafka';

export interface Order {
  id: string;
  amountCents: number;
}

export interface Payments {
  /** Charges the order; honours `signal` (aborted when the charge no longer counts). */
  charge(order: Order, signal: AbortSignal): Promise<void>;
}

const isOrder = (v: unknown): v is Order =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as Order).id === 'string' &&
  Number.isInteger((v as Order).amountCents);

/** Charges every order of the topics once; the library commits what was charged. */
export function startBilling(
  options: ReactiveConsumerOptions,
  payments: Payments,
): ReactiveConsumer {
  const consumer = new ReactiveConsumer(options);
  consumer
    .process<Order | null>(
      async (message) => {
        if (message.value !== null) await payments.charge(message.value, message.signal); // null: a tombstone
      },
      {
        value: deserializers.json(isOrder),
        concurrency: 16,
        partitionConcurrency: 1,
        // A payment outage: wait a minute, then longer, up to 10 minutes between attempts.
        retry: { count: 5, initialDelayMs: 60_000, maxDelayMs: 600_000 },
      },
    )
    .subscribe({ error: (err: unknown) => console.error('billing stopped', err) });
  return consumer;
}
