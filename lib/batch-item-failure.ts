/**
 * A partial result of a `processBatch()` handler: thrown (or rejected, or errored) to say which
 * message of the batch failed. What comes before it in the batch counts as processed and is
 * committed; the failed message is retried on its own (the handler receives a batch of that one
 * message) under `retry`, then the failure policy (`onFailure`) applies to it alone; the messages
 * after it run again as a new batch (not under `onFailure: 'stop'` once it stopped there). So one
 * bad message neither repeats nor dead-letters the work around it.
 *
 * ```ts
 * consumer.processBatch(async (batch) => {
 *   for (const m of batch.messages) {
 *     try {
 *       await save(m.value);
 *     } catch (err) {
 *       throw new BatchItemFailure(m, err); // the messages before m are done
 *     }
 *   }
 * });
 * ```
 *
 * A `BatchItemFailure` naming no message of its batch (another batch's, or an unknown offset)
 * fails the whole batch, as any other error does.
 */
export class BatchItemFailure extends Error {
  override readonly name = 'BatchItemFailure';
  /** The failed message's offset. */
  readonly offset: number;
  /** Its partition and topic, when the failure was given the message itself. */
  readonly partition: number | undefined;
  readonly topic: string | undefined;

  /**
   * @param message the failed message of the batch (or its offset)
   * @param cause why it failed: what retries, logs, events and the dead-letter headers report
   */
  constructor(
    message:
      { readonly offset: number; readonly partition?: number; readonly topic?: string } | number,
    cause?: unknown,
  ) {
    const offset = typeof message === 'number' ? message : message?.offset;
    super(
      `batch message at offset ${String(offset)} failed${cause instanceof Error ? `: ${cause.message}` : cause === undefined ? '' : `: ${String(cause)}`}`,
      cause === undefined ? undefined : { cause },
    );
    this.offset = offset;
    this.partition = typeof message === 'number' ? undefined : message?.partition;
    this.topic = typeof message === 'number' ? undefined : message?.topic;
  }
}
