import assert from 'node:assert/strict';
import { EMPTY, Observable, Subject, of } from 'rxjs';
import type { Subscription } from 'rxjs';
import { FairLimiter } from '../../lib/internal/partition/fair-limiter';

describe('FairLimiter', () => {
  it('runs at most max tasks at once and starts waiting ones in arrival order', () => {
    const limiter = new FairLimiter(2);
    const gates = [0, 1, 2, 3].map(() => new Subject<number>());
    const started: number[] = [];
    const done: number[] = [];
    gates.forEach((gate, i) =>
      limiter
        .run(() => {
          started.push(i);
          return gate;
        })
        .subscribe({ complete: () => done.push(i) }),
    );
    assert.deepEqual(started, [0, 1]);
    assert.equal(limiter.waiting, 2);
    gates[1]!.complete();
    assert.deepEqual(started, [0, 1, 2]);
    gates[0]!.complete();
    assert.deepEqual(started, [0, 1, 2, 3]);
    assert.equal(limiter.running, 2);
    gates[2]!.complete();
    gates[3]!.complete();
    assert.equal(limiter.running, 0);
    assert.deepEqual(done, [1, 0, 2, 3]);
  });

  it('gives the place up when a waiting task is unsubscribed or its signal aborts', () => {
    const limiter = new FairLimiter(1);
    const gate = new Subject<number>();
    limiter.run(() => gate).subscribe();
    const controller = new AbortController();
    let ranAborted = false;
    let completedAborted = false;
    limiter
      .run(() => {
        ranAborted = true;
        return EMPTY;
      }, controller.signal)
      .subscribe({ complete: () => (completedAborted = true) });
    let ranUnsubscribed = false;
    const sub = limiter
      .run(() => {
        ranUnsubscribed = true;
        return EMPTY;
      })
      .subscribe();
    let ranLast = false;
    limiter
      .run(() => {
        ranLast = true;
        return of(1);
      })
      .subscribe();
    controller.abort();
    sub.unsubscribe();
    assert.equal(completedAborted, true);
    gate.complete();
    assert.equal(ranAborted, false);
    assert.equal(ranUnsubscribed, false);
    assert.equal(ranLast, true);
    assert.equal(limiter.running, 0);
    assert.equal(limiter.waiting, 0);
  });

  // Regression: release → next waiter → cancelled → release … recursed once per cancelled waiter
  // and overflowed the stack when a revoke cancelled thousands of them at once.
  it('skips 200,000 cancelled waiters without growing the stack', () => {
    const limiter = new FairLimiter(1);
    const gate = new Subject<number>();
    limiter.run(() => gate).subscribe();
    const subs: Subscription[] = [];
    for (let i = 0; i < 200_000; i++) subs.push(limiter.run(() => of(i)).subscribe());
    let lastRan = false;
    limiter
      .run(() => {
        lastRan = true;
        return of(-1);
      })
      .subscribe();
    for (const s of subs) s.unsubscribe();
    gate.complete();
    assert.equal(lastRan, true);
    assert.equal(limiter.running, 0);
    assert.equal(limiter.waiting, 0);
  });

  it('runs 200,000 synchronously completing waiters one after another without growing the stack', function () {
    // About 1.5 s alone; make test runs it beside the broker suites on two cores.
    this.timeout(60_000);
    const limiter = new FairLimiter(1);
    const gate = new Subject<number>();
    limiter.run(() => gate).subscribe();
    let ran = 0;
    for (let i = 0; i < 200_000; i++)
      limiter
        .run(
          () =>
            new Observable<number>((s) => {
              ran += 1;
              s.complete();
            }),
        )
        .subscribe();
    gate.complete();
    assert.equal(ran, 200_000);
    assert.equal(limiter.running, 0);
  });

  describe('counter and queue (tryAcquire / enqueue / release)', () => {
    it('takes free slots, then queues waiters that are granted in arrival order with run() tasks', () => {
      const limiter = new FairLimiter(1);
      assert.equal(limiter.tryAcquire(), true);
      assert.equal(limiter.tryAcquire(), false);
      const order: string[] = [];
      limiter.enqueue({ granted: () => order.push('a') });
      const gate = new Subject<number>();
      limiter
        .run(() => {
          order.push('run');
          return gate;
        })
        .subscribe();
      limiter.enqueue({ granted: () => order.push('b') });
      assert.equal(limiter.waiting, 3);
      limiter.release(); // → a
      assert.deepEqual(order, ['a']);
      assert.equal(limiter.tryAcquire(), false, 'never passes a waiter');
      limiter.release(); // → run
      assert.deepEqual(order, ['a', 'run']);
      gate.complete(); // → b
      assert.deepEqual(order, ['a', 'run', 'b']);
      assert.equal(limiter.running, 1);
      limiter.release();
      assert.equal(limiter.running, 0);
      assert.equal(limiter.tryAcquire(), true);
    });

    it('serves a waiter that gives its slot straight back from the loop, not by recursion', () => {
      const limiter = new FairLimiter(1);
      assert.equal(limiter.tryAcquire(), true);
      let granted = 0;
      for (let i = 0; i < 200_000; i++)
        limiter.enqueue({
          granted: () => {
            granted += 1;
            limiter.release();
          },
        });
      limiter.release();
      assert.equal(granted, 200_000);
      assert.equal(limiter.running, 0);
      assert.equal(limiter.waiting, 0);
    });
  });
});
