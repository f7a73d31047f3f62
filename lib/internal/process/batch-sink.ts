import type { KafkaMessage } from '../../types';
import type { PartitionSink } from '../partition/partition-control';
import type { PartitionRunner } from '../partition/partition-runner';
import { timerDelay } from '../loop/timers';

/**
 * Hands a partition's messages to its runner in arrays of at most `maxSize`, each handed over when
 * full or `maxWaitMs` after its first message. A partial array when the partition's stream
 * completes is dropped: its messages were never started (on a revoke, the next owner gets them).
 */
export class BatchSink implements PartitionSink {
  private buffer: KafkaMessage[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly flush = (): void => {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.buffer.length === 0) return;
    const out = this.buffer;
    this.buffer = [];
    this.runner.push(out);
  };

  constructor(
    private readonly runner: Pick<PartitionRunner<KafkaMessage[]>, 'push' | 'sourceComplete'>,
    private readonly maxSize: number,
    private readonly maxWaitMs: number,
  ) {}

  next(message: KafkaMessage): void {
    this.buffer.push(message);
    if (this.buffer.length >= this.maxSize) this.flush();
    else this.timer ??= setTimeout(this.flush, timerDelay(this.maxWaitMs));
  }

  complete(): void {
    this.dispose();
    this.runner.sourceComplete();
  }

  /** Drops what is gathered and stops the timer. */
  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.buffer = [];
  }
}
