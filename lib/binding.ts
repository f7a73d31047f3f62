/**
 * The native binding the library builds its Kafka clients from: node-rdkafka by default, or a
 * module with node-rdkafka's JS API passed as the consumer's `binding` option (such as this
 * project's companion build with batch conversion, see the README's "Fast path").
 */
import type * as Kafka from 'node-rdkafka';

/**
 * A node-rdkafka-compatible module: what `require('node-rdkafka')` returns. The library builds
 * every client of a consumer from it (the consumer, the dead-letter producer, the transactional
 * producer, the completed-offset store's clients). `name` and `version` are optional: a module
 * without them is named by its librdkafka version only in `health()`.
 */
export interface KafkaBinding {
  readonly KafkaConsumer: typeof Kafka.KafkaConsumer;
  readonly Producer: typeof Kafka.Producer;
  readonly AdminClient: typeof Kafka.AdminClient;
  /** The librdkafka version the module was built with, e.g. `2.12.0`. */
  readonly librdkafkaVersion: string;
  /** librdkafka's compiled-in features (`zstd`, `ssl`, `sasl_scram`…). */
  readonly features: readonly string[];
  /** The package's name, when the module says it. */
  readonly name?: string;
  /** The package's version, when the module says it. */
  readonly version?: string;
  /** librdkafka's `rd_kafka_err2str`, when the module exposes it (error descriptions → codes). */
  readonly err2str?: (code: number) => string;
}

/** Which binding a consumer runs on, as `health().details.binding` and the start log say. */
export interface BindingInfo {
  /** The package's name (`node-rdkafka` for the default), or `unknown`. */
  readonly name: string;
  /** The package's version, or `unknown`. */
  readonly version: string;
  readonly librdkafkaVersion: string;
  /**
   * The consumer's `consume(n)` converts a batch of messages at once, off the main thread
   * (the companion build's `consumeBatch`); false on the stock binding.
   */
  readonly batchConversion: boolean;
  /**
   * How values and keys share memory (the consumer's `sharedBatchBuffers`): `true` views of one
   * buffer per partition and batch, a number views of buffers of at most that many bytes, `false`
   * copies of their own.
   */
  readonly sharedBatchBuffers: boolean | number;
}
