/**
 * The binding the integration and chaos suites run the library on: node-rdkafka, or the companion
 * build (fast-binding/) when KAFKA_TEST_BINDING=fast (`make test-fast-binding`). The suites import
 * ReactiveConsumer from here, so every consumer they start (and its producers) is built from it;
 * the helpers' own clients (producing inputs, reading what Kafka holds) stay on node-rdkafka.
 */
import { resolve } from 'node:path';
import { ReactiveConsumer as LibraryConsumer } from '../../lib';
import type { KafkaBinding, ReactiveConsumerOptions } from '../../lib';

function load(): KafkaBinding | undefined {
  const which = process.env.KAFKA_TEST_BINDING ?? 'stock';
  if (which === 'stock' || which === '') return undefined;
  if (which === 'fast') {
    // By path (the Makefile sets it; else from the repository root, where the suites run): the
    // worker processes' bundles live elsewhere, so no path relative to this file would do.
    const path = process.env.KAFKA_TEST_BINDING_MODULE ?? resolve('fast-binding');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(path) as KafkaBinding;
  }
  throw new Error(`KAFKA_TEST_BINDING must be 'stock' or 'fast', got '${which}'`);
}

/** The binding under test; undefined for the library's default (node-rdkafka). */
export const testBinding: KafkaBinding | undefined = load();

/** ReactiveConsumer on the binding under test (an explicit `binding` option wins). */
export class ReactiveConsumer extends LibraryConsumer {
  constructor(options: ReactiveConsumerOptions) {
    super(
      testBinding !== undefined && options.binding === undefined
        ? { ...options, binding: testBinding }
        : options,
    );
  }
}
