/**
 * Parses librdkafka's statistics JSON (`statistics.interval.ms`, delivered by node-rdkafka as the
 * `event.stats` event with the JSON in `message`) into the few fields the library reports: per
 * partition lag, committed offset and high watermark; the consumer group's state; which brokers are
 * up. Pure: no I/O. Field meanings: librdkafka's STATISTICS.md.
 */

/** What librdkafka reports about one assigned partition. */
export interface PartitionStats {
  readonly topic: string;
  readonly partition: number;
  /** End offset minus committed offset (`consumer_lag`); undefined when librdkafka does not know. */
  readonly lag: number | undefined;
  /** The group's committed offset as librdkafka knows it (`committed_offset`). */
  readonly committedOffset: number | undefined;
  /** The partition's high watermark (`hi_offset`). */
  readonly highWatermark: number | undefined;
  /** librdkafka's fetch state (`fetch_state`: none, active, stopped, offset-query, …). */
  readonly fetchState: string | undefined;
}

/** The parts of one librdkafka statistics report the library uses. */
export interface ClientStats {
  /** librdkafka's timestamp of the report (`ts`, µs, monotonic) — not wall time. */
  readonly ts: number | undefined;
  /** Partitions keyed by `tpKey(topic, partition)`. */
  readonly partitions: ReadonlyMap<string, PartitionStats>;
  /** Consumer group handler state (`cgrp.state`: up, wait-coord, …), if present. */
  readonly groupState: string | undefined;
  /** Consumer group join state (`cgrp.join_state`: steady, wait-join, wait-assign-call, …). */
  readonly joinState: string | undefined;
  /** Partitions librdkafka has assigned (`cgrp.assignment_size`). */
  readonly assignmentSize: number | undefined;
  /** Number of configured or learned brokers whose connection is up. */
  readonly brokersUp: number;
  /** Number of configured or learned brokers librdkafka knows. */
  readonly brokers: number;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null;
const num = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? v : undefined;
/** librdkafka uses -1 (and -1001 for logical offsets) for "unknown". */
const offset = (v: unknown): number | undefined => {
  const n = num(v);
  return n === undefined || n < 0 ? undefined : n;
};
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * Parses one statistics report. Returns undefined for anything that is not a librdkafka
 * statistics object (never throws).
 */
export function parseClientStats(
  raw: unknown,
  key: (topic: string, partition: number) => string,
): ClientStats | undefined {
  let json: unknown = raw;
  if (isObject(raw) && typeof raw.message === 'string') json = raw.message;
  if (typeof json === 'string') {
    try {
      json = JSON.parse(json);
    } catch {
      return undefined;
    }
  }
  if (!isObject(json)) return undefined;
  const partitions = new Map<string, PartitionStats>();
  if (isObject(json.topics)) {
    for (const [topic, t] of Object.entries(json.topics)) {
      if (!isObject(t) || !isObject(t.partitions)) continue;
      for (const p of Object.values(t.partitions)) {
        if (!isObject(p)) continue;
        const partition = num(p.partition);
        // Partition -1 is librdkafka's internal "unassigned" queue.
        if (partition === undefined || partition < 0) continue;
        partitions.set(key(topic, partition), {
          topic,
          partition,
          lag: offset(p.consumer_lag),
          committedOffset: offset(p.committed_offset),
          highWatermark: offset(p.hi_offset),
          fetchState: str(p.fetch_state),
        });
      }
    }
  }
  let brokers = 0;
  let brokersUp = 0;
  if (isObject(json.brokers)) {
    for (const b of Object.values(json.brokers)) {
      if (!isObject(b)) continue;
      // The internal pseudo-broker and logical ones (the group coordinator's alias) are no extra
      // connection to the cluster.
      if (b.source === 'internal' || b.source === 'logical') continue;
      brokers += 1;
      if (b.state === 'UP') brokersUp += 1;
    }
  }
  const cgrp = isObject(json.cgrp) ? json.cgrp : undefined;
  return {
    ts: num(json.ts),
    partitions,
    groupState: str(cgrp?.state),
    joinState: str(cgrp?.join_state),
    assignmentSize: num(cgrp?.assignment_size),
    brokersUp,
    brokers,
  };
}
