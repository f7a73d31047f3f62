/**
 * InputFaults (processTransactional()'s refused inputs): a suspect, then poison; a skip holds
 * until a transaction carrying it commits and is announced once; a judgement belongs to one
 * assignment (generation).
 */
import assert from 'node:assert/strict';
import { KafkaClientError } from '../../lib/errors';
import { InputFaults } from '../../lib/internal/transactions/input-faults';
import type { RecordFailure } from '../../lib/internal/transactions/input-faults';

const input = { topic: 'orders', partition: 0, offset: 17 };
const refused = (generation: number, code = 87): RecordFailure => ({
  input,
  generation,
  outputTopic: 'out',
  error: new KafkaClientError(`refused (${code})`, { kafkaCode: code }),
});

describe('InputFaults', () => {
  it('a suspect, then poison when refused again alone for the same cause', () => {
    const faults = new InputFaults();
    assert.deepEqual(faults.fail(refused(1), false), { kind: 'suspect' });
    assert.ok(faults.suspect(input));
    assert.deepEqual(faults.fail(refused(1), true), { kind: 'poison', failures: 2 });
  });

  it('a skip holds until a transaction carrying it commits, and is announced once', () => {
    const faults = new InputFaults();
    faults.fail(refused(1), false);
    faults.fail(refused(1), true);
    faults.skip(input);
    assert.ok(!faults.suspect(input), 'a skip writes no record: it need not go alone');
    assert.equal(faults.skipped(input, 1)?.first, true);
    // The transaction carrying the skip was aborted: the redo is skipped again, not announced.
    const again = faults.skipped(input, 1);
    assert.equal(again?.first, false);
    assert.equal(again?.error.kafkaCode, 87);
    assert.equal(again?.failures, 2);
    faults.clear(input); // committed
    assert.equal(faults.skipped(input, 1), undefined);
    assert.equal(faults.size, 0);
  });

  it('a judgement belongs to one assignment: another generation forgets a skip and counts afresh', () => {
    const faults = new InputFaults();
    faults.fail(refused(1), false);
    faults.fail(refused(1), true);
    faults.skip(input);
    assert.equal(faults.skipped(input, 2), undefined, 'not skipped in another assignment');
    assert.equal(faults.size, 0, 'forgotten');
    // Failures of an earlier assignment do not count toward a judgement in this one.
    faults.fail(refused(2), true);
    assert.deepEqual(faults.fail(refused(3), true), { kind: 'suspect' });
    assert.deepEqual(faults.fail(refused(3), true), { kind: 'poison', failures: 2 });
  });
});
