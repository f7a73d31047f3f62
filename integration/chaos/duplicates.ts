/**
 * The chaos verdict on records processed more than once: every processing but the last one (in
 * time) must be explained by what happened to the worker that did it — a crash, a freeze, or,
 * where the variant makes the world misbehave, a final commit that demonstrably failed or the
 * partition lost — and only from its last confirmed final commit of that partition on.
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
}

export interface DuplicateVerdict<W> {
  /** Processings beyond the first, over all records. */
  readonly duplicates: number;
  /** Of them, those explained. */
  readonly explained: number;
  /** Records with a processing not explained, each with its processings in time order. */
  readonly unexplained: { partition: number; offset: number; list: Processing<W>[] }[];
}

/**
 * Judges every record processed more than once. `processings` maps `partition@offset` to who
 * processed it, in any order (sorted by time here: a worker started later may well process a
 * record first, and one started earlier redo it). `stuck` records (a hung handler that completed
 * late) are explained; `worldMisbehaves` says whether refused commits and losses may excuse.
 */
export function judgeDuplicates<W>(
  processings: ReadonlyMap<string, readonly Processing<W>[]>,
  facts: (worker: W) => WorkerFacts,
  stuck: ReadonlySet<string>,
  worldMisbehaves: boolean,
): DuplicateVerdict<W> {
  let duplicates = 0;
  let explained = 0;
  const unexplained: DuplicateVerdict<W>['unexplained'] = [];
  for (const [k, unordered] of processings) {
    if (unordered.length < 2) continue;
    const list = [...unordered].sort((a, b) => a.at - b.at);
    duplicates += list.length - 1;
    const [partition, offset] = k.split('@').map(Number) as [number, number];
    const ok = list.every(({ worker }, i) => {
      if (i === list.length - 1) return true; // the last processing is the one that counts
      if (stuck.has(k)) return true; // the hung handler's late completion
      const f = facts(worker);
      // A crash, a freeze past the session timeout, or (where the world misbehaves) a final
      // commit that demonstrably failed or the partition lost: taken away without a chance to
      // commit, e.g. the coordinator gone for longer than the session timeout.
      const excused =
        f.abrupt ||
        (worldMisbehaves && (f.failedCommits.has(partition) || f.lostPartitions.has(partition)));
      return excused && offset >= f.lastCommit(partition);
    });
    if (ok) explained += list.length - 1;
    else unexplained.push({ partition, offset, list });
  }
  return { duplicates, explained, unexplained };
}
