/**
 * Bench settings: the broker address and the size of each section for `make bench` (full) and
 * `make bench-quick` (a smoke run on a small topic).
 */

/** Bootstrap servers: `KAFKA_BROKERS_BENCH`, else `KAFKA_BROKERS`, else node 1 of `kafka.sh up`. */
export const BROKERS =
  process.env.KAFKA_BROKERS_BENCH ??
  process.env.KAFKA_BROKERS ??
  `127.0.0.1:${process.env.KAFKA_PORT_BASE ?? '9092'}`;

export type Mode = 'full' | 'quick';

/** One throughput data set: a topic pre-filled with `messages` values of `valueBytes` each. */
export interface DataSet {
  name: string;
  topic: string;
  partitions: number;
  messages: number;
  valueBytes: number;
}

export interface BenchSettings {
  mode: Mode;
  seed: number;
  /** Interleaved rounds of every contender per data set; the median is reported. */
  rounds: number;
  dataSets: DataSet[];
  /** A throughput run that has not finished after this long is killed and reported as failed. */
  runTimeoutMs: number;
  revoke: {
    protocols: ProtocolName[];
    cycles: number;
    backlog: number;
    handlerMs: [number, number];
  };
  join: {
    protocols: ProtocolName[];
    kafkajs: boolean;
    /** Messages per second produced while the group runs. */
    rate: number;
    /** How long the 6-member group runs before the 7th member joins, and after. */
    settleMs: number;
    observeMs: number;
    repetitions: number;
  };
  /** Memory under backlog: a topic of `messages` of `valueBytes` each, a slow handler. */
  memory: {
    messages: number;
    valueBytes: number;
    sampleMs: number;
    intervalMs: number;
    handlerMs: number;
  };
  /** Ordering modes on a workload with per-message latency (Parallel Consumer's benchmark shape). */
  ordering: { messages: number; keys: number; maxLatencyMs: number; partitionConcurrency: number };
  /** Topic-to-topic transform (transactional vs plain process() + produce). */
  transform: { messages: number; partitions: number };
}

export type ProtocolName = 'eager' | 'cooperative-sticky' | 'kip848';

export function topicName(
  prefix: string,
  partitions: number,
  messages: number,
  bytes: number,
): string {
  // Stable names: a topic that already holds exactly this data is reused by the next run.
  return `bench-${prefix}-${partitions}p-${messages}x${bytes}b`;
}

export function benchSettings(mode: Mode, seed: number): BenchSettings {
  const partitions = 12;
  if (mode === 'quick') {
    const messages = 30_000;
    return {
      mode,
      seed,
      rounds: 1,
      dataSets: [
        {
          name: '100 B',
          topic: topicName('quick', partitions, messages, 100),
          partitions,
          messages,
          valueBytes: 100,
        },
      ],
      runTimeoutMs: 60_000,
      revoke: { protocols: ['cooperative-sticky'], cycles: 1, backlog: 2_000, handlerMs: [5, 30] },
      join: {
        protocols: ['cooperative-sticky'],
        kafkajs: true,
        rate: 600,
        settleMs: 3_000,
        observeMs: 5_000,
        repetitions: 1,
      },
      memory: { messages, valueBytes: 100, sampleMs: 8_000, intervalMs: 250, handlerMs: 5 },
      ordering: { messages: 1_000, keys: 100, maxLatencyMs: 5, partitionConcurrency: 16 },
      transform: { messages: 2_000, partitions: 12 },
    };
  }
  // A million messages each: at 250,000 the fastest runs lasted under half a second and measured the
  // fetch pipeline's ramp-up as much as its rate (see report.ts, "data sets").
  const small = Number(process.env.BENCH_100B_MESSAGES ?? 1_000_000);
  const kib = Number(process.env.BENCH_KIB_MESSAGES ?? 1_000_000);
  return {
    mode,
    seed,
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
    dataSets: [
      {
        name: '100 B',
        topic: topicName('tp', partitions, small, 100),
        partitions,
        messages: small,
        valueBytes: 100,
      },
      {
        name: '1 KiB',
        topic: topicName('tp', partitions, kib, 1024),
        partitions,
        messages: kib,
        valueBytes: 1024,
      },
    ],
    runTimeoutMs: 240_000,
    revoke: {
      protocols: ['eager', 'cooperative-sticky', 'kip848'],
      cycles: 4,
      backlog: 24_000,
      handlerMs: [5, 50],
    },
    join: {
      protocols: ['eager', 'cooperative-sticky', 'kip848'],
      kafkajs: true,
      rate: 1_200,
      settleMs: 6_000,
      observeMs: 15_000,
      repetitions: 2,
    },
    memory: {
      messages: 1_000_000,
      valueBytes: 1024,
      sampleMs: 60_000,
      intervalMs: 500,
      handlerMs: 1,
    },
    ordering: { messages: 10_000, keys: 100, maxLatencyMs: 5, partitionConcurrency: 16 },
    transform: { messages: 100_000, partitions: 12 },
  };
}

/** librdkafka group settings per rebalance protocol (KIP-848 refuses the classic-only keys). */
export function protocolConfig(protocol: ProtocolName): Record<string, string | number> {
  switch (protocol) {
    case 'eager':
      return {
        'partition.assignment.strategy': 'range',
        'session.timeout.ms': 6000,
        'heartbeat.interval.ms': 500,
      };
    case 'cooperative-sticky':
      return {
        'partition.assignment.strategy': 'cooperative-sticky',
        'session.timeout.ms': 6000,
        'heartbeat.interval.ms': 500,
      };
    case 'kip848':
      return { 'group.protocol': 'consumer' };
  }
}

export const PROTOCOL_LABELS: Record<ProtocolName, string> = {
  eager: 'eager (range)',
  'cooperative-sticky': 'cooperative-sticky',
  kip848: 'KIP-848 (group.protocol=consumer)',
};
