/**
 * `processTransactional()`'s processing mode and the transactional unit behind it: its options
 * resolved, the consumer's transactional producer (its transactional.id chosen and logged), the
 * unit's host over the engine, and a mode whose settle hands each finished message's records to
 * the unit instead of acking it (the unit acks once they are in the open transaction). The unit
 * itself is transactions/.
 */
import { ClientOAuth } from '../binding/oauth-bearer';
import type { HandlerTracer } from '../../tracing';
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { ConsumerEngine } from '../loop/consumer-engine';
import type { ConsumerObservability } from '../observe/observability';
import {
  TransactionalProducer,
  transactionalProducerFactoryOf,
} from '../transactions/transactional-producer';
import type { TransactionalProducerFactory } from '../transactions/transactional-producer';
import { Transactions } from '../transactions/transactions';
import { recordsOf } from '../transactions/output-records';
import { resolveTransactionalOptions } from '../../transactional-options';
import type {
  OutputRecord,
  ResolvedTransactionalOptions,
  TransactionalHandler,
  TransactionalOptions,
} from '../../transactional-options';
import type { DecodedMessage, Processed } from '../../types';
import { singleMode } from './processing-mode';
import type { ProcessingMode } from './processing-mode';

/** What the transactional mode uses of its consumer. */
export interface TransactionalModeHost {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly engine: ConsumerEngine;
  readonly observability: ConsumerObservability;
  /** Test seam: builds the transactional producer. */
  readonly producerFactory: TransactionalProducerFactory | undefined;
  readonly tracer: HandlerTracer | undefined;
}

/**
 * The options of one `processTransactional()` call resolved, its transactional unit and its
 * processing mode. Nothing starts here: the unit is installed and started by the subscription
 * that runs the pipeline.
 */
export function transactionalMode<K, V>(
  handler: TransactionalHandler<K, V>,
  options: TransactionalOptions<K, V>,
  host: TransactionalModeHost,
): {
  readonly resolved: ResolvedTransactionalOptions;
  readonly unit: Transactions;
  readonly mode: ProcessingMode<readonly OutputRecord[], K, V, Processed<readonly OutputRecord[]>>;
} {
  const resolved = resolveTransactionalOptions(
    options as TransactionalOptions<unknown, unknown>,
    host.settings,
  );
  const logger = host.logger.child({
    component: 'transactions',
    transactionalId: resolved.transactionalId,
  });
  logger.info(
    { identity: resolved.identity, transactionTimeoutMs: resolved.transactionTimeoutMs },
    resolved.identity === 'random'
      ? 'transactional producer: a random transactional.id (no instanceId, group.instance.id or StatefulSet pod name), so a crash leaves its open transaction blocking read_committed readers of the outputs until transaction.timeout.ms'
      : 'transactional producer: transactional.id and transaction.timeout.ms chosen',
  );
  // A killed member's open transaction holds its partitions' next owner (which waits for it, up to
  // max.poll.interval.ms: docs/exactly-once.md, "Where a partition starts") until the broker
  // aborts it, up to transaction.timeout.ms plus its 10 s scan after the transaction began.
  const { maxPollIntervalMs } = host.settings;
  if (resolved.transactionTimeoutMs + 10_000 >= maxPollIntervalMs) {
    logger.warn(
      { transactionTimeoutMs: resolved.transactionTimeoutMs, maxPollIntervalMs },
      'transaction.timeout.ms (+ the broker’s 10 s abort scan) is not below max.poll.interval.ms: after a crash, the next owner of its partitions may stop with a StartPositionError before the broker aborts the open transaction; lower transaction.timeout.ms or raise max.poll.interval.ms',
    );
  }
  const producer = new TransactionalProducer(
    resolved.transactionalId,
    resolved.producerConfig,
    (err) =>
      err.fatal
        ? logger.error({ err }, 'transactional producer: fatal error')
        : logger.warn({ err }, 'transactional producer error'),
    host.producerFactory ?? transactionalProducerFactoryOf(host.settings.binding),
    new ClientOAuth(
      host.settings.oauthBearerToken,
      logger.child({ component: 'oauthbearer' }),
      host.settings.connectTimeoutMs,
    ),
  );
  const unit = new Transactions(producer, resolved, host.settings, logger, {
    owned: () => host.engine.controls(),
    owns: (c) => host.engine.owns(c),
    consumer: () => (host.engine.clientUsable ? host.engine.client.raw : undefined),
    seek: (tp, offset) => host.engine.seek(tp, { offset }),
    fail: (err) => host.engine.failWith(err),
    changed: () => host.engine.changed(),
    observer: () => host.engine.observer,
    publish: (event) => host.engine.publish(event),
    ...(host.tracer === undefined ? {} : { tracer: host.tracer }),
  });
  const instrumented = host.observability.instrument((m: DecodedMessage<K, V>) =>
    recordsOf(handler(m)),
  );
  const single = singleMode<readonly OutputRecord[], K, V>(instrumented);
  const mode: ProcessingMode<readonly OutputRecord[], K, V, Processed<readonly OutputRecord[]>> = {
    ...single,
    settle: (partition, messages, result) => {
      for (const m of messages) unit.settle(partition, m, result ?? []);
    },
  };
  return { resolved, unit, mode };
}
