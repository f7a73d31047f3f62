import type * as Kafka from 'node-rdkafka';
import type { TestRecord } from './test-cluster';

/** A record to produce, as the producer's produce() takes its parts. @internal */
export interface ProduceArgs {
  readonly value: Buffer | null;
  readonly key: string | Buffer | undefined;
  readonly partition: number | null;
  readonly timestamp: number | null;
  readonly headers: Kafka.MessageHeader[] | undefined;
}

/** A `produce()` record (or a bare value) as produce() arguments. @internal */
export function produceArgs(raw: TestRecord | string | Buffer): ProduceArgs {
  const r: TestRecord = typeof raw === 'string' || Buffer.isBuffer(raw) ? { value: raw } : raw;
  return {
    value: r.value === null ? null : Buffer.from(r.value),
    key: r.key ?? undefined,
    partition: r.partition ?? null,
    timestamp: r.timestamp ?? null,
    headers:
      r.headers === undefined
        ? undefined
        : Object.entries(r.headers).map(([k, v]) => ({ [k]: v }) as Kafka.MessageHeader),
  };
}
