import assert from 'node:assert/strict';
import { ConsumeCadence, URGENT_TIMEOUT_MS } from '../../lib/internal/loop/consume-cadence';

describe('consume cadence', () => {
  it('waits with the idle timeout for one message, then drains batches with 1 ms while busy', () => {
    const c = new ConsumeCadence(500, 100);
    assert.deepEqual(c.next(), { size: 1, timeoutMs: 100 });
    c.record(1);
    assert.deepEqual(c.next(), { size: 500, timeoutMs: 1 });
    c.record(0);
    assert.deepEqual(c.next(), { size: 1, timeoutMs: 100 });
  });

  it('polls with a short timeout while an answer only a consume call delivers is awaited', () => {
    const c = new ConsumeCadence(500, 100);
    assert.deepEqual(c.next(true), { size: 1, timeoutMs: URGENT_TIMEOUT_MS });
    c.record(3);
    assert.deepEqual(c.next(true), { size: 500, timeoutMs: 1 }, 'busy stays busy');
    const short = new ConsumeCadence(500, 2);
    assert.deepEqual(short.next(true), { size: 1, timeoutMs: 2 }, 'never longer than the idle one');
  });
});
