/** How a buffered message is counted in bytes (`maxBufferedBytes`, `maxBufferedBytesTotal`). */
import type { KafkaMessage } from '../../types';

/**
 * What a buffered message is counted as: its value and key bytes plus
 * {@link MESSAGE_OVERHEAD_BYTES} for the objects that carry them (the binding's message, the
 * library's, the buffers' headers), so that many small messages are not counted as nearly free.
 */
export const MESSAGE_OVERHEAD_BYTES = 512;

export function heldBytes(message: KafkaMessage): number {
  // Tolerant of a hand-built message (a test's, an `acknowledge()` of the application's own).
  return (message.size || 0) + (message.key?.length ?? 0) + MESSAGE_OVERHEAD_BYTES;
}

/**
 * The bytes a partition's delivered, unfinished messages hold. With `sharedBatchBuffers` their
 * values and keys are views of batch buffers: each buffer counts once, whole, while any of its
 * messages is held (a view keeps all of it alive), plus {@link MESSAGE_OVERHEAD_BYTES} per message.
 * Otherwise each message counts {@link heldBytes}. `add` and `remove` come in pairs per message.
 */
export class HeldBytes {
  private total_ = 0;
  /** Batch buffers held, with how many of their messages (shared mode only). */
  private readonly batches: Map<ArrayBufferLike, number> | undefined;

  constructor(sharedBatchBuffers: boolean) {
    this.batches = sharedBatchBuffers ? new Map() : undefined;
  }

  get total(): number {
    return this.total_;
  }

  add(message: KafkaMessage): void {
    const batch = this.batches && batchOf(message);
    if (batch === undefined) {
      this.total_ += heldBytes(message);
      return;
    }
    const held = (this.batches as Map<ArrayBufferLike, number>).get(batch) ?? 0;
    if (held === 0) this.total_ += batch.byteLength;
    (this.batches as Map<ArrayBufferLike, number>).set(batch, held + 1);
    this.total_ += MESSAGE_OVERHEAD_BYTES;
  }

  remove(message: KafkaMessage): void {
    const batch = this.batches && batchOf(message);
    if (batch === undefined) {
      this.total_ -= heldBytes(message);
      return;
    }
    const batches = this.batches as Map<ArrayBufferLike, number>;
    const held = batches.get(batch) ?? 0;
    if (held <= 1) {
      batches.delete(batch);
      if (held === 1) this.total_ -= batch.byteLength;
    } else {
      batches.set(batch, held - 1);
    }
    this.total_ -= MESSAGE_OVERHEAD_BYTES;
  }
}

/** The batch buffer a message's value (or, without one, its key) is a view of. */
function batchOf(message: KafkaMessage): ArrayBufferLike | undefined {
  return (message.value ?? message.key)?.buffer;
}
