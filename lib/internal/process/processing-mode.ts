/**
 * How a processor hands work to the user's handler and what it emits: one message at a time
 * (`process()`, `processTransactional()`), or per-partition batches (`processBatch()`).
 */
import type {
  DecodedMessage,
  KafkaMessage,
  MessageHandler,
  Processed,
  ProcessedStatus,
} from '../../types';
import { ConfigError } from '../../errors';
import type { PartitionControl } from '../partition/partition-control';

/** How a processor hands work to the user and reports it: one message at a time, or batches. */
export interface ProcessingMode<R, K, V, O> {
  /** Per-partition batching; absent for one message at a time. */
  readonly batch?: { readonly maxSize: number; readonly maxWaitMs: number };
  /** Calls the user's handler for a unit (one message, or one batch) of decoded messages. */
  call(messages: DecodedMessage<K, V>[], raw: KafkaMessage[]): ReturnType<MessageHandler<R>>;
  /**
   * Counts finished messages as done (`result` undefined for skipped ones). Absent: acked in
   * their partition's ledger at once; `processTransactional()` acks them only once their records
   * are in the open transaction.
   */
  settle?(partition: PartitionControl, messages: KafkaMessage[], result: R | undefined): void;
  /** What the pipeline emits for a finished unit. */
  output(
    messages: KafkaMessage[],
    status: ProcessedStatus,
    attempts: number,
    result: R | undefined,
    error?: unknown,
  ): O;
  /** The same two for one message, without arrays (single-message modes). */
  readonly one?: {
    call(message: DecodedMessage<K, V>, raw: KafkaMessage): ReturnType<MessageHandler<R>>;
    output(
      message: KafkaMessage,
      status: ProcessedStatus,
      attempts: number,
      result: R | undefined,
    ): O;
  };
}

/** Checks the handler given to `process()` and its siblings (JavaScript callers can pass anything). */
export function requireHandler(handler: unknown): void {
  if (typeof handler !== 'function') {
    throw new ConfigError('Expected `handler` to be a function', 'handler');
  }
}

/** The single-message mode of `process()`. */
export function singleMode<R, K, V>(
  handler: MessageHandler<R, K, V>,
): ProcessingMode<R, K, V, Processed<R>> {
  const output = (
    message: KafkaMessage,
    status: ProcessedStatus,
    attempts: number,
    result: R | undefined,
  ): Processed<R> => ({
    topic: message.topic,
    partition: message.partition,
    offset: message.offset,
    generation: message.generation,
    status,
    attempts,
    result,
  });
  return {
    call: (messages) => handler(messages[0] as DecodedMessage<K, V>),
    output: (messages, status, attempts, result, error) => {
      const out = output(messages[0] as KafkaMessage, status, attempts, result);
      return error === undefined ? out : { ...out, error };
    },
    one: { call: (message) => handler(message), output },
  };
}
