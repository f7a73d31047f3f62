/** The three rebalance protocols every chaos variant runs under, as worker settings. */
export type ProtocolVariants = [name: string, config: Record<string, unknown>][];

/**
 * Eager (`range`), cooperative-sticky and KIP-848, with the given classic session settings (KIP-848
 * takes its session from the broker) and `max.poll.interval.ms`.
 */
export function protocolVariants(classic: {
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  maxPollIntervalMs: number;
  kip848MaxPollIntervalMs?: number;
}): ProtocolVariants {
  const base = {
    'session.timeout.ms': classic.sessionTimeoutMs,
    'heartbeat.interval.ms': classic.heartbeatIntervalMs,
    'max.poll.interval.ms': classic.maxPollIntervalMs,
  };
  return [
    ['eager', { ...base, 'partition.assignment.strategy': 'range' }],
    ['cooperative-sticky', { ...base, 'partition.assignment.strategy': 'cooperative-sticky' }],
    [
      'kip848',
      {
        'group.protocol': 'consumer',
        'max.poll.interval.ms': classic.kip848MaxPollIntervalMs ?? classic.maxPollIntervalMs,
      },
    ],
  ];
}
