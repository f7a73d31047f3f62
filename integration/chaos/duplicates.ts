/**
 * The chaos verdict on records processed more than once: a record processed k times is a
 * duplicate k − 1 times, and each of those needs a processing whose work demonstrably did not
 * count — by a worker that crashed, froze, or (where the variant makes the world misbehave) saw
 * the partition's final commit fail or the partition lost, and only from its last confirmed final
 * commit of that partition on. Which processing that is does not depend on the order: a worker
 * started later may process a record first and fail to commit it, and a frozen worker's handlers
 * complete after it wakes, later than the new owner's processing of the same records.
 */

/** One processing of a record: by which worker, when (the worker's clock, ms since the epoch). */
export interface Processing<W> {
  readonly worker: W;
  readonly at: number;
}

/** What the verdict needs to know about a worker. */
export interface WorkerFacts {
  /** SIGKILLed, or frozen past its session: its uncommitted work is redone by design. */
  readonly abrupt: boolean;
  /** Partitions whose final commit this worker saw refused or failed. */
  readonly failedCommits: ReadonlySet<number>;
  /** Partitions this worker saw taken away as lost. */
  readonly lostPartitions: ReadonlySet<number>;
  /** The highest offset a final commit of `partition` by this worker confirmed (-1: none). */
  lastCommit(partition: number): number;
  /**
   * Whether this worker's ownership of `partition` that held it at `at` ended lost: work of that
   * ownership was taken away uncommitted, whatever a later ownership of the same worker committed.
   */
  lostDuring?(partition: number, at: number): boolean;
}

/** Why a duplicate was excused (the first reason that applies to an excused processing). */
export type DuplicateExcuse = 'abrupt' | 'lost' | 'failedCommit' | 'stuck';

export interface DuplicateVerdict<W> {
  /** Processings beyond the first, over all records. */
  readonly duplicates: number;
  /** Of them, those explained. */
  readonly explained: number;
  /** The explained ones by reason: the honest losses a run reports with its figures. */
  readonly explainedBy: Readonly<Record<DuplicateExcuse, number>>;
  /** Records with a processing not explained, each with its processings in time order. */
  readonly unexplained: { partition: number; offset: number; list: Processing<W>[] }[];
}

/**
 * Judges every record processed more than once. `processings` maps `partition@offset` to who
 * processed it, in any order (listed by time in the verdict). `stuck` records (a hung handler that completed
 * late) are explained; `worldMisbehaves` says whether refused commits and losses may excuse;
 * `failedCommitsExcuse: false` narrows that to losses (a member fenced or dropped), for a variant
 * whose failure must not make a final commit fail (a follower of the offsets partition killed: the
 * coordinator stays, the library verifies its commits of unknown outcome).
 */
export function judgeDuplicates<W>(
  processings: ReadonlyMap<string, readonly Processing<W>[]>,
  facts: (worker: W) => WorkerFacts,
  stuck: ReadonlySet<string>,
  worldMisbehaves: boolean,
  { failedCommitsExcuse = true }: { failedCommitsExcuse?: boolean } = {},
): DuplicateVerdict<W> {
  let duplicates = 0;
  let explained = 0;
  const explainedBy: Record<DuplicateExcuse, number> = {
    abrupt: 0,
    lost: 0,
    failedCommit: 0,
    stuck: 0,
  };
  const unexplained: DuplicateVerdict<W>['unexplained'] = [];
  for (const [k, unordered] of processings) {
    if (unordered.length < 2) continue;
    const list = [...unordered].sort((a, b) => a.at - b.at);
    duplicates += list.length - 1;
    const [partition, offset] = k.split('@').map(Number) as [number, number];
    const reasons: DuplicateExcuse[] = [];
    for (const { worker, at } of list) {
      const f = facts(worker);
      // A processing in an ownership that ended lost is judged by that loss, not by what a later
      // ownership of the same worker committed (it may have owned the partition twice).
      const lostThere = worldMisbehaves && f.lostDuring?.(partition, at) === true;
      if (lostThere) {
        reasons.push(f.abrupt ? 'abrupt' : 'lost');
        continue;
      }
      if (offset < f.lastCommit(partition)) continue;
      // A crash, a freeze past the session timeout, or (where the world misbehaves) a final
      // commit that demonstrably failed or the partition lost: taken away without a chance to
      // commit, e.g. the coordinator gone for longer than the session timeout.
      if (f.abrupt) reasons.push('abrupt');
      else if (worldMisbehaves && f.lostPartitions.has(partition)) reasons.push('lost');
      else if (worldMisbehaves && failedCommitsExcuse && f.failedCommits.has(partition))
        reasons.push('failedCommit');
    }
    // The hung handler's late completion is explained whoever ran it.
    if (stuck.has(k)) {
      explained += list.length - 1;
      explainedBy.stuck += list.length - 1;
    } else if (reasons.length >= list.length - 1) {
      explained += list.length - 1;
      for (const r of reasons.slice(0, list.length - 1)) explainedBy[r] += 1;
    } else unexplained.push({ partition, offset, list });
  }
  return { duplicates, explained, explainedBy, unexplained };
}
