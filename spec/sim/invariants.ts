/**
 * The simulation's invariant checker. The world reports what happened, in order (handlers that
 * succeeded, calls the library made on its client, commits the broker applied, rebalance events,
 * seeks); the checker keeps what each invariant needs and records a {@link Violation} the moment
 * one breaks. It knows nothing of the library: the same events from a broken consumer must fail
 * it (see the checker's own specs in spec/simulation.spec.ts).
 */

export type ViolationKind =
  /** The broker's committed offset passed an offset nobody processed. */
  | 'commit-past-unprocessed'
  /** An offset's handler succeeded twice (beyond what a seek asked for) on a graceful path. */
  | 'duplicate-processing'
  /** A commit for a partition sent after that partition's final commit in its assignment. */
  | 'commit-after-final'
  /** A commit for a partition sent while the member did not have it assigned. */
  | 'commit-while-unassigned'
  /** The broker's committed offset of a partition moved backwards (no seek asked for it). */
  | 'committed-backwards'
  /** The library reported a commit as confirmed that the broker never applied. */
  | 'confirmed-not-applied'
  /** A graceful path ended a revoke as lost, or past its drain deadline. */
  | 'graceful-revoke-failed'
  /** A seek asked in one assignment was applied to the client in a later one. */
  | 'seek-newer-assignment'
  /** A rebalance callback stayed unanswered (no assign/unassign call) past every deadline. */
  | 'unanswered-callback'
  /** close() did not resolve within closeTimeoutMs, or rejected. */
  | 'close-failed'
  /** The process() pipeline errored, or did not complete after close. */
  | 'pipeline-failed'
  /** An exception escaped to the event loop (uncaught, or an unhandled rejection). */
  | 'uncaught-error'
  /** rebalances$ completed with a partition an `assigned` event named never ended in `revoked` or `lost`. */
  | 'assignment-not-ended'
  /** A `revoked` or `lost` event named a partition with no assignment left to end (ended twice). */
  | 'assignment-ended-twice'
  /** A revoke's events out of order (revoking → drained → committed → revoked, per generation). */
  | 'revoke-phase-order'
  /** At the end of a calm phase, some offset was never processed or never committed. */
  | 'not-all-processed';

export interface Violation {
  readonly kind: ViolationKind;
  readonly message: string;
  /** Virtual ms since the start of the run. */
  readonly at: number;
}

type PartitionState = 'assigned' | 'final' | 'unassigned';

export class InvariantChecker {
  readonly violations: Violation[] = [];
  /** Why this run is not a graceful path (empty while it is). */
  readonly notGraceful: string[] = [];
  private readonly succeeded = new Map<number, Map<number, number>>();
  /** Extra successes a seek asked for (it replays from its target). */
  private readonly credits = new Map<number, Map<number, number>>();
  /** Offsets below this were skipped on request (a seek forward). */
  private readonly waivedBelow = new Map<number, number>();
  /** The lowest seek target of each partition: the committed offset may go back to it. */
  private readonly seekFloor = new Map<number, number>();
  private readonly committed = new Map<number, number>();
  /** `life|partition|offset` of commits the broker applied. */
  private readonly applied = new Set<string>();
  private readonly partitionState = new Map<string, PartitionState>();
  /** Assign/unassign calls per `life|partition`: an assignment's identity. */
  private readonly epochs = new Map<string, number>();
  private readonly userSeeks = new Map<string, { offset: number; epoch: number }[]>();
  /**
   * Per life and partition: `assigned` events not ended yet by a `revoked`/`lost` (a count: an
   * eager assignment may name a partition again while the revoke of its previous stream drains).
   */
  private readonly openAssignments = new Map<string, Map<number, number>>();
  /** Per `life|generation`: the last phase of that revoke. */
  private readonly revokePhase = new Map<string, string>();

  constructor(
    private readonly now: () => number,
    private readonly logEnd: (partition: number) => number,
    private readonly onViolation: (v: Violation) => void = () => undefined,
  ) {}

  get graceful(): boolean {
    return this.notGraceful.length === 0;
  }

  /** The run left the graceful path (a loss, a deadline, a crash was injected). */
  markNotGraceful(reason: string): void {
    this.notGraceful.push(reason);
  }

  fail(kind: ViolationKind, message: string): void {
    const v = { kind, message, at: this.now() };
    this.violations.push(v);
    this.onViolation(v);
  }

  timesSucceeded(partition: number, offset: number): number {
    return this.succeeded.get(partition)?.get(offset) ?? 0;
  }

  committedOffset(partition: number): number | undefined {
    return this.committed.get(partition);
  }

  // --- what happened --------------------------------------------------------------------------

  handlerSucceeded(life: string, partition: number, offset: number): void {
    const byOffset = this.succeeded.get(partition) ?? new Map<number, number>();
    this.succeeded.set(partition, byOffset);
    const times = (byOffset.get(offset) ?? 0) + 1;
    byOffset.set(offset, times);
    const allowed = 1 + (this.credits.get(partition)?.get(offset) ?? 0);
    if (times > allowed && this.graceful) {
      this.fail(
        'duplicate-processing',
        `${life}: the handler of p${partition}@${offset} succeeded ${times} times (allowed ${allowed}) on a graceful path`,
      );
    }
  }

  assignCall(life: string, partitions: readonly number[]): void {
    for (const p of partitions) {
      this.partitionState.set(`${life}|${p}`, 'assigned');
      this.bump(life, p);
    }
  }

  unassignCall(life: string, partitions: readonly number[]): void {
    for (const p of partitions) {
      this.partitionState.set(`${life}|${p}`, 'unassigned');
      this.bump(life, p);
    }
  }

  /** A revoke finished its commit phase for these partitions (the `committed` rebalance event). */
  finalCommitDone(
    life: string,
    results: readonly { partition: number; status: string; offset?: number | undefined }[],
  ): void {
    for (const r of results) {
      const k = `${life}|${r.partition}`;
      if (this.partitionState.get(k) === 'assigned') this.partitionState.set(k, 'final');
      if (r.status === 'committed' && !this.applied.has(`${k}|${String(r.offset)}`)) {
        this.fail(
          'confirmed-not-applied',
          `${life}: the revoke reported p${r.partition}@${String(r.offset)} committed, but the broker never applied that commit of this member`,
        );
      }
    }
  }

  commitSent(life: string, offsets: readonly { partition: number; offset: number }[]): void {
    for (const o of offsets) {
      const state = this.partitionState.get(`${life}|${o.partition}`) ?? 'unassigned';
      if (state === 'final') {
        this.fail(
          'commit-after-final',
          `${life}: commit of p${o.partition}@${o.offset} sent after that partition's final commit (before it was assigned again)`,
        );
      } else if (state === 'unassigned') {
        this.fail(
          'commit-while-unassigned',
          `${life}: commit of p${o.partition}@${o.offset} sent while p${o.partition} is not assigned to it`,
        );
      }
    }
  }

  /**
   * The broker applied a commit; `late`: one whose client was answered an error (timed out)
   * before — the world moving the offset back, which the library must repair before a release.
   */
  commitApplied(
    life: string,
    offsets: readonly { partition: number; offset: number }[],
    late = false,
  ): void {
    for (const { partition: p, offset: x } of offsets) {
      this.applied.add(`${life}|${p}|${x}`);
      const end = this.logEnd(p);
      if (x > end) {
        this.fail(
          'commit-past-unprocessed',
          `${life}: committed p${p}@${x} past the log end ${end}`,
        );
      }
      const waived = this.waivedBelow.get(p) ?? 0;
      for (let o = waived; o < Math.min(x, end); o++) {
        if (this.timesSucceeded(p, o) === 0) {
          this.fail(
            'commit-past-unprocessed',
            `${life}: the broker committed p${p}@${x}, but offset ${o} was never processed by anyone`,
          );
          break;
        }
      }
      const before = this.committed.get(p);
      if (!late && before !== undefined && x < before && x < (this.seekFloor.get(p) ?? Infinity)) {
        this.fail(
          'committed-backwards',
          `${life}: the committed offset of p${p} moved backwards from ${before} to ${x}`,
        );
      }
      this.committed.set(p, x);
    }
  }

  /** The application asked to seek (in the assignment it has now); returns a token for {@link seekRejected}. */
  seekCalled(life: string, partition: number, offset: number): object {
    const k = `${life}|${partition}`;
    const token = { offset, epoch: this.epochs.get(k) ?? 0 };
    this.userSeeks.set(k, [...(this.userSeeks.get(k) ?? []), token]);
    return token;
  }

  /** The seek was refused before it reached the client. */
  seekRejected(life: string, partition: number, token: object): void {
    const seeks = this.userSeeks.get(`${life}|${partition}`) ?? [];
    const i = seeks.indexOf(token as { offset: number; epoch: number });
    if (i >= 0) seeks.splice(i, 1);
  }

  /** The library seeked its client: from now on the partition replays (or skips) from `offset`. */
  nativeSeek(life: string, partition: number, offset: number): void {
    const k = `${life}|${partition}`;
    const seeks = this.userSeeks.get(k) ?? [];
    const i = seeks.findIndex((s) => s.offset === offset);
    const asked = i >= 0 ? seeks[i] : undefined;
    if (asked !== undefined) {
      seeks.splice(i, 1);
      if (asked.epoch !== (this.epochs.get(k) ?? 0)) {
        this.fail(
          'seek-newer-assignment',
          `${life}: a seek of p${partition} to ${offset} asked in one assignment was applied to the client in a later one`,
        );
      }
    }
    this.waivedBelow.set(partition, Math.max(this.waivedBelow.get(partition) ?? 0, offset));
    this.seekFloor.set(partition, Math.min(this.seekFloor.get(partition) ?? Infinity, offset));
    const credits = this.credits.get(partition) ?? new Map<number, number>();
    this.credits.set(partition, credits);
    for (let o = offset; o < this.logEnd(partition); o++) credits.set(o, (credits.get(o) ?? 0) + 1);
  }

  /** The library's rebalance event; a graceful path never ends a revoke lost or past its deadline. */
  rebalanceEvent(
    life: string,
    type: string,
    partitions: readonly number[],
    detail: {
      timedOut?: boolean;
      reason?: string;
      failed?: readonly number[];
      generation?: number;
    },
  ): void {
    if (detail.generation !== undefined) {
      const k = `${life}|${detail.generation}`;
      const before: Record<string, string> = {
        drained: 'revoking',
        committed: 'drained',
        revoked: 'committed',
      };
      if (type === 'revoking') this.revokePhase.set(k, type);
      const expected = before[type];
      if (expected !== undefined) {
        const last = this.revokePhase.get(k);
        if (last !== expected) {
          this.fail(
            'revoke-phase-order',
            `${life}: ${type} of generation ${detail.generation} after ${last ?? 'nothing'} (expected ${expected})`,
          );
        }
        this.revokePhase.set(k, type);
      }
    }
    const open = this.openAssignments.get(life) ?? new Map<number, number>();
    this.openAssignments.set(life, open);
    if (type === 'assigned') for (const p of partitions) open.set(p, (open.get(p) ?? 0) + 1);
    if (type === 'revoked' || type === 'lost') {
      for (const p of partitions) {
        const n = open.get(p) ?? 0;
        if (n === 0) {
          this.fail(
            'assignment-ended-twice',
            `${life}: ${type} of p${p}, which has no assignment left to end (ended twice, or never assigned)`,
          );
        } else open.set(p, n - 1);
      }
    }
    if (!this.graceful) return;
    if (detail.failed !== undefined && detail.failed.length > 0) {
      this.fail(
        'graceful-revoke-failed',
        `${life}: the final commit of [${detail.failed.join(',')}] failed on a graceful path (${detail.reason ?? ''})`,
      );
    } else if (type === 'lost') {
      this.fail(
        'graceful-revoke-failed',
        `${life}: revoke of [${partitions.join(',')}] ended lost on a graceful path (${detail.reason ?? ''})`,
      );
    } else if (type === 'drained' && detail.timedOut === true) {
      this.fail(
        'graceful-revoke-failed',
        `${life}: revoke of [${partitions.join(',')}] passed its drain deadline on a graceful path`,
      );
    }
  }

  /** The life's rebalances$ completed: every partition it was assigned must have ended. */
  rebalancesCompleted(life: string): void {
    const open = [...(this.openAssignments.get(life) ?? new Map<number, number>())]
      .filter(([, n]) => n > 0)
      .map(([p]) => p)
      .sort((a, b) => a - b);
    if (open.length > 0) {
      this.fail(
        'assignment-not-ended',
        `${life}: rebalances$ completed with [${open.join(',')}] assigned but never revoked or lost`,
      );
    }
  }

  /** Every offset processed (or skipped on request) and committed: the end of a calm phase. */
  missing(partitions: number): string[] {
    const out: string[] = [];
    for (let p = 0; p < partitions; p++) {
      const end = this.logEnd(p);
      const waived = this.waivedBelow.get(p) ?? 0;
      const unprocessed: number[] = [];
      for (let o = waived; o < end; o++) if (this.timesSucceeded(p, o) === 0) unprocessed.push(o);
      if (unprocessed.length > 0) {
        out.push(
          `p${p}: ${unprocessed.length} offset(s) never processed (first ${String(unprocessed[0])})`,
        );
      }
      const c = this.committed.get(p) ?? 0;
      if (c !== end) out.push(`p${p}: committed ${c}, log end ${end}`);
    }
    return out;
  }

  private bump(life: string, partition: number): void {
    const k = `${life}|${partition}`;
    this.epochs.set(k, (this.epochs.get(k) ?? 0) + 1);
  }
}
