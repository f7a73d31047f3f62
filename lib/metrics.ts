/**
 * The metrics a consumer reports: `consumer.metrics()` (a snapshot) and `consumer.metrics$` (one
 * snapshot every `metricsIntervalMs`). Counters are cumulative since the consumer was created;
 * gauges describe the moment of the snapshot. See docs/observability.md.
 */
import type { PartitionState } from './internal/partition/partition-control';
import type { RebalanceProtocol, TopicPartition } from './types';

export type { PartitionState };

/**
 * A duration distribution, kept as Prometheus keeps a histogram: `buckets[i].count` is the number
 * of observations ≤ `buckets[i].leMs` (cumulative); observations above the last bound only count in
 * `count`.
 */
export interface DurationHistogram {
  /** Number of observations. */
  readonly count: number;
  /** Sum of the observed durations, in ms. */
  readonly sumMs: number;
  /** Longest observed duration, in ms (0 before the first). */
  readonly maxMs: number;
  /** Cumulative counts per upper bound (ms). */
  readonly buckets: readonly { readonly leMs: number; readonly count: number }[];
}

/** Message counters: cumulative, per consumer or per partition. */
export interface MessageCounters {
  /** Messages handed to a partition pipeline. */
  readonly received: number;
  /** Handler invocations that succeeded (`process()` only). */
  readonly processed: number;
  /** Handler invocations that failed: threw, rejected or errored (`process()` only). */
  readonly failed: number;
}

/** One partition the consumer owns at the moment of the snapshot. */
export interface PartitionMetrics extends TopicPartition, MessageCounters {
  /** The assignment generation that owns the partition. */
  readonly generation: number;
  /** `active`, or `ending`/`fenced` while being revoked. */
  readonly state: PartitionState;
  /** Handlers running now (`process()`), or delivered, unacknowledged messages (`partitions$`). */
  readonly inFlight: number;
  /** Delivered messages not started yet (waiting for a concurrency slot). */
  readonly buffered: number;
  /** Bytes of delivered, unfinished messages (value + key + 512 B each, as `maxBufferedBytes` counts them). */
  readonly bufferedBytes: number;
  /** Paused by the library for backpressure. */
  readonly paused: boolean;
  /** The last offset (next to read) this assignment committed, confirmed by the broker. */
  readonly lastCommitted: number | undefined;
  /**
   * Consumer lag: the partition's end offset minus the group's committed offset, from librdkafka's
   * statistics. Undefined until the first statistics report that knows both (or when
   * `statistics.interval.ms` is 0).
   */
  readonly lag: number | undefined;
  /** The partition's high watermark (end offset), from librdkafka's statistics. */
  readonly highWatermark: number | undefined;
  /** The group's committed offset as librdkafka's statistics report it. */
  readonly committedOffset: number | undefined;
}

/** Commit counters and latency (request sent → broker confirmation or failure). */
export interface CommitMetrics {
  /** Commit requests the broker confirmed. */
  readonly ok: number;
  /** Commit requests that failed or timed out. */
  readonly failed: number;
  /** Latency of every commit request, periodic and revoke-time. */
  readonly duration: DurationHistogram;
}

/** The phases of the last completed revoke. */
export interface LastRevoke {
  readonly generation: number;
  readonly protocol: RebalanceProtocol;
  readonly partitions: readonly TopicPartition[];
  /** Handlers in flight when the revoke arrived. */
  readonly inFlight: number;
  /** revoking → drained, in ms. */
  readonly drainMs: number;
  /** drained → committed, in ms. */
  readonly commitMs: number;
  /** committed → revoked (partitions released), in ms. */
  readonly releaseMs: number;
  /** revoking → revoked, in ms. */
  readonly totalMs: number;
  /** The drain deadline passed. */
  readonly timedOut: boolean;
  /** When the partitions were released (ms since the epoch). */
  readonly at: number;
}

/** Rebalance counters and phase durations. */
export interface RebalanceMetrics {
  /** `assigned` events. */
  readonly assignments: number;
  /** Completed revokes (`revoked` events). */
  readonly revokes: number;
  /** `lost` events. */
  readonly losses: number;
  /** Revokes whose drain deadline passed (`drained` with `timedOut`). */
  readonly drainTimeouts: number;
  /** Partitions received by assignments. */
  readonly partitionsAssigned: number;
  /** Partitions released by completed revokes. */
  readonly partitionsRevoked: number;
  /** Partitions lost. */
  readonly partitionsLost: number;
  /** revoking → drained. */
  readonly drain: DurationHistogram;
  /** drained → committed. */
  readonly commit: DurationHistogram;
  /** committed → revoked. */
  readonly release: DurationHistogram;
  /** revoking → revoked. */
  readonly total: DurationHistogram;
  /** The last completed revoke, if any. */
  readonly last: LastRevoke | undefined;
  /**
   * Wakes of librdkafka's broker threads: librdkafka resumes the partitions it paused for an
   * incremental rebalance (and the library resumes its own pauses) without waking the thread that
   * fetches them, which then sleeps up to a second; the library sends a small request to wake it
   * (docs/tuning.md, "Joining members").
   */
  readonly fetchWakes: FetchWakeMetrics;
}

/** See {@link RebalanceMetrics.fetchWakes}. */
export interface FetchWakeMetrics {
  /** After an incremental assign or unassign: every leader of the partitions held. */
  readonly afterRebalance: number;
  /** After a resume, of a leader none of whose other partitions was being fetched. */
  readonly afterResume: number;
  /** Requests sent for them (metadata and ListOffsets). */
  readonly requests: number;
}

/** A handler running longer than `stallThresholdMs`. */
export interface StalledHandler extends TopicPartition {
  readonly offset: number;
  readonly generation: number | undefined;
  /** When the handler started (ms since the epoch). */
  readonly startedAt: number;
  /** How long it has been running, in ms. */
  readonly elapsedMs: number;
}

/** A snapshot of a consumer's metrics. */
export interface ConsumerMetrics {
  /** When the snapshot was taken (ms since the epoch). */
  readonly at: number;
  /** The consumer's `group.id`. */
  readonly group: string;
  /** The consumer's lifecycle state. */
  readonly state: 'idle' | 'connecting' | 'running' | 'closing' | 'closed';
  /** Totals over every partition ever owned. */
  readonly messages: MessageCounters & {
    /** Messages of partitions not (or no longer) assigned, dropped without processing. */
    readonly lateDropped: number;
  };
  /** Duration of handler invocations (`process()` only). */
  readonly handlerDuration: DurationHistogram;
  /** Sum of `inFlight` over the owned partitions. */
  readonly inFlight: number;
  /** Sum of `buffered` over the owned partitions. */
  readonly buffered: number;
  /** The partitions owned now (including ones being revoked). */
  readonly partitions: readonly PartitionMetrics[];
  /** Partitions paused for backpressure now. */
  readonly pausedPartitions: readonly TopicPartition[];
  readonly commits: CommitMetrics;
  readonly rebalances: RebalanceMetrics;
  /** Handlers running longer than `stallThresholdMs` now. */
  readonly stalledHandlers: readonly StalledHandler[];
  /** Handlers that ever ran longer than `stallThresholdMs`. */
  readonly stalls: number;
  /** When the consume loop last returned from librdkafka (ms since the epoch; 0 before). */
  readonly lastPollAt: number;
  /** When librdkafka's last statistics report arrived (ms since the epoch; 0 before). */
  readonly statsAt: number;
  /** `processTransactional()` only: its transactions. */
  readonly transactions?: TransactionMetrics;
}

/** The transactions of `processTransactional()` since the consumer started. */
export interface TransactionMetrics {
  readonly transactionalId: string;
  /** Transactions the broker confirmed. */
  readonly committed: number;
  /** Transactions aborted (never visible to read_committed readers; their inputs are redone). */
  readonly aborted: number;
  /** Input messages and output records in committed transactions. */
  readonly messages: number;
  readonly records: number;
  /** Input messages and output records thrown away by aborts. */
  readonly abortedMessages: number;
  readonly abortedRecords: number;
  /** Output records the producer or the broker refused (each aborted its transaction). */
  readonly refusedRecords: number;
  /** Inputs skipped (`onFailure: 'skip'`) because an output record of theirs kept being refused. */
  readonly skippedInputs: number;
  /**
   * Transactional producers recreated with the same transactional.id after librdkafka refused an
   * abort fatally (not a fencing) for a transaction no commit of which was ever sent.
   */
  readonly recreatedProducers: number;
  /** The transactional producer now. */
  readonly state: 'starting' | 'open' | 'committing' | 'aborting' | 'failed' | 'closed';
  /** Commit requested → confirmed. */
  readonly duration: DurationHistogram;
}
