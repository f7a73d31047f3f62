/**
 * `ReactiveConsumer.close()`: the engine's close (release, commit, leave, disconnect), then the
 * producers it used — the dead-letter writers once every write a revoke waited for settled, the
 * transactional producer once every transaction a revoke committed is confirmed.
 */
import type { ConsumerSettings } from '../../config';
import { ConfigError } from '../../errors';
import type { DeadLetterWriter } from '../process/dead-letter';
import type { Transactions } from '../transactions/transactions';
import type { ConsumerEngine } from './consumer-engine';
import { showValue } from '../settings/show-value';

export interface ClosingConsumer {
  readonly settings: ConsumerSettings;
  readonly engine: ConsumerEngine;
  readonly transactions: Transactions | undefined;
  readonly deadLetterWriters: ReadonlySet<DeadLetterWriter>;
}

export async function closeConsumer(
  options: { timeoutMs?: number },
  consumer: ClosingConsumer,
): Promise<void> {
  const { settings, engine, transactions, deadLetterWriters } = consumer;
  const timeoutMs = options.timeoutMs ?? settings.closeTimeoutMs;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
    throw new ConfigError(
      `Expected \`timeoutMs\` to be a positive integer (ms), got ${showValue(timeoutMs)}`,
      'timeoutMs',
    );
  }
  const by = Date.now() + timeoutMs;
  transactions?.closingBy(by);
  await engine.close(timeoutMs);
  // Every write the revoke waited for is settled; flush and disconnect the dead-letter producer.
  await Promise.all([...deadLetterWriters].map((w) => w.close(settings.commitTimeoutMs)));
  // Every transaction a revoke committed is confirmed; disconnect the transactional producer.
  await transactions?.close(by);
}
