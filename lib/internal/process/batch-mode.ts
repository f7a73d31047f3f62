/**
 * `processBatch()`'s unit of work: its own options checked (the batch bounds, and no per-key order:
 * a batch holds many keys) and its processing mode (one handler call per batch, given a
 * {@link MessageBatch}; a {@link ProcessedBatch} emitted per finished batch). The batches are
 * gathered by batch-sink.ts.
 */
import { showValue } from '../settings/show-value';
import { ConfigError } from '../../errors';
import { BATCH_DEFAULTS } from '../../process-options';
import type {
  BatchProcessOptions,
  HandlerResult,
  KafkaMessage,
  MessageBatch,
  ProcessOptions,
  ProcessedBatch,
} from '../../types';
import type { ProcessingMode } from './processing-mode';

/** The bounds of a batch: at most `maxSize` messages, gathered for at most `maxWaitMs`. */
export interface BatchBounds {
  readonly maxSize: number;
  readonly maxWaitMs: number;
}

/**
 * `processBatch()`'s options split into its batch bounds (defaults applied, checked) and the
 * options every pipeline takes; a {@link ConfigError} names a wrong one.
 */
export function batchOptions<K, V>(
  options: BatchProcessOptions<K, V>,
): { readonly bounds: BatchBounds; readonly rest: ProcessOptions<K, V> } {
  const {
    maxSize = BATCH_DEFAULTS.maxSize,
    maxWaitMs = BATCH_DEFAULTS.maxWaitMs,
    ...rest
  } = options;
  if (!Number.isInteger(maxSize) || maxSize < 1) {
    throw new ConfigError(
      `Expected \`maxSize\` to be an integer ≥ 1, got ${showValue(maxSize)}`,
      'maxSize',
    );
  }
  if (!Number.isInteger(maxWaitMs) || maxWaitMs < 0) {
    throw new ConfigError(
      `Expected \`maxWaitMs\` to be an integer ≥ 0, got ${showValue(maxWaitMs)}`,
      'maxWaitMs',
    );
  }
  if (rest.ordering === 'key') {
    // A batch holds many keys: per-key order would need per-key batches.
    throw new ConfigError(
      "`ordering: 'key'` is not supported by processBatch() (a batch holds many keys): use 'partition', or process()",
      'ordering',
    );
  }
  return { bounds: { maxSize, maxWaitMs }, rest };
}

/** The processing mode of `processBatch()`, over its instrumented handler. */
export function batchMode<R, K, V>(
  bounds: BatchBounds,
  instrumented: (batch: MessageBatch<K, V>) => HandlerResult<R>,
): ProcessingMode<R, K, V, ProcessedBatch<R>> {
  return {
    batch: bounds,
    call: (messages, raw) => {
      const first = raw[0] as KafkaMessage;
      const last = raw[raw.length - 1] as KafkaMessage;
      return instrumented({
        topic: first.topic,
        partition: first.partition,
        generation: first.generation,
        offset: first.offset,
        lastOffset: last.offset,
        messages,
        signal: first.signal,
      });
    },
    output: (messages, status, attempts, result, error) => {
      const first = messages[0] as KafkaMessage;
      const out = {
        topic: first.topic,
        partition: first.partition,
        generation: first.generation,
        offsets: messages.map((m) => m.offset),
        status,
        attempts,
        result,
      };
      return error === undefined ? out : { ...out, error };
    },
  };
}
