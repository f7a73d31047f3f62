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
