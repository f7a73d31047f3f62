/**
 * The native binding's facts: the librdkafka version and features node-rdkafka was built with, and
 * a check that fails with a {@link NativeFeatureMissingError} naming the Debian packages to install.
 */
import * as Kafka from 'node-rdkafka';
import type { KafkaBinding } from './binding';
import { NativeFeatureMissingError } from './errors';

/** librdkafka features the library (and its tests) need from the native build. */
export const REQUIRED_FEATURES = ['zstd', 'lz4', 'ssl', 'sasl_scram'] as const;

/** Debian package whose `-dev` files must be present when node-rdkafka compiles, per feature. */
const FEATURE_PACKAGES: Readonly<Record<string, string>> = {
  zstd: 'libzstd-dev',
  lz4: 'liblz4-dev',
  ssl: 'libssl-dev',
  sasl_scram: 'libssl-dev and libsasl2-dev',
  sasl_oauthbearer: 'libssl-dev',
  gzip: 'zlib1g-dev',
};

/** The binding the checks read: node-rdkafka unless another module (the `binding` option's) is given. */
type NativeFacts = Pick<KafkaBinding, 'librdkafkaVersion' | 'features'>;

/** A binding's librdkafka version and compiled-in features (node-rdkafka's by default). */
export function nativeInfo(binding: NativeFacts = Kafka): {
  librdkafkaVersion: string;
  features: readonly string[];
} {
  return { librdkafkaVersion: binding.librdkafkaVersion, features: binding.features };
}

/**
 * Throws {@link NativeFeatureMissingError} naming the Debian packages to install when a binding's
 * librdkafka lacks features (node-rdkafka's by default; pass the module given as `binding`).
 */
export function assertNativeFeatures(
  required: readonly string[] = REQUIRED_FEATURES,
  binding: NativeFacts = Kafka,
): void {
  const have = new Set(binding.features);
  const stock =
    binding === Kafka ||
    (binding as { KafkaConsumer?: unknown }).KafkaConsumer === Kafka.KafkaConsumer;
  const missing = required.filter((f) => !have.has(f));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((f) => FEATURE_PACKAGES[f] ?? `the library for ${f}`))];
  throw new NativeFeatureMissingError(
    `${stock ? "node-rdkafka's" : "The binding's"} librdkafka ${binding.librdkafkaVersion} was built without ${missing.join(', ')}. ` +
      `Install ${packages.join(', ')} and rebuild it (${stock ? 'npm rebuild node-rdkafka' : 'for the companion binding: make fast-binding'}).`,
    missing,
  );
}
