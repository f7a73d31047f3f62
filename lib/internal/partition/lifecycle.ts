/**
 * A partition's whole life, written in one place: a stream begins when an assignment (or a seek)
 * takes the partition, stops its intake when a revoke or a close begins, is fenced when its work
 * no longer counts, and ends — released, unassigned, forgotten, its last event emitted — in
 * exactly one of the ways below. The revoke protocol and the other paths decide *what* happened
 * (drained and committed, lost and why, released without a revoke); they hand that outcome here,
 * and nothing else calls `end`, `fence`, `release` or `claimEnding` on a stream, changes the
 * ownership map, unassigns, or emits a stream's events.
 *
 * Every partition an `assigned` event named ends once, in `revoked` or `lost`:
 * - {@link PartitionLifecycle.conclude}: a revoke's outcome — drained and committed (`committed`,
 *   then `revoked`, or `lost` where the broker refused the final commit for ownership), or lost
 *   (handlers aborted, nothing committed);
 * - {@link PartitionLifecycle.endUnrevoked}: released without the revoke protocol (librdkafka's
 *   final revoke at disconnect, a close that left some behind, an eager assignment that no longer
 *   holds them, a rebalance error). Nothing is committed there: a stream with no work since its
 *   last confirmed commit goes through `revoking → drained → committed (unchanged) → revoked` at
 *   once (nothing will be redone), any other ends in `lost`.
 */
import type { Logger } from '../../logger';
import type { RebalanceEvent, RebalanceProtocol, TopicPartition } from '../../types';
import type { FlowControl } from '../loop/flow-control';
import type { Conditions } from '../loop/wait-conditions';
import type { AssignCalls } from '../rebalance/assign-calls';
import type { Assignments } from '../rebalance/assignments';
import type { StartChoices } from '../rebalance/start-positions';
import { tpKey } from '../binding/rdkafka';
import { LifecycleEvents } from './lifecycle-events';
import type { Committed, RevokeOutcome, RevokeScope } from './lifecycle-events';
import { PartitionControl } from './partition-control';

export type { RevokeOutcome, RevokeScope } from './lifecycle-events';

/** The consumer's parts a partition's life touches. */
export interface LifecycleParts {
  readonly logger: Logger;
  /** Which stream owns each partition (written only from here). */
  readonly assignments: Assignments;
  readonly flow: FlowControl;
  readonly calls: AssignCalls;
  /** Where offsets go: told when partitions are released as lost (transactions abort their work). */
  readonly commits: { lost(controls: readonly PartitionControl[]): void };
  readonly conditions: Conditions;
  /** The rebalance events (`rebalances$`). */
  readonly events: { next(event: RebalanceEvent): void };
  /** Where new streams go (`partitions$`). */
  readonly streams: { next(control: PartitionControl): void };
  /** `group.instance.id` when this consumer is a static member. */
  readonly staticInstanceId: string | undefined;
}

export class PartitionLifecycle {
  /** The streams a revoke in flight releases (each ends in its revoke's events). */
  private readonly revokingStreams = new Set<PartitionControl>();

  /** What each step announces (its log line and rebalance event). */
  private readonly say: LifecycleEvents;

  constructor(private readonly parts: LifecycleParts) {
    this.say = new LifecycleEvents(parts.logger, parts.events);
  }

  // --- Begin ------------------------------------------------------------------------------------

  /**
   * Takes the partitions of an assignment: streams a newer assignment replaces end (eager: every
   * one it no longer holds), fresh streams take the partitions, and the `assigned` event is
   * emitted. The streams are handed to the application by {@link hand}.
   */
  assign(
    generation: number,
    protocol: RebalanceProtocol,
    partitions: TopicPartition[],
    { starts, memories }: StartChoices,
  ): PartitionControl[] {
    const { assignments } = this.parts;
    // Streams a newer assignment replaced before their revoke committed: nothing more is committed
    // for them here (an open transaction with their work is aborted: its records must not be
    // committed with the new stream's offset).
    const superseded: PartitionControl[] = [];
    if (protocol !== 'COOPERATIVE') {
      // Eager: the assignment replaces the previous one; nothing else is ours any more.
      const incoming = new Set(partitions.map((tp) => tpKey(tp.topic, tp.partition)));
      const dropped = assignments.dropUnless((key) => incoming.has(key));
      // Nothing more is committed for them (a revoke in flight finds them superseded).
      this.endUnrevoked(dropped, 'no longer assigned', generation);
      for (const c of dropped) {
        c.fence('no longer assigned');
        superseded.push(c);
      }
    }
    // A stream this assignment replaces without a revoke in between ends now (the new stream
    // starts from the committed offset: its work since then is redone).
    const replaced = assignments.of(partitions);
    this.endUnrevoked(replaced, 'reassigned in a newer generation', generation);
    const controls: PartitionControl[] = [];
    for (const tp of partitions) {
      const key = tpKey(tp.topic, tp.partition);
      const previous = assignments.get(key);
      if (previous !== undefined) {
        previous.fence('reassigned in a newer generation');
        superseded.push(previous);
      }
      const control = this.create(tp, generation);
      control.startAt(starts.get(key), memories.get(key));
      assignments.take(control);
      controls.push(control);
    }
    if (superseded.length > 0) this.parts.commits.lost(superseded);
    this.parts.flow.assigned(controls);
    this.say.assigned(generation, protocol, partitions, starts);
    return controls;
  }

  /** Hands new streams to the application. */
  hand(controls: readonly PartitionControl[]): void {
    for (const c of controls) this.parts.streams.next(c);
    this.parts.conditions.changed();
  }

  /**
   * A seek replaces `old` with a fresh stream of the same assignment starting at `offset`: the old
   * one is fenced (buffered messages dropped, handlers aborted) and retired until its aborted
   * handlers return. The new stream is handed over by {@link hand}.
   */
  reseek(old: PartitionControl, offset: number): PartitionControl {
    old.fence(`seek to ${offset}`);
    const control = this.create(old, old.generation);
    control.startAt(offset);
    control.replacesMemory = true; // what was remembered before the seek no longer holds
    this.parts.assignments.replace(old, control);
    this.parts.flow.replaced(old, control);
    return control;
  }

  private create(tp: TopicPartition, generation: number): PartitionControl {
    return new PartitionControl(
      tp.topic,
      tp.partition,
      generation,
      tpKey(tp.topic, tp.partition),
      this.acked,
    );
  }

  private readonly acked = (control: PartitionControl): void => {
    this.parts.assignments.acked(control);
    this.parts.flow.afterAck(control);
    this.parts.conditions.changed();
  };

  // --- Stop -------------------------------------------------------------------------------------

  /** No new messages reach these streams; their pipelines drain what they started. */
  stopIntake(controls: Iterable<PartitionControl>): void {
    for (const c of controls) c.end();
  }

  /** Their handlers are aborted and later acks no longer count. */
  fence(controls: Iterable<PartitionControl>, reason: string): void {
    for (const c of controls) c.fence(reason);
  }

  /** Whether the stream still owns its partition (no newer assignment took it): the final commit is for those only. */
  stillOwned(control: PartitionControl): boolean {
    return this.parts.assignments.owns(control) && this.parts.calls.stillAssigned(control);
  }

  /** Streams a seek of these partitions replaced whose aborted handlers still run. */
  retiredOf(partitions: readonly TopicPartition[]): PartitionControl[] {
    return this.parts.assignments.retiredOf(partitions);
  }

  // --- A revoke ---------------------------------------------------------------------------------

  /**
   * A revoke of these streams is in flight: they are its to release (another path that releases
   * them meanwhile leaves their last event to it), until {@link revokeEnded}.
   */
  revokeStarted(controls: readonly PartitionControl[]): void {
    for (const c of controls) this.revokingStreams.add(c);
  }

  /** The revoke's drain begins: the streams' intake stops, and `revoking` is emitted. */
  revoking(scope: RevokeScope): void {
    const inFlight = scope.controls.reduce((n, c) => n + c.inFlight, 0);
    this.stopIntake(scope.controls);
    this.say.revoking(scope, inFlight);
  }

  /**
   * The drain ended: `timedOut` when its deadline passed first (the stragglers are fenced, and
   * what is contiguous gets committed). Returns when.
   */
  drained(scope: RevokeScope, inFlight: number, timedOut: boolean, drainTimeoutMs: number): number {
    const stragglers = scope.controls.filter((c) => !c.isDrained);
    const stuck = stragglers.map((c) => c.describe());
    this.fence(stragglers, 'drain deadline passed');
    return this.say.drained(scope, inFlight, stragglers, stuck, timedOut, drainTimeoutMs);
  }

  /** The revoke task ended (whatever happened): its streams are no longer its to release. */
  revokeEnded(controls: readonly PartitionControl[]): void {
    for (const c of controls) this.revokingStreams.delete(c);
  }

  /** Applies what a revoke came to (see {@link RevokeOutcome}). */
  conclude(scope: RevokeScope, outcome: RevokeOutcome): void {
    if (outcome.kind === 'lost') this.releaseLost(scope, outcome.reason);
    else this.releaseCommitted(scope, outcome);
  }

  /** Partitions taken away without a chance to commit: handlers aborted, nothing committed. */
  private releaseLost(scope: RevokeScope, reason: string): void {
    const { partitions, controls, protocol, generation } = scope;
    this.fence(controls, `partition lost: ${reason}`);
    // Transactions abort the open one if it holds work of these partitions.
    this.parts.commits.lost(controls);
    this.parts.flow.releasing(controls);
    this.parts.calls.unassign(partitions, protocol, generation);
    this.forget(controls);
    // Each stream ends once (a close may have ended it meanwhile).
    this.say.lost(
      scope,
      controls.filter((c) => c.claimEnding()),
      reason,
    );
  }

  private releaseCommitted(scope: RevokeScope, outcome: Committed): void {
    const { partitions, controls, protocol, generation } = scope;
    const { results, refused, stillOurs } = outcome;
    // Refused for ownership: their handlers' work no longer counts.
    const lostResult = (c: PartitionControl): boolean =>
      results.some(
        (r) => r.status === 'lost' && r.topic === c.topic && r.partition === c.partition,
      );
    this.fence(
      stillOurs.filter((c) => lostResult(c)),
      'lost',
    );
    this.say.committed(scope, outcome);
    this.parts.flow.releasing(stillOurs);
    this.parts.calls.unassign(partitions, protocol, generation);
    for (const c of controls) c.release();
    this.forget(controls);
    const revokedAt = Date.now();
    // Each stream ends once (a close or a rebalance error may have ended it meanwhile): in `lost`
    // when the broker refused the final commit for ownership, or when another path released it
    // before its commit and left work to redo; else in `revoked`.
    const ending = controls.filter((c) => c.claimEnding());
    const lostEnding = ending.filter((c) => refused.length > 0 || lostResult(c));
    const revokedEnding = ending.filter((c) => !lostEnding.includes(c));
    this.say.ended(scope, outcome, revokedEnding, lostEnding, revokedAt);
  }

  // --- Released without the revoke protocol -----------------------------------------------------

  /**
   * A rebalance error: the partitions are released like a loss (handlers aborted, nothing
   * committed: another member may get them at once; an open transaction with their work aborted).
   */
  releaseOnError(
    controls: PartitionControl[],
    partitions: TopicPartition[],
    reason: string,
    generation: number,
  ): void {
    this.endUnrevoked(controls, reason, generation, true);
    this.fence(controls, `partition lost: ${reason}`);
    this.parts.commits.lost(controls);
    this.parts.flow.releasing(controls);
    this.parts.calls.unassign(partitions, this.parts.calls.protocol(), generation);
    this.forget(controls);
  }

  /** librdkafka's final revoke at disconnect: only unassign works now (docs/binding-behaviours.md, "Closing"). */
  releaseDisconnected(
    controls: PartitionControl[],
    partitions: TopicPartition[],
    protocol: RebalanceProtocol,
    generation: number,
  ): void {
    this.endUnrevoked(
      controls,
      'the consumer disconnected before the partition was released (close deadline)',
      generation,
    );
    this.fence(controls, 'consumer closed');
    this.parts.calls.unassign(partitions, protocol, generation);
    this.forget(controls);
  }

  /** The consumer closes: every stream still owned is fenced (before the disconnect). */
  fenceAll(reason: string): void {
    this.fence(this.parts.assignments.values(), reason);
  }

  /**
   * The close's last word on streams no revoke released (librdkafka's close fired none for them,
   * or a revoke in flight will not finish before the consumer is gone): they end now, and the
   * ownership map empties.
   */
  closeOut(reason: string): void {
    const { assignments, calls } = this.parts;
    this.endUnrevoked(assignments.controls(), reason, calls.nextGeneration(), false, true);
    for (const c of assignments.values()) c.release();
    assignments.clear();
  }

  /**
   * Ends the events of streams released without the revoke protocol (see the header). A stream
   * whose revoke is in flight is left to that revoke (it ends it `lost` when it finds the stream
   * released), unless `evenRevoking` (the consumer is gone: that revoke will not be heard).
   * `generation` must be one no revoke in flight uses.
   */
  endUnrevoked(
    controls: readonly PartitionControl[],
    reason: string,
    generation: number,
    asLost = false,
    evenRevoking = false,
  ): void {
    const ending = controls.filter(
      (c) => (evenRevoking || !this.revokingStreams.has(c)) && c.claimEnding(),
    );
    if (ending.length === 0) return;
    const clean = asLost ? [] : ending.filter((c) => !c.workSinceCommit);
    this.say.releasedAtOnce(
      generation,
      this.parts.calls.protocol(),
      clean,
      ending.filter((c) => !clean.includes(c)),
      reason,
      // Only a close ends streams in revoked here: a static member's stay with its instance id.
      this.parts.staticInstanceId === undefined,
    );
  }

  /** Drops released streams from the ownership map (ones a newer assignment took stay). */
  private forget(controls: readonly PartitionControl[]): void {
    this.parts.assignments.forget(controls);
    this.parts.flow.reshared();
    this.parts.conditions.changed();
  }
}
