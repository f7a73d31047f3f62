/** The bench's raw results (written as results.json) and the per-contender summary derived from them. */
import type { ContenderId } from './contenders';
import type { ThroughputResult } from './meter';
import type { PeerStatus } from './peers';
import type { DataSet, Mode, ProtocolName } from './settings';
import { median, percentile } from './stats';
import type {
  JoinResult,
  MemoryResult,
  OrderingResult,
  RevokeResult,
  TransformResult,
} from './tasks';

export interface ContenderEntry {
  id: ContenderId;
  label: string;
  kind: 'ceiling' | 'reference' | 'library' | 'peer';
  pkg: string;
  settings: string;
  installed: boolean;
  /** Why it was not measured, when `installed` is false and it is not a missing peer. */
  reason?: string;
}

export interface BenchResults {
  mode: Mode;
  seed: number;
  startedAt: string;
  durationMs: number;
  brokers: string;
  machine: Record<string, string>;
  versions: Record<string, string>;
  peers: PeerStatus[];
  contenders: ContenderEntry[];
  dataSets: DataSet[];
  rounds: number;
  throughput: {
    dataSet: string;
    contender: ContenderId;
    round: number;
    result?: ThroughputResult;
    error?: string;
  }[];
  revoke: { protocol: ProtocolName; variant: string; result?: RevokeResult; error?: string }[];
  join: {
    client: string;
    protocol: ProtocolName;
    repetition: number;
    result?: JoinResult;
    error?: string;
  }[];
  joinSettings: { members: number; rate: number; settleMs: number; observeMs: number };
  revokeSettings: { cycles: number; backlog: number; handlerMs: [number, number] };
  transform?: {
    topic: string;
    messages: number;
    runs: { mode: string; result?: TransformResult; error?: string }[];
  };
  ordering?: {
    topic: string;
    keys: number;
    maxLatencyMs: number;
    partitionConcurrency: number;
    runs: { ordering: string; result?: OrderingResult; error?: string }[];
  };
  memory?: {
    topic: string;
    backlog: number;
    /** Value size of the backlog's messages (absent in results written before: 100 B). */
    valueBytes?: number;
    handlerMs: number;
    sampleMs: number;
    /** The library with its defaults (the goal's figure). */
    result?: MemoryResult;
    error?: string;
    /** Every variant, the defaults first (absent in results written before it existed). */
    runs?: {
      client: 'reactive-rdkafka' | 'raw-rdkafka';
      binding?: 'fast';
      /** Full GCs forced this often (the live-floor variant). */
      gcEveryMs?: number;
      label: string;
      result?: MemoryResult;
      error?: string;
    }[];
  };
}

export interface ThroughputSummary {
  contender: ContenderEntry;
  runs: number;
  ok: number;
  msgPerSec: number;
  minMsgPerSec: number;
  maxMsgPerSec: number;
  mbPerSec: number;
  vsRaw: number;
  vsBestPeer: number;
  cpuMs: number;
  cpuUsPerMessage: number;
  /** CPU µs per message by thread kind (medians over the runs that could read their threads). */
  cpuByThread?: { main: number; gc: number; librdkafka: number; other: number };
  peakRssBytes: number;
  firstMessageMs: number;
}

function threadSplit(ok: ThroughputResult[]): Pick<ThroughputSummary, 'cpuByThread'> {
  const split = ok.filter((r) => r.cpuByThreadMs);
  if (split.length === 0) return {};
  const us = (ms: (r: ThroughputResult) => number) =>
    median(split.map((r) => (ms(r) * 1000) / r.messages));
  return {
    cpuByThread: {
      main: us((r) => r.cpuByThreadMs!.main),
      gc: us((r) => r.gcMs ?? 0),
      librdkafka: us((r) => r.cpuByThreadMs!.librdkafka),
      other: us((r) => r.cpuByThreadMs!.other),
    },
  };
}

export function summarizeThroughput(results: BenchResults, dataSet: string): ThroughputSummary[] {
  const rows = results.contenders
    .filter((c) => c.installed)
    .map((contender) => {
      const runs = results.throughput.filter(
        (t) => t.dataSet === dataSet && t.contender === contender.id,
      );
      const ok = runs.flatMap((r) => (r.result ? [r.result] : []));
      const rates = ok.map((r) => (r.messages / r.elapsedMs) * 1000);
      return {
        contender,
        runs: runs.length,
        ok: ok.length,
        msgPerSec: median(rates),
        minMsgPerSec: Math.min(...rates),
        maxMsgPerSec: Math.max(...rates),
        mbPerSec: median(ok.map((r) => r.bytes / r.elapsedMs / 1000)),
        vsRaw: NaN,
        vsBestPeer: NaN,
        cpuMs: median(ok.map((r) => r.cpuMs)),
        cpuUsPerMessage: median(ok.map((r) => (r.cpuMs * 1000) / r.messages)),
        ...threadSplit(ok),
        peakRssBytes: ok.length ? Math.max(...ok.map((r) => r.peakRssBytes)) : NaN,
        firstMessageMs: median(ok.map((r) => r.firstMessageMs)),
      };
    });
  const raw = rows.find((r) => r.contender.kind === 'ceiling')?.msgPerSec ?? NaN;
  const bestPeer = Math.max(
    ...rows.filter((r) => r.contender.kind === 'peer' && r.ok > 0).map((r) => r.msgPerSec),
  );
  for (const row of rows) {
    row.vsRaw = row.msgPerSec / raw;
    row.vsBestPeer = Number.isFinite(bestPeer) ? row.msgPerSec / bestPeer : NaN;
  }
  return rows;
}

export interface RevokeSummary {
  protocol: ProtocolName;
  variant: string;
  partitions: number;
  p50: number;
  p99: number;
  max: number;
  revokes: number;
  inFlight: number;
  timedOut: number;
  error?: string;
}

export function summarizeRevoke(results: BenchResults): RevokeSummary[] {
  return results.revoke.map(({ protocol, variant, result, error }) => ({
    protocol,
    variant,
    partitions: result?.samplesMs.length ?? 0,
    p50: percentile(result?.samplesMs ?? [], 50),
    p99: percentile(result?.samplesMs ?? [], 99),
    max: result?.samplesMs.length ? Math.max(...result.samplesMs) : NaN,
    revokes: result?.revokes ?? 0,
    inFlight: result?.inFlight ?? 0,
    timedOut: result?.timedOut ?? 0,
    ...(error ? { error } : {}),
  }));
}

export interface JoinSummary {
  client: string;
  protocol: ProtocolName;
  repetitions: number;
  stallMs: number[];
  baselineGapMs: number[];
  partitionPauseMs: number[];
  baselinePartitionPauseMs: number[];
  keptPartitionPauseMs: number[];
  movedPartitionPauseMs: number[];
  newMemberAssignedMs: number[];
  newMemberFirstMs: number[];
  produced: number;
  duplicates: number;
  losses: number;
  errors: string[];
}

/** The values that were measured (older results files lack the newer fields). */
const defined = (values: readonly (number | undefined)[]): number[] =>
  values.filter((v): v is number => typeof v === 'number');

export function summarizeJoin(results: BenchResults): JoinSummary[] {
  const keys = [...new Set(results.join.map((j) => `${j.client}|${j.protocol}`))];
  return keys.map((key) => {
    const runs = results.join.filter((j) => `${j.client}|${j.protocol}` === key);
    const ok = runs.flatMap((r) => (r.result ? [r.result] : []));
    return {
      client: runs[0]!.client,
      protocol: runs[0]!.protocol,
      repetitions: runs.length,
      stallMs: ok.map((r) => r.stallMs),
      baselineGapMs: ok.map((r) => r.baselineGapMs),
      partitionPauseMs: ok.map((r) => r.partitionPauseMs),
      baselinePartitionPauseMs: ok.map((r) => r.baselinePartitionPauseMs),
      keptPartitionPauseMs: defined(ok.map((r) => r.keptPartitionPauseMs)),
      movedPartitionPauseMs: defined(ok.map((r) => r.movedPartitionPauseMs)),
      newMemberAssignedMs: defined(ok.map((r) => r.newMemberAssignedMs)),
      newMemberFirstMs: defined(ok.map((r) => r.newMemberFirstMs)),
      produced: ok.reduce((n, r) => n + r.produced, 0),
      duplicates: ok.reduce((n, r) => n + r.duplicates, 0),
      losses: ok.reduce((n, r) => n + r.losses, 0),
      errors: runs.flatMap((r) => (r.error ? [r.error] : [])),
    };
  });
}
