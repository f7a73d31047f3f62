/**
 * The adaptive consume cadence. node-rdkafka's `consume(n)` applies its timeout to every message
 * of the batch, so a trickle of messages slower than the timeout would hold a batch (and its
 * messages) for up to n × timeout. The loop therefore alternates between:
 * - idle: `consume(1)` with the configured timeout, which returns as soon as one message arrives;
 * - busy: `consume(n)` with a 1 ms timeout, which takes what librdkafka already prefetched and
 *   returns at the first gap.
 * Latency stays bounded by about n ms; an idle consumer makes ~1000/timeout calls per second.
 *
 * While the library waits for something only a consume call delivers (a commit's answer, the
 * assignment-lost probe) or a rebalance is being handled, an idle call waits at most
 * {@link URGENT_TIMEOUT_MS}: each step of a revoke would otherwise wait for the idle timeout, and
 * while a revoke awaits its unassign librdkafka fetches nothing for this member (the whole group
 * waits for it under the classic protocol).
 */
export const URGENT_TIMEOUT_MS = 5;

export class ConsumeCadence {
  private busy = false;

  constructor(
    private readonly batchSize: number,
    private readonly idleTimeoutMs: number,
  ) {}

  /** The next call's batch size and timeout; `urgent` while an answer or a rebalance is awaited. */
  next(urgent = false): { size: number; timeoutMs: number } {
    if (this.busy) return { size: this.batchSize, timeoutMs: 1 };
    return {
      size: 1,
      timeoutMs: urgent ? Math.min(URGENT_TIMEOUT_MS, this.idleTimeoutMs) : this.idleTimeoutMs,
    };
  }

  /** Feeds back how many messages the last call returned. */
  record(received: number): void {
    this.busy = received > 0;
  }
}
