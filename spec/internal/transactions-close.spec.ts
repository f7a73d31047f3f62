import assert from 'node:assert/strict';
import pino from 'pino';
import type { KafkaMessage } from '../../lib';
import { resolveSettings } from '../../lib/internal/settings/resolve-settings';
import { NO_OBSERVER } from '../../lib/internal/observe/engine-observer';
import { PartitionControl } from '../../lib/internal/partition/partition-control';
import { Transactions } from '../../lib/internal/transactions/transactions';
import { resolveTransactionalOptions } from '../../lib/transactional-options';
import { gate, until } from '../helpers/harness';

/** A unit on a scripted producer: `produce` decides each record's fate, `abort` each abort's. */
async function unitWith(producer: {
  produce: () => void;
  abort: () => Promise<void>;
  calls: string[];
}) {
  const settings = resolveSettings({
    config: { 'bootstrap.servers': 'fake:9092', 'group.id': 'g' },
    topics: ['orders'],
  });
  const options = resolveTransactionalOptions({ transactionalId: 'tx' }, settings);
  const control = new PartitionControl('orders', 0, 1, 'orders[0]', () => undefined);
  const unit = new Transactions(
    {
      transactionalId: 'tx',
      connect: () => Promise.resolve(),
      init: () => Promise.resolve(),
      begin: () => Promise.resolve(),
      produce: producer.produce,
      abort: producer.abort,
      close: () => {
        producer.calls.push('close');
        return Promise.resolve();
      },
    } as never,
    options,
    settings,
    pino({ level: 'silent' }),
    {
      owned: () => [control],
      owns: () => true,
      consumer: () => ({}),
      seek: () => Promise.resolve(0),
      fail: () => undefined,
      changed: () => undefined,
      observer: () => NO_OBSERVER,
      publish: () => undefined,
    },
  );
  await unit.start();
  control.messages$.subscribe();
  const m = { topic: 'orders', partition: 0, offset: 0, size: 1 } as unknown as KafkaMessage;
  control.push(m);
  return { unit, control, m };
}

/**
 * Transactions.close() called twice at once (the pipeline's teardown and ReactiveConsumer.close()):
 * with a transaction open, the second call must not close the producer while the first one's abort
 * is still in flight.
 */
describe('Transactions.close()', () => {
  it('closes the producer once, after the abort of the open transaction, however many calls wait', async () => {
    const calls: string[] = [];
    const abortGate = gate();
    const { unit, control, m } = await unitWith({
      calls,
      produce: () => calls.push('produce'),
      abort: async () => {
        calls.push('abort');
        await abortGate.promise;
        calls.push('aborted');
      },
    });
    unit.settle(control, m, [{ topic: 'out', value: 'x' }]);
    assert.deepEqual(calls, ['produce'], 'the record is in the open transaction');
    const first = unit.close();
    const second = unit.close();
    await until(() => calls.includes('abort'), 'the abort to start');
    abortGate.open();
    await Promise.all([first, second]);
    assert.deepEqual(calls, ['produce', 'abort', 'aborted', 'close']);
  });

  it('aborts a transaction that holds only part of a message’s records (the queue filled half-way) before closing', async () => {
    const calls: string[] = [];
    const { unit, control, m } = await unitWith({
      calls,
      produce: () => {
        if (calls.includes('produce')) {
          calls.push('queue full');
          throw Object.assign(new Error('Local: Queue full'), { code: -184 });
        }
        calls.push('produce');
      },
      abort: () => {
        calls.push('abort');
        return Promise.resolve();
      },
    });
    unit.settle(control, m, [
      { topic: 'out', value: 'a' },
      { topic: 'out', value: 'b' },
    ]);
    assert.deepEqual(calls, ['produce', 'queue full'], 'one record of two in the transaction');
    await unit.close();
    assert.deepEqual(calls, ['produce', 'queue full', 'abort', 'close']);
  });
});
