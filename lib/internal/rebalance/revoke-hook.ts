/**
 * The `onRevoke` hook: run after a revoke drained and before its final commit, bounded so that the
 * commit keeps its time. A hook that fails or runs past its deadline is logged and reported
 * (`revoke-hook-failed`); the revoke goes on to commit what finished.
 */
import type { Logger } from '../../logger';
import type { ReactiveConsumerOptions } from '../../config';
import { TimeoutError } from '../../errors';
import type { ConsumerEvent } from '../../events';
import type { TopicPartition } from '../../types';
import { untilMoving } from '../loop/wait-conditions';
import type { Conditions } from '../loop/wait-conditions';

export class RevokeHook {
  constructor(
    private readonly hook: ReactiveConsumerOptions['onRevoke'],
    private readonly logger: Logger,
    private readonly publish: (event: ConsumerEvent) => void,
  ) {}

  /** Whether there is a hook to run. */
  get present(): boolean {
    return this.hook !== undefined;
  }

  /**
   * Runs the hook for `partitions` until `by()` (ms since the epoch; a close may bring it forward
   * while the hook runs: the wait follows it); never throws.
   */
  async run(
    partitions: readonly TopicPartition[],
    by: () => number,
    conditions: Conditions,
  ): Promise<void> {
    const hook = this.hook;
    if (hook === undefined) return;
    const list = partitions.map(({ topic, partition }) => ({ topic, partition }));
    const startedAt = Date.now();
    if (by() <= startedAt) {
      this.failed(
        list,
        new TimeoutError(
          'no time left for the onRevoke hook: the drain used the deadline',
          'onRevoke',
          0,
        ),
        'no time left for the onRevoke hook (the drain used the deadline): committing without it',
      );
      return;
    }
    const controller = new AbortController();
    let failure: unknown;
    let failed = false;
    let settled = false;
    void (async () => hook(list, { signal: controller.signal, deadline: by() }))()
      .catch((err: unknown) => {
        failed = true;
        failure = err;
      })
      .finally(() => {
        settled = true;
        conditions.changed();
      });
    const inTime = await untilMoving(
      (c, d) => conditions.until(c, d),
      () => settled,
      by,
    );
    if (!inTime) {
      controller.abort();
      const tookMs = Date.now() - startedAt;
      this.failed(
        list,
        new TimeoutError(
          `the onRevoke hook was still running after ${tookMs} ms`,
          'onRevoke',
          tookMs,
        ),
        'the onRevoke hook was still running at its deadline: committing without waiting for it (its signal is aborted)',
      );
    } else if (failed) {
      this.failed(list, failure, 'the onRevoke hook failed: committing what the handlers finished');
    }
  }

  private failed(partitions: TopicPartition[], error: unknown, message: string): void {
    this.logger.warn({ partitions, err: error }, message);
    this.publish({ type: 'revoke-hook-failed', partitions, error, at: Date.now() });
  }
}
