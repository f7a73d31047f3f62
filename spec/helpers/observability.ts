import pino from 'pino';
import type { Logger } from 'pino';

/** A pino logger that keeps every line as an object, for assertions on log content. */
export function captureLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  return { logger, lines };
}

export interface StatsPartition {
  partition: number;
  lag?: number;
  committed?: number;
  hi?: number;
}

/** A librdkafka statistics report (the fields the library reads), as `event.stats` carries it. */
export function statsEvent(
  topic: string,
  partitions: StatsPartition[],
  options: { groupState?: string; joinState?: string; brokersUp?: boolean } = {},
): { message: string } {
  const stats = {
    name: 'rdkafka#consumer-1',
    type: 'consumer',
    ts: 123456789,
    brokers: {
      'localhost:9092/1': {
        name: 'localhost:9092/1',
        nodeid: 1,
        source: 'learned',
        state: options.brokersUp === false ? 'DOWN' : 'UP',
      },
      GroupCoordinator: { name: 'GroupCoordinator', nodeid: -1, source: 'logical', state: 'UP' },
      ':0/internal': { name: ':0/internal', nodeid: -1, source: 'internal', state: 'INIT' },
    },
    topics: {
      [topic]: {
        topic,
        partitions: Object.fromEntries([
          ['-1', { partition: -1, consumer_lag: -1, committed_offset: -1001, hi_offset: -1 }],
          ...partitions.map((p) => [
            String(p.partition),
            {
              partition: p.partition,
              fetch_state: 'active',
              consumer_lag: p.lag ?? -1,
              committed_offset: p.committed ?? -1001,
              hi_offset: p.hi ?? -1,
            },
          ]),
        ]),
      },
    },
    cgrp: {
      state: options.groupState ?? 'up',
      join_state: options.joinState ?? 'steady',
      assignment_size: partitions.length,
    },
  };
  return { message: JSON.stringify(stats) };
}
