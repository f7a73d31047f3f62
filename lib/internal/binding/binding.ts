/**
 * The consumer's binding (the `binding` option): checked once where the options resolve, then the
 * one source of every client a consumer creates. node-rdkafka is the default. A module that is not
 * node-rdkafka-shaped is a ConfigError naming what it lacks.
 */
import * as Kafka from 'node-rdkafka';
import type { BindingInfo, KafkaBinding } from '../../binding';
import { ConfigError } from '../../errors';
import { learnErrorDescriptions } from './rdkafka';

/** node-rdkafka as installed with the library. */
export const defaultBinding: KafkaBinding = Kafka as unknown as KafkaBinding;

let stockVersion: string | undefined;
function stockPackageVersion(): string {
  if (stockVersion === undefined) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const pkg = require('node-rdkafka/package.json') as { version?: unknown };
      stockVersion = typeof pkg.version === 'string' ? pkg.version.replace(/^v/, '') : 'unknown';
    } catch {
      stockVersion = 'unknown';
    }
  }
  return stockVersion;
}

const CLASSES = ['KafkaConsumer', 'Producer'] as const;

/**
 * Two bindings are one module when their classes are the same (an ES namespace object and
 * `require()`'s exports of one module are different objects with the same classes).
 */
export const sameBinding = (a: KafkaBinding, b: KafkaBinding): boolean =>
  a.KafkaConsumer === b.KafkaConsumer && a.Producer === b.Producer;

/** `binding` as given: undefined → node-rdkafka; anything else must be node-rdkafka-shaped. */
export function resolveBinding(input: unknown, key = 'binding'): KafkaBinding {
  if (input === undefined) return defaultBinding;
  if (input === null || (typeof input !== 'object' && typeof input !== 'function')) {
    throw new ConfigError(
      `Expected \`${key}\` to be a node-rdkafka-compatible module (what require('node-rdkafka') returns), got ${input === null ? 'null' : typeof input}`,
      key,
    );
  }
  const m = input as Record<string, unknown>;
  const missing: string[] = CLASSES.filter((c) => typeof m[c] !== 'function');
  const admin = m.AdminClient as { create?: unknown } | undefined;
  if (typeof admin?.create !== 'function') missing.push('AdminClient');
  if (typeof m.librdkafkaVersion !== 'string') missing.push('librdkafkaVersion');
  if (!Array.isArray(m.features)) missing.push('features');
  if (missing.length > 0) {
    throw new ConfigError(
      `Expected \`${key}\` to be a node-rdkafka-compatible module (what require('node-rdkafka') returns): it has no ${missing.join(', ')}`,
      key,
    );
  }
  const binding = input as KafkaBinding;
  if (typeof binding.err2str === 'function') learnErrorDescriptions(binding.err2str);
  return binding;
}

/** The native client under a node-rdkafka client object (`_client`), if it has one. */
function nativeClient(client: unknown): Record<string, unknown> | undefined {
  const c = (client as { _client?: unknown } | undefined)?._client;
  return typeof c === 'object' && c !== null ? (c as Record<string, unknown>) : undefined;
}

/** Whether a consumer made by the binding converts batches natively (`consumeBatch`). */
export function hasBatchConversion(consumer: unknown): boolean {
  return typeof nativeClient(consumer)?.consumeBatch === 'function';
}

/**
 * What `health()` and the start log say of the binding. `consumer`, when there is one, tells
 * whether batch conversion is on; without it, the module's own `batchConversion` flag does.
 */
export function bindingInfo(binding: KafkaBinding, consumer?: unknown): BindingInfo {
  const stock = sameBinding(binding, defaultBinding);
  const flag = (binding as { batchConversion?: unknown }).batchConversion;
  return {
    name: stock ? 'node-rdkafka' : (binding.name ?? 'unknown'),
    version: stock ? stockPackageVersion() : (binding.version ?? 'unknown'),
    librdkafkaVersion: binding.librdkafkaVersion,
    batchConversion:
      consumer !== undefined && nativeClient(consumer) !== undefined
        ? hasBatchConversion(consumer)
        : flag === true,
  };
}

/**
 * A consumer and the transactional producer that sends its offsets must come from one module:
 * `sendOffsetsToTransaction` unwraps the consumer's native object, which a producer of another
 * build cannot read.
 */
export function assertSameBinding(consumerBinding: KafkaBinding, producerBinding: unknown): void {
  if (producerBinding === undefined) return;
  const given = resolveBinding(producerBinding);
  if (sameBinding(given, consumerBinding)) return;
  throw new ConfigError(
    "processTransactional(): `binding` differs from the consumer's `binding`: the transactional producer must come from the same module as the consumer (sendOffsetsToTransaction hands it the consumer's native object); leave it out to use the consumer's",
    'binding',
  );
}
