/**
 * An optional Prometheus adapter: registers a consumer's metrics on a user-supplied `prom-client`
 * registry. `prom-client` is an optional peer dependency, loaded only when this function is called
 * (or passed in as `client`). Metric names and labels: docs/observability.md.
 */
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';
import { ConfigError } from './errors';
import { observabilityOf } from './internal/observe/observability';
import type { Observation } from './internal/observe/observability';
import { createPrometheusMetrics } from './internal/observe/prometheus-metrics';
import type { Prom, Shared } from './internal/observe/prometheus-metrics';
import type { ReactiveConsumer } from './reactive-consumer';

/**
 * The subset of a prom-client `Registry` the adapter uses (declared here so that the library's
 * types do not depend on prom-client being installed).
 */
export interface PrometheusRegistry {
  /** prom-client's `Registry#getSingleMetric`. */
  getSingleMetric(name: string): unknown;
  /** prom-client's `Registry#removeSingleMetric`. */
  removeSingleMetric(name: string): void;
  /** prom-client's `Registry#registerMetric`. */
  registerMetric(metric: never): void;
}

/** Options of {@link registerPrometheusMetrics}. */
export interface PrometheusOptions {
  /** The prom-client `Registry` to register on (`new Registry()` or `register`, the global one). */
  registry: PrometheusRegistry;
  /** Prefix of every metric name. @default 'kafka_consumer_' */
  prefix?: string;
  /**
   * The prom-client module to build metrics with; pass it when the application's prom-client is not
   * the one this package would `require`.
   * @default require('prom-client')
   */
  client?: unknown;
}

const shared = new WeakMap<object, Map<string, Shared>>();

function loadClient(client: unknown): Prom {
  if (client !== undefined) return client as Prom;
  try {
    return createRequire(__filename)('prom-client') as Prom;
  } catch (err) {
    throw new ConfigError(
      'Expected the optional peer dependency `prom-client` to be installed (npm install prom-client), or passed as `client`',
      'client',
      { cause: err },
    );
  }
}

/**
 * Registers the consumer's metrics on a prom-client registry. Counters and gauges are read from
 * `consumer.metrics()` at scrape time; histograms are observed as events happen. Several consumers
 * may share one registry (values of consumers with the same labels add up). Returns a function
 * that unregisters the consumer (and removes the metrics once no consumer is left).
 *
 * @example
 * import { Registry } from 'prom-client';
 * const registry = new Registry();
 * registerPrometheusMetrics(consumer, { registry });
 * // GET /metrics → res.end(await registry.metrics())
 */
export function registerPrometheusMetrics(
  consumer: ReactiveConsumer,
  options: PrometheusOptions,
): () => void {
  const obs = observabilityOf(consumer);
  if (obs === undefined) {
    throw new ConfigError('Expected `consumer` to be a ReactiveConsumer', 'consumer');
  }
  const registry = options?.registry as unknown as PromClient.Registry | undefined;
  if (
    typeof registry !== 'object' ||
    registry === null ||
    typeof registry.registerMetric !== 'function'
  ) {
    throw new ConfigError('Expected `registry` to be a prom-client Registry', 'registry');
  }
  const prefix = options.prefix ?? 'kafka_consumer_';
  if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix)) {
    throw new ConfigError(
      `Expected \`prefix\` to be a valid Prometheus metric name prefix, got ${JSON.stringify(prefix)}`,
      'prefix',
    );
  }
  let byPrefix = shared.get(registry);
  if (byPrefix === undefined) {
    byPrefix = new Map();
    shared.set(registry, byPrefix);
  }
  let metrics = byPrefix.get(prefix);
  if (metrics === undefined) {
    metrics = createPrometheusMetrics(loadClient(options.client), registry, prefix);
    byPrefix.set(prefix, metrics);
  }
  const m = metrics;
  m.consumers.add(obs);
  const group = consumer.settings.groupId;
  const stop = obs.observe((o: Observation) => {
    switch (o.kind) {
      case 'handler':
        m.handlerDuration.observe(
          { group, topic: o.topic, result: o.ok ? 'ok' : 'failed' },
          o.ms / 1000,
        );
        break;
      case 'commit':
        m.commitDuration.observe(
          { group, kind: o.commit, result: o.ok ? 'ok' : 'failed' },
          o.ms / 1000,
        );
        break;
      case 'rebalance':
        m.phaseDuration.observe({ group, phase: o.phase }, o.ms / 1000);
        break;
      default: {
        const never: never = o;
        throw new Error(`unknown observation ${String(never)}`);
      }
    }
  });
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    stop();
    m.consumers.delete(obs);
    if (m.consumers.size === 0) {
      for (const name of m.names) registry.removeSingleMetric(name);
      byPrefix.delete(prefix);
    }
  };
}
