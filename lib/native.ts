/**
 * The native binding's facts: the librdkafka version and features node-rdkafka was built with, and
 * a check that fails with a {@link NativeFeatureMissingError} naming the Debian packages to install.
 */
import * as Kafka from 'node-rdkafka';
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

/** The installed librdkafka's version and compiled-in features. */
export function nativeInfo(): { librdkafkaVersion: string; features: readonly string[] } {
  return { librdkafkaVersion: Kafka.librdkafkaVersion, features: Kafka.features };
}

/** Throws {@link NativeFeatureMissingError} naming the Debian packages to install when features are absent. */
export function assertNativeFeatures(required: readonly string[] = REQUIRED_FEATURES): void {
  const have = new Set(Kafka.features);
  const missing = required.filter((f) => !have.has(f));
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((f) => FEATURE_PACKAGES[f] ?? `the library for ${f}`))];
  throw new NativeFeatureMissingError(
    `node-rdkafka's librdkafka ${Kafka.librdkafkaVersion} was built without ${missing.join(', ')}. ` +
      `Install ${packages.join(', ')} and rebuild it (npm rebuild node-rdkafka).`,
    missing,
  );
}
