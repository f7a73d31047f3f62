import assert from 'node:assert/strict';
import { Shutdown } from '../../lib/internal/loop/shutdown';
import { Conditions } from '../../lib/internal/loop/wait-conditions';

describe('Shutdown (the close clock)', () => {
  it('is open with no deadline until close() begins', () => {
    const s = new Shutdown(new Conditions(), () => undefined);
    assert.equal(s.stage, 'open');
    assert.equal(s.revokeBy(), Number.POSITIVE_INFINITY);
    assert.equal(s.shorten(10), false, 'nothing to shorten before a close');
  });

  it('leaves time after a revoke for leaving and disconnecting', () => {
    const s = new Shutdown(new Conditions(), () => undefined);
    const now = Date.now();
    s.begin(now, 10_000);
    assert.equal(s.stage, 'closing');
    assert.equal(s.deadline, now + 10_000);
    assert.equal(s.revokeBy(), now + 10_000 - 2000); // a fifth, at most 2.5 s
    assert.equal(s.releaseBy(), now + 10_000 - 1000); // a tenth, at most 2 s
  });

  it('a shorter close() brings the deadline forward while closing and once disconnecting', () => {
    const s = new Shutdown(new Conditions(), () => undefined);
    s.begin(Date.now(), 20_000);
    assert.equal(s.shorten(30_000), false, 'a longer one changes nothing');
    assert.equal(s.shorten(15_000), true);
    s.disconnecting();
    const before = s.revokeBy();
    assert.equal(s.shorten(1000), true);
    assert.ok(s.deadline <= Date.now() + 1000, `deadline ${s.deadline - Date.now()} ms away`);
    assert.ok(s.revokeBy() < before, 'the revoke bound moved too');
  });

  it('wakes what waits on its times when they move', async () => {
    const conditions = new Conditions();
    const s = new Shutdown(conditions, () => undefined);
    let seen = s.revokeBy();
    const waiting = conditions.until(() => s.revokeBy() !== seen, Date.now() + 5000);
    s.begin(Date.now(), 20_000);
    assert.equal(await waiting, true);
    seen = s.revokeBy();
    const again = conditions.until(() => s.revokeBy() !== seen, Date.now() + 5000);
    s.shorten(1000);
    assert.equal(await again, true);
  });
});
