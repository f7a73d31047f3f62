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
 * The bytes a partition's delivered, unfinished messages hold, two ways:
 * - `own`: {@link heldBytes} per message (the messages' own bytes);
 * - `total`: the same, except with `sharedBatchBuffers`, where values and keys are views of batch
 *   buffers: each buffer counts once, whole, while any of its messages is held (a view keeps all
 *   of it alive), plus {@link MESSAGE_OVERHEAD_BYTES} per message.
 *
 * Flow control pauses and resumes on `own`, in both modes: a pause on pinned batches could wait
 * forever for acks that only more messages bring (a `bufferCount` tail), so a pipeline that runs
 * with copies runs the same with views. `total` is what memory holds, as the metrics report it
 * (`bufferedBytes`): with views it can exceed the limits by the batches the held messages pin.
 * `add` and `remove` come in pairs per offset; what `remove` releases is what `add` recorded for
 * that offset, whatever the message given back (an `acknowledge()` of a copy).
 */
export class HeldBytes {
  private own_ = 0;
  private shared_ = 0;
  /** Shared mode: each held offset's batch buffer and own bytes, and each buffer's holders. */
  private readonly byOffset:
    Map<number, { batch: ArrayBufferLike | undefined; own: number }> | undefined;
  private readonly batches: Map<ArrayBufferLike, number> | undefined;

  constructor(sharedBatchBuffers: boolean) {
    if (sharedBatchBuffers) {
      this.byOffset = new Map();
      this.batches = new Map();
    }
  }

  /** Bytes memory holds for the unfinished messages (see the class). */
  get total(): number {
    return this.byOffset === undefined ? this.own_ : this.shared_;
  }

  /** The unfinished messages' own bytes. */
  get own(): number {
    return this.own_;
  }

  add(message: KafkaMessage): void {
    const own = heldBytes(message);
    this.own_ += own;
    if (this.byOffset === undefined) return;
    const batch = (message.value ?? message.key)?.buffer;
    this.byOffset.set(message.offset, { batch, own });
    this.shared_ += MESSAGE_OVERHEAD_BYTES;
    if (batch === undefined) return;
    const batches = this.batches as Map<ArrayBufferLike, number>;
    const held = batches.get(batch) ?? 0;
    if (held === 0) this.shared_ += batch.byteLength;
    batches.set(batch, held + 1);
  }

  remove(message: KafkaMessage): void {
    if (this.byOffset === undefined) {
      this.own_ -= heldBytes(message);
      return;
    }
    const entry = this.byOffset.get(message.offset);
    if (entry === undefined) return;
    this.byOffset.delete(message.offset);
    this.own_ -= entry.own;
    this.shared_ -= MESSAGE_OVERHEAD_BYTES;
    if (entry.batch === undefined) return;
    const batches = this.batches as Map<ArrayBufferLike, number>;
    const held = batches.get(entry.batch) ?? 0;
    if (held <= 1) {
      batches.delete(entry.batch);
      this.shared_ -= entry.batch.byteLength;
    } else {
      batches.set(entry.batch, held - 1);
    }
  }
}
