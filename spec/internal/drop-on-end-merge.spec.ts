import assert from 'node:assert/strict';
import { EMPTY, Subject, defer, lastValueFrom, map, of, tap, timer, toArray } from 'rxjs';
import type { Observable } from 'rxjs';
import { dropOnEndMerge } from '../../lib/internal/partition/drop-on-end-merge';

describe('dropOnEndMerge', () => {
  it('completes on an empty source', async () => {
    const out = await lastValueFrom(
      EMPTY.pipe(
        dropOnEndMerge(() => of(1), 2, new AbortController().signal),
        toArray(),
      ),
    );
    assert.deepEqual(out, []);
  });

  it('runs at most `concurrency` inners and emits all results', async () => {
    let running = 0;
    let max = 0;
    const out = await lastValueFrom(
      of(1, 2, 3, 4, 5).pipe(
        dropOnEndMerge(
          (v) =>
            defer(() => {
              running += 1;
              max = Math.max(max, running);
              return timer(2).pipe(map(() => v * 10));
            }).pipe(tap({ complete: () => (running -= 1) })),
          2,
          new AbortController().signal,
        ),
        toArray(),
      ),
    );
    assert.deepEqual(
      [...out].sort((a, b) => a - b),
      [10, 20, 30, 40, 50],
    );
    assert.equal(max, 2);
  });

  it('drops waiting values when ended, and completes once running inners finish', async () => {
    const ended = new AbortController();
    const source = new Subject<number>();
    const started: number[] = [];
    const gate = new Subject<void>();
    const done = lastValueFrom(
      source.pipe(
        dropOnEndMerge(
          (v) => {
            started.push(v);
            return gate.pipe(map(() => v));
          },
          1,
          ended.signal,
        ),
        toArray(),
      ),
    );
    for (let i = 0; i < 5; i++) source.next(i);
    ended.abort();
    gate.next();
    gate.complete();
    assert.deepEqual(await done, [0]);
    assert.deepEqual(started, [0]);
  });

  it('does not overflow the stack on a long buffer of synchronously completing inners', async () => {
    const source = new Subject<number>();
    const gate = new Subject<void>();
    let count = 0;
    const done = lastValueFrom(
      source.pipe(
        dropOnEndMerge(
          (v): Observable<unknown> => (v === 0 ? gate : (count++, EMPTY)),
          1,
          new AbortController().signal,
        ),
        toArray(),
      ),
    );
    for (let i = 0; i < 50_000; i++) source.next(i);
    source.complete();
    gate.complete();
    await done;
    assert.equal(count, 49_999);
  });

  it('propagates a project error', async () => {
    const err = await lastValueFrom(
      of(1).pipe(
        dropOnEndMerge(
          () => {
            throw new Error('boom');
          },
          1,
          new AbortController().signal,
        ),
      ),
    ).catch((e: unknown) => e);
    assert.equal((err as Error).message, 'boom');
  });
});
