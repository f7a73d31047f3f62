/** A consumer on the fakes whose processTransactional() writes through the fake producer. */
import type { Subscription } from 'rxjs';
import type {
  KafkaMessage,
  OutputRecord,
  ReactiveConsumerOptions,
  TransactionalOptions,
} from '../../lib';
import type { FakeOptions } from '../fakes/fake-consumer';
import { fakeTransactionalProducerFactory } from '../fakes/fake-transactional-producer';
import type { FakeTxnOptions } from '../fakes/fake-transactional-producer';
import { harness } from './harness';

export function transactionalHarness(
  txn: FakeTxnOptions = {},
  options: Partial<ReactiveConsumerOptions> = {},
  fakeOptions: FakeOptions = {},
) {
  const box: { fake?: () => { commits: Map<string, number> } } = {};
  const p = fakeTransactionalProducerFactory(() => box.fake!(), txn);
  const h = harness(options, fakeOptions, { transactionalProducerFactory: p.factory as never });
  box.fake = h.fake;
  return { ...h, producer: p.producer, producers: p.producers };
}

export type TransactionalHarness = ReturnType<typeof transactionalHarness>;

/**
 * Runs `processTransactional()` with a handler that writes one record per input (`out`, its
 * offset as the value); returns the offsets handled and the subscription.
 */
export function echoTransactional(
  s: TransactionalHarness,
  options: TransactionalOptions<Buffer | null, Buffer | null>,
): { handled: number[]; subscription: Subscription } {
  const handled: number[] = [];
  const subscription = s.consumer
    .processTransactional((m: KafkaMessage): OutputRecord[] => {
      handled.push(m.offset);
      return [{ topic: 'out', value: `${m.offset}` }];
    }, options)
    .subscribe({ error: () => undefined });
  return { handled, subscription };
}
