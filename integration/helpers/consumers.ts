/**
 * Library consumers for one integration test: built against the test cluster with a per-test log
 * file, and closed (with their subscriptions) after each test, whatever its outcome.
 */
import type { Subscription } from 'rxjs';
import { ReactiveConsumer } from './binding';
import type { ReactiveConsumerOptions } from '../../lib';
import { BROKERS } from './kafka';
import type { TestOutput } from './output';

export type ConsumerOptions = Partial<ReactiveConsumerOptions> & {
  config: Record<string, unknown>;
};

export interface TestConsumers {
  /** A consumer (earliest reset, 200 ms commits unless overridden) closed after the test. */
  consumer(name: string, options: ConsumerOptions): ReactiveConsumer;
  /** Subscriptions to end after the test. */
  readonly subs: Subscription[];
}

/** Registers the cleanup hook in the enclosing `describe`. */
export function useConsumers(
  output: TestOutput,
  defaults: Partial<ReactiveConsumerOptions> = {},
): TestConsumers {
  const subs: Subscription[] = [];
  let consumers: ReactiveConsumer[] = [];
  afterEach(async () => {
    subs.splice(0).forEach((s) => s.unsubscribe());
    await Promise.all(consumers.map((c) => c.close()));
    consumers = [];
  });
  return {
    subs,
    consumer(name, options) {
      const c = new ReactiveConsumer({
        topicConfig: { 'auto.offset.reset': 'earliest' },
        topics: [],
        logger: output.logger(name),
        commitIntervalMs: 200,
        ...defaults,
        ...options,
        config: { 'bootstrap.servers': BROKERS, ...options.config },
      } as ReactiveConsumerOptions);
      consumers.push(c);
      return c;
    },
  };
}
