/**
 * The adaptive consume cadence. node-rdkafka's `consume(n)` applies its timeout to every message
 * of the batch, so a trickle of messages slower than the timeout would hold a batch (and its
 * messages) for up to n × timeout. The loop therefore alternates between:
 * - idle: `consume(1)` with the configured timeout, which returns as soon as one message arrives;
 * - busy: `consume(n)` with a 1 ms timeout, which takes what librdkafka already prefetched and
 *   returns at the first gap.
 * Latency stays bounded by about n ms; an idle consumer makes ~1000/timeout calls per second.
 */
export class ConsumeCadence {
  private busy = false;

  constructor(
    private readonly batchSize: number,
    private readonly idleTimeoutMs: number,
  ) {}

  /** The next call's batch size and timeout. */
  next(): { size: number; timeoutMs: number } {
    return this.busy
      ? { size: this.batchSize, timeoutMs: 1 }
      : { size: 1, timeoutMs: this.idleTimeoutMs };
  }

  /** Feeds back how many messages the last call returned. */
  record(received: number): void {
    this.busy = received > 0;
  }
}
