/**
 * The consumer's test seams: the internal second argument of `ReactiveConsumer`'s constructor,
 * through which specs put fakes in place of the binding, the producers and the completed-offset
 * store, and fix the source of retry jitter. Stripped from the published declarations.
 */
import type { ConsumerSettings } from '../../config';
import type { ConsumerFactory } from '../binding/rdkafka';
import type { CompletedStore } from '../commit/completed-store';
import type { ProducerFactory } from '../process/dead-letter';
import type { TransactionalProducerFactory } from '../transactions/transactional-producer';

/** @internal Test seams; not part of the public API. */
export interface ReactiveConsumerInternals {
  consumerFactory?: ConsumerFactory;
  producerFactory?: ProducerFactory;
  /** Builds the transactional producer of processTransactional(). */
  transactionalProducerFactory?: TransactionalProducerFactory;
  /** Replaces the Kafka-backed completed-offset store. */
  storeFactory?: (settings: ConsumerSettings) => CompletedStore;
  /** Source of retry jitter. */
  random?: () => number;
  /** How long after `process()` an Observable never subscribed is warned about (default 5 s). */
  notSubscribedWarnMs?: number;
}
