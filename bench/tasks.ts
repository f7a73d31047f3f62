/** What run.ts asks a child process to do, and what the child sends back over IPC. */
import type { ContenderId } from './contenders';
import type { ThroughputResult } from './meter';
import type { ProtocolName } from './settings';

export type Task =
  | {
      kind: 'throughput';
      brokers: string;
      contender: ContenderId;
      topic: string;
      groupId: string;
      expected: number;
    }
  | {
      kind: 'revoke';
      brokers: string;
      protocol: ProtocolName;
      variant: 'idle' | 'in-flight';
      partitions: number;
      cycles: number;
      backlog: number;
      handlerMs: [number, number];
      seed: number;
    }
  | {
      kind: 'join';
      brokers: string;
      client: 'reactive-rdkafka' | 'kafkajs';
      protocol: ProtocolName;
      partitions: number;
      members: number;
      rate: number;
      settleMs: number;
      observeMs: number;
      seed: number;
    }
  | {
      kind: 'ordering';
      brokers: string;
      topic: string;
      messages: number;
      ordering: 'partition' | 'key' | 'none';
      partitionConcurrency: number;
      maxLatencyMs: number;
      seed: number;
    }
  | {
      kind: 'transform';
      brokers: string;
      topic: string;
      partitions: number;
      messages: number;
      mode: 'transactional' | 'plain';
    }
  | {
      kind: 'memory';
      /** Whose memory: this library's process(), or node-rdkafka's consume(n) loop alone. */
      client: 'reactive-rdkafka' | 'raw-rdkafka';
      /** `fast`: the companion binding (fast-binding/) instead of node-rdkafka. */
      binding?: 'fast';
      /** Force a full GC before a sample at most this often (the child needs --expose-gc). */
      gcEveryMs?: number;
      brokers: string;
      topic: string;
      /** Partitions of the topic (the raw loop runs one handler per partition, as process() does). */
      partitions: number;
      backlog: number;
      sampleMs: number;
      intervalMs: number;
      handlerMs: number;
    };

export interface RevokeResult {
  kind: 'revoke';
  protocol: ProtocolName;
  variant: 'idle' | 'in-flight';
  /** revoking → revoked of each revoked partition, in ms (one sample per partition per revoke). */
  samplesMs: number[];
  /** Handlers in flight when each revoke arrived, summed over the revokes. */
  inFlight: number;
  revokes: number;
  timedOut: number;
}

export interface JoinResult {
  kind: 'join';
  client: 'reactive-rdkafka' | 'kafkajs';
  protocol: ProtocolName;
  /** Longest time no partition of the group made progress after the 7th member started, ms. */
  stallMs: number;
  /** The same measure over an equally long window before the join (the steady-state gaps). */
  baselineGapMs: number;
  /** Longest time one partition made no progress after the join, ms (the worst partition). */
  partitionPauseMs: number;
  /** The same per-partition measure before the join. */
  baselinePartitionPauseMs: number;
  /** The worst pause of a partition whose owner did not change (kept through the join), ms. */
  keptPartitionPauseMs: number | undefined;
  /** The worst pause of a partition that moved to another member, ms. */
  movedPartitionPauseMs: number | undefined;
  /** 7th member started → its first assignment (the group protocol's share), ms. */
  newMemberAssignedMs: number | undefined;
  /** 7th member started → its first processed message, ms. */
  newMemberFirstMs: number | undefined;
  produced: number;
  processed: number;
  /** Deliveries beyond the first of the same offset, over the whole run. */
  duplicates: number;
  /** Produced offsets never processed. */
  losses: number;
}

export interface MemorySample {
  t: number;
  rss: number;
  heapUsed: number;
  heapTotal?: number;
  external?: number;
  processed: number;
}

export interface MemoryResult {
  kind: 'memory';
  samples: MemorySample[];
  baselineRss: number;
  peakRss: number;
  processed: number;
}

export interface OrderingResult {
  kind: 'ordering';
  ordering: 'partition' | 'key' | 'none';
  messages: number;
  durationMs: number;
  msgPerSec: number;
  /** Most handlers seen running at once (one partition). */
  maxInFlight: number;
}

export interface TransformResult {
  kind: 'transform';
  mode: 'transactional' | 'plain';
  messages: number;
  durationMs: number;
  msgPerSec: number;
  /** The child's CPU time (all threads) per message, µs. */
  cpuUsPerMsg: number;
  /** Transactions committed (transactional mode). */
  transactions: number | undefined;
}

export type ChildResult =
  | ({ kind: 'throughput' } & ThroughputResult)
  | TransformResult
  | RevokeResult
  | JoinResult
  | MemoryResult
  | OrderingResult;

export type ChildMessage =
  | { type: 'progress'; count: number; note?: string }
  | { type: 'result'; result: ChildResult }
  | { type: 'error'; message: string };

export type Send = (message: ChildMessage) => void;
