import { ReactiveConsumer } from '../../lib';
import type { RebalanceEvent, ReactiveConsumerOptions } from '../../lib';
import type { ReactiveConsumerInternals } from '../../lib/reactive-consumer';
import { fakeFactory } from '../fakes/fake-consumer';
import type { FakeConsumer, FakeOptions } from '../fakes/fake-consumer';

export const T = 'orders';
export const tp = (partition: number) => ({ topic: T, partition });

export interface Harness {
  consumer: ReactiveConsumer;
  fake: () => FakeConsumer;
  events: RebalanceEvent[];
}

/** A ReactiveConsumer on the deterministic fake client, recording its rebalance events. */
export function harness(
  options: Partial<ReactiveConsumerOptions> = {},
  fakeOptions: FakeOptions = {},
  internals: ReactiveConsumerInternals = {},
): Harness {
  const { factory, fake } = fakeFactory(fakeOptions);
  const consumer = new ReactiveConsumer(
    {
      topics: [T],
      topicConfig: { 'auto.offset.reset': 'earliest' },
      commitIntervalMs: 20,
      consumeTimeoutMs: 2,
      ...options,
      config: { 'bootstrap.servers': 'fake:9092', 'group.id': 'g', ...(options.config ?? {}) },
    },
    { consumerFactory: factory as never, ...internals },
  );
  const events: RebalanceEvent[] = [];
  consumer.rebalances$.subscribe((e) => events.push(e));
  return { consumer, fake, events };
}

/** Waits for a condition with a deadline, naming it when the deadline passes. */
export async function until(
  condition: () => boolean,
  what: string,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A promise with its resolve exposed: a handler that waits until the test opens it. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

/** The offset the fake broker holds as committed for a partition of {@link T}. */
export const committed = (h: Harness, partition = 0): number | undefined =>
  h.fake().commits.get(`${T}[${partition}]`);

/** Settles `p` and says how long it took, or fails past `withinMs`. */
export async function settledWithin(p: Promise<unknown>, withinMs: number): Promise<number> {
  const startedAt = Date.now();
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await until(() => done, 'close() to settle', withinMs);
  return Date.now() - startedAt;
}
