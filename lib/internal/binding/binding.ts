/**
 * The consumer's binding (the `binding` option): checked once where the options resolve, then the
 * one source of every client a consumer creates. node-rdkafka is the default. A module that is not
 * node-rdkafka-shaped is a ConfigError naming what it lacks.
 */
import { EventEmitter } from 'node:events';
import * as Kafka from 'node-rdkafka';
import type { BindingInfo, KafkaBinding } from '../../binding';
import { ConfigError } from '../../errors';
import { showValue } from '../settings/show-value';
import { learnErrorDescriptions } from './rdkafka';

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

/** The prototypes a class's instances inherit, below the ones every module shares. */
function ownChain(cls: unknown): Set<object> {
  const chain = new Set<object>();
  let p: unknown = (cls as { prototype?: unknown }).prototype;
  while (
    typeof p === 'object' &&
    p !== null &&
    p !== Object.prototype &&
    p !== EventEmitter.prototype
  ) {
    chain.add(p);
    p = Object.getPrototypeOf(p);
  }
  return chain;
}

/**
 * Whether two client classes come from one module: node-rdkafka's `KafkaConsumer` and `Producer`
 * (and subclasses of them) share that module's `Client` base; another build has its own. An ES
 * namespace and `require()`'s exports of one module are different objects with the same classes.
 */
export function sameModule(a: unknown, b: unknown): boolean {
  const chain = ownChain(a);
  for (const p of ownChain(b)) if (chain.has(p)) return true;
  return false;
}

/** The exact node-rdkafka installed with the library (not a subclass of its clients). */
const isStock = (b: KafkaBinding): boolean =>
  b.KafkaConsumer === Kafka.KafkaConsumer && b.Producer === Kafka.Producer;

const refuse = (key: string, what: string): never => {
  throw new ConfigError(
    `Expected \`${key}\` to be a node-rdkafka-compatible module (what require('node-rdkafka') returns)${what}`,
    key,
  );
};

/**
 * `binding` as given: undefined → node-rdkafka; anything else must be node-rdkafka-shaped. An ES
 * namespace of a CommonJS module (`import * as m` in native ESM: only `default`) is read through
 * its default export. Returns a snapshot of what the library uses (a later change to the module
 * changes nothing; the settings hold no whole module).
 */
export function resolveBinding(input: unknown, key = 'binding'): KafkaBinding {
  if (input === undefined) return defaultBinding;
  if (input === null || (typeof input !== 'object' && typeof input !== 'function')) {
    refuse(key, `, got ${input === null ? 'null' : typeof input}`);
  }
  try {
    let m = input as Record<string, unknown>;
    if (typeof m.then === 'function') {
      refuse(key, ", got a Promise: `await import('node-rdkafka')` first");
    }
    const inner = m.default as Record<string, unknown> | undefined;
    if (typeof m.KafkaConsumer !== 'function' && typeof inner?.KafkaConsumer === 'function') {
      m = inner; // the CommonJS module behind an ES namespace
    }
    const missing: string[] = CLASSES.filter(
      (c) =>
        typeof m[c] !== 'function' ||
        typeof (m[c] as { prototype?: unknown }).prototype !== 'object',
    );
    const admin = m.AdminClient as { create?: unknown } | undefined;
    if (typeof admin?.create !== 'function') missing.push('AdminClient');
    if (typeof m.librdkafkaVersion !== 'string') missing.push('librdkafkaVersion');
    if (!Array.isArray(m.features)) missing.push('features');
    if (missing.length > 0) refuse(key, `: it has no ${missing.join(', ')}`);
    if (!sameModule(m.KafkaConsumer, m.Producer)) {
      refuse(
        key,
        ": its KafkaConsumer and Producer come from different modules (a transactional producer must read its consumer's native object)",
      );
    }
    const err2str =
      typeof m.err2str === 'function' ? (m.err2str as (c: number) => string) : undefined;
    const binding: KafkaBinding = Object.freeze({
      KafkaConsumer: m.KafkaConsumer as KafkaBinding['KafkaConsumer'],
      Producer: m.Producer as KafkaBinding['Producer'],
      AdminClient: m.AdminClient as KafkaBinding['AdminClient'],
      librdkafkaVersion: m.librdkafkaVersion as string,
      features: Object.freeze([...(m.features as string[])].map(String)),
      ...(typeof m.name === 'string' ? { name: m.name } : {}),
      ...(typeof m.version === 'string' ? { version: m.version } : {}),
      ...(err2str ? { err2str } : {}),
      ...(m.batchConversion === true ? { batchConversion: true } : {}),
    });
    if (err2str) learnErrorDescriptions(err2str);
    return binding;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    return refuse(key, `: reading it failed (${err instanceof Error ? err.message : String(err)})`);
  }
}

/** node-rdkafka as installed with the library (a snapshot, as every resolved binding). */
export const defaultBinding: KafkaBinding = resolveBinding(Kafka);

/**
 * `sharedBatchBuffers` as given: `false`, `true` or a whole number of bytes ≥ 1, and one of the
 * last two only with a binding whose consumer can share its batch buffers
 * (`setBatchBufferSharing`, the companion build's) and, for a number, bound them
 * (`KafkaConsumer.batchBufferBounds`: a build of the companion before 0.2.0 cannot).
 */
export function resolveSharedBatchBuffers(value: unknown, binding: KafkaBinding): boolean | number {
  if (value === undefined || value === false) return false;
  const bytes = typeof value === 'number';
  if (value !== true && !(bytes && Number.isInteger(value) && value >= 1 && value <= 0xffffffff)) {
    throw new ConfigError(
      `Expected \`sharedBatchBuffers\` to be false, true or a whole number of bytes ≥ 1, got ${showValue(value)}`,
      'sharedBatchBuffers',
    );
  }
  const consumerClass = binding.KafkaConsumer as {
    prototype?: { setBatchBufferSharing?: unknown };
    batchBufferBounds?: unknown;
  };
  if (typeof consumerClass.prototype?.setBatchBufferSharing !== 'function') {
    throw new ConfigError(
      `\`sharedBatchBuffers\` needs a binding that converts batches (its KafkaConsumer has setBatchBufferSharing, as reactive-rdkafka-fast-binding's does); ${bindingInfo(binding).name} has not`,
      'sharedBatchBuffers',
    );
  }
  if (bytes && consumerClass.batchBufferBounds !== true) {
    const { name, version } = bindingInfo(binding);
    throw new ConfigError(
      `\`sharedBatchBuffers: ${value}\` needs a build of the binding that bounds its shared buffers (KafkaConsumer.batchBufferBounds, reactive-rdkafka-fast-binding 0.2.0 and later); ${name} ${version} has not: rebuild it (make fast-binding), or pass true`,
      'sharedBatchBuffers',
    );
  }
  return value;
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
export function bindingInfo(
  binding: KafkaBinding,
  consumer?: unknown,
  sharedBatchBuffers: boolean | number = false,
): BindingInfo {
  const stock = isStock(binding);
  const flag = (binding as { batchConversion?: unknown }).batchConversion;
  return {
    name: stock ? 'node-rdkafka' : (binding.name ?? 'unknown'),
    version: stock ? stockPackageVersion() : (binding.version ?? 'unknown'),
    librdkafkaVersion: binding.librdkafkaVersion,
    batchConversion:
      consumer !== undefined && nativeClient(consumer) !== undefined
        ? hasBatchConversion(consumer)
        : flag === true,
    sharedBatchBuffers,
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
  if (sameModule(consumerBinding.KafkaConsumer, given.Producer)) return;
  throw new ConfigError(
    "processTransactional(): `binding` differs from the consumer's `binding`: the transactional producer must come from the same module as the consumer (sendOffsetsToTransaction hands it the consumer's native object); leave it out to use the consumer's",
    'binding',
  );
}
