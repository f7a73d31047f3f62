import pino from 'pino';
import type { Logger } from 'pino';
import { resolveSettings } from '../../lib/internal/settings/resolve-settings';
import type { ConsumerSettings, ReactiveConsumerOptions } from '../../lib/config';
import { ConsumerClient } from '../../lib/internal/binding/consumer-client';
import { FlowControl } from '../../lib/internal/loop/flow-control';
import { Shutdown } from '../../lib/internal/loop/shutdown';
import { Conditions } from '../../lib/internal/loop/wait-conditions';
import { PartitionLoggers } from '../../lib/internal/observe/partition-loggers';
import { Assignments } from '../../lib/internal/rebalance/assignments';
import type { RebalanceCallback } from '../../lib/internal/binding/rdkafka';
import type { TopicPartition } from '../../lib/types';
import { FakeConsumer } from '../fakes/fake-consumer';
import type { FakeOptions } from '../fakes/fake-consumer';

/**
 * A ConsumerClient over the fake binding, for specs of the units that use the client directly.
 * `onRebalance` receives the fake's rebalance callbacks (ignored by default).
 */
export function clientOverFake(
  options: Partial<ReactiveConsumerOptions> = {},
  fakeOptions: FakeOptions = {},
  onRebalance: RebalanceCallback = () => undefined,
): {
  client: ConsumerClient;
  fake: () => FakeConsumer;
  settings: ConsumerSettings;
  logger: Logger;
} {
  const settings = resolveSettings({
    config: { 'bootstrap.servers': 'fake:9092', 'group.id': 'g' },
    topics: ['orders'],
    ...options,
  });
  const logger = pino({ level: 'silent' });
  let fake!: FakeConsumer;
  const client = new ConsumerClient(
    settings,
    logger,
    onRebalance,
    (g) => (fake = new FakeConsumer(g as Record<string, unknown>, fakeOptions)) as never,
  );
  return { client, fake: () => fake, settings, logger };
}

/**
 * Flow control over the fake binding for the partitions the spec gives to `owned` (an
 * Assignments: `owned.take(control)`), its resumes reported to `resumed`.
 */
export function flowOverFake(
  options: Partial<ReactiveConsumerOptions>,
  resumed: (partitions: readonly TopicPartition[]) => void,
) {
  const { client, fake, settings, logger } = clientOverFake(options);
  (fake() as unknown as { connected: boolean }).connected = true;
  const owned = new Assignments();
  const flow = new FlowControl(client, settings, logger, {
    assignments: owned,
    shutdown: new Shutdown(new Conditions(), () => undefined),
    loggers: new PartitionLoggers(logger),
    fetchers: { resumed },
    running: () => true,
  });
  return { flow, fake, owned };
}
