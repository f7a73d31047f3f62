/**
 * What a refused output record does to its input (input-faults.ts keeps the verdicts): a suspect is
 * redone in a transaction of its own; poison stops the consumer (`onFailure: 'stop'`) or is
 * skipped (`'skip'`: it counts with no output, and a `message-skipped` event says so, once per
 * input and assignment, however often an abort makes it redone before the skip commits). After the
 * abort of a transaction whose commit failed, the records the broker refused are pinned on their
 * inputs before the redo starts.
 */
import { TransactionError } from '../../errors';
import type { KafkaMessage } from '../../types';
import type { PartitionControl } from '../partition/partition-control';
import type { RecordFailure } from './input-faults';
import { fatal } from './transaction-calls';
import type { TransactionContext } from './transaction-context';
import { inputName } from './transaction-writer';
import type { TransactionWork } from './transaction-writer';

/**
 * A finished input that is poison and skipped: true (it then counts with no output); false for any
 * other input. The first time, the skip is counted and the `message-skipped` event published; a
 * redo after the abort of the transaction that carried the skip is skipped again, silently (the
 * judgement holds until a transaction carrying the skip commits: input-faults.ts).
 */
export function skipsPoison(
  ctx: TransactionContext,
  control: PartitionControl,
  message: KafkaMessage,
): boolean {
  const skip = ctx.faults.size > 0 ? ctx.faults.skipped(message, control.generation) : undefined;
  if (skip === undefined) return false;
  if (!skip.first) {
    ctx.logger.info(
      { input: inputName(message) },
      'an input judged poison is redone after an abort: skipped again at once, its records not produced (counted and reported once)',
    );
    return true;
  }
  ctx.book.counts.skippedInputs += 1;
  ctx.logger.error(
    { err: skip.error, input: inputName(message), outputTopic: skip.outputTopic },
    'an output record of this input is refused again and again: the input is skipped (onFailure: skip), it counts with no output',
  );
  ctx.host.publish({
    type: 'message-skipped',
    topic: message.topic,
    partition: message.partition,
    offset: message.offset,
    attempts: skip.failures,
    error: skip.error,
    at: Date.now(),
  });
  return true;
}

/**
 * A record failed `attempt`'s transaction (`attributable`: nothing else could have caused it):
 * false when the input is poison and the policy stops the consumer.
 */
export function inputFailed(
  ctx: TransactionContext,
  f: RecordFailure,
  attributable: boolean,
): boolean {
  ctx.book.counts.refusedRecords += 1;
  const verdict = ctx.faults.fail(f, attributable);
  const input = inputName(f.input);
  const why = `${f.error.message} (code ${f.error.kafkaCode})`;
  if (verdict.kind === 'suspect') {
    ctx.logger.warn(
      { err: f.error, input, outputTopic: f.outputTopic, attributable },
      'an output record of this input was refused: its transaction is aborted, the input is redone in a transaction of its own',
    );
    return true;
  }
  if (ctx.options.process.onFailure === 'skip') {
    ctx.faults.skip(f.input);
    return true;
  }
  fatal(
    ctx,
    new TransactionError(
      `An output record of input ${input} for topic ${f.outputTopic} is refused again after an abort and a redo (${why}): stopping (onFailure: 'stop'); nothing of this input or after it in its partition was committed`,
      ctx.producer.transactionalId,
      f.error.kafkaCode,
      {
        cause: f.error,
        input: { topic: f.input.topic, partition: f.input.partition, offset: f.input.offset },
        outputTopic: f.outputTopic,
      },
    ),
    'poison output',
  );
  return false;
}

/**
 * After the abort of a transaction whose commit failed, every record is delivered or purged: the
 * refused ones name their inputs, which become suspects (redone alone) or poison, before the
 * redo starts. False when a poison input stopped the consumer.
 */
export async function blame(ctx: TransactionContext, txn: TransactionWork): Promise<boolean> {
  await txn.reportsIn(Date.now() + Math.min(ctx.settings.commitTimeoutMs, 5000));
  const blamed = new Map<string, RecordFailure>();
  for (const f of txn.failures) blamed.set(inputName(f.input), f);
  const alone = new Set(txn.inputs.map(inputName)).size === 1;
  for (const f of blamed.values()) {
    if (!inputFailed(ctx, f, alone)) return false;
  }
  return true;
}
