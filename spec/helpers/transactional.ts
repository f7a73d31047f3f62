/** A consumer on the fakes whose processTransactional() writes through the fake producer. */
import type { ReactiveConsumerOptions } from '../../lib';
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
