/**
 * The rebalance coordinator: librdkafka's rebalance callback lands here. It numbers generations,
 * answers assignments (after their start positions are known, see start-positions.ts), starts one
 * revoke task per revoke (the protocol itself reads top to bottom in revoke-protocol.ts), and
 * releases partitions without ever touching a newer assignment.
 *
 * librdkafka waits for the application's (incremental_)assign / unassign call in each callback
 * (docs/binding-behaviours.md, "Deferred unassign"): an assignment whose start offsets are being
 * looked up is "pending" until then, and a revoke or a close answers it first, so librdkafka never
 * waits for it forever.
 */
import type { Logger } from 'pino';
import type { ConsumerSettings } from '../../config';
import { StartPositionError } from '../../errors';
import type { RebalanceEvent, RebalanceProtocol, TopicPartition } from '../../types';
import type { Assignments } from './assignments';
import type { Committer } from '../commit/committer';
import type { ConsumerClient } from '../binding/consumer-client';
import type { FlowControl } from '../loop/flow-control';
import type { PartitionControl } from '../partition/partition-control';
import type { Assignment, LibrdKafkaError } from '../binding/rdkafka';
import { Code, errorMessage, kafkaCodeOf, list, toKafkaError, tpKey } from '../binding/rdkafka';
import { revoke } from './revoke-protocol';
import type { RevokeContext, RevokeHost } from './revoke-protocol';
import { NO_START_CHOICES } from './start-positions';
import type { StartChoices, StartPositions } from './start-positions';

/** How far the consumer is from the end, as far as rebalances care. */
export type Stage = 'open' | 'closing' | 'disconnecting';

/** What the coordinator needs around it. */
export interface RebalanceHost {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly client: ConsumerClient;
  readonly assignments: Assignments;
  readonly startPositions: StartPositions;
  readonly committer: Committer;
  readonly flow: FlowControl;
  /** `group.instance.id` when this consumer is a static member. */
  readonly staticInstanceId: string | undefined;
  stage(): Stage;
  /** When a revoke must end because the consumer closes (+Infinity while not closing). */
  closingBy(): number;
  until(condition: () => boolean, deadline: number): Promise<boolean>;
  changed(): void;
  emit(event: RebalanceEvent): void;
  /** Ends the consumer with an error. */
  fail(err: Error): void;
  /** A fresh stream for a partition of the given generation. */
  newControl(tp: TopicPartition, generation: number): PartitionControl;
  /** Hands a new stream to the application. */
  started(control: PartitionControl): void;
  /** Partitions were assigned (their topics exist and are readable). */
  assigned(partitions: readonly TopicPartition[]): void;
  /**
   * An incremental assign or unassign was answered: librdkafka resumed the partitions it had
   * paused for the rebalance, without waking the broker threads that fetch them (fetch-waker.ts).
   */
  fetchersResumed(): void;
}

interface PendingAssign {
  generation: number;
  readonly partitions: TopicPartition[];
  applied: boolean;
}

export class RebalanceCoordinator {
  private generation = 0;
  /** An assignment whose start offsets are being looked up (librdkafka waits for its assign call). */
  private pendingAssign: PendingAssign | undefined;
  private readonly tasks = new Set<Promise<void>>();
  /** Revokes being drained and committed (close waits for them before leaving the group). */
  private revokes = 0;
  /** Partitions whose revoke is in flight. */
  private readonly revoking = new Set<string>();
  /** The streams those revokes release (each ends in its revoke's events). */
  private readonly revokingStreams = new Set<PartitionControl>();
  /** Why librdkafka says this member was dropped from the group, until the next rebalance. */
  private suspectLost: string | undefined;
  private readonly revokeHost: RevokeHost;

  constructor(private readonly host: RebalanceHost) {
    this.revokeHost = {
      settings: host.settings,
      logger: host.logger,
      committer: host.committer,
      flow: host.flow,
      closingBy: () => host.closingBy(),
      until: (condition, deadline) => host.until(condition, deadline),
      changed: () => host.changed(),
      retiredOf: (partitions) => host.assignments.retiredOf(partitions),
      stillOwned: (c) => host.assignments.owns(c) && this.stillAssigned(c),
      emit: (event) => host.emit(event),
      unassign: (partitions, protocol, generation) =>
        this.unassign(partitions, protocol, generation),
      forget: (controls) => {
        host.assignments.forget(controls);
        host.changed();
      },
    };
  }

  /** True while an assignment or a revoke is being handled. */
  get busy(): boolean {
    return this.tasks.size > 0;
  }

  /** Revokes in flight (drain → commit → unassign not finished). */
  get revokesInFlight(): number {
    return this.revokes;
  }

  /** Why this member is believed dropped from the group, until the next revoke or assignment. */
  get membershipLost(): string | undefined {
    return this.suspectLost;
  }

  /** librdkafka said the member was dropped (max.poll exceeded, session timed out…). */
  suspect(reason: string): void {
    this.suspectLost = reason;
  }

  protocol(): RebalanceProtocol {
    try {
      const p = this.host.client.raw.rebalanceProtocol();
      return p === 'COOPERATIVE' || p === 'EAGER' ? p : 'NONE';
    } catch {
      return 'NONE';
    }
  }

  /** librdkafka's rebalance callback. */
  onRebalance(err: LibrdKafkaError | undefined, assignment: Assignment[]): void {
    try {
      const code = err?.code;
      if (code === Code.ASSIGN_PARTITIONS) this.onAssign(assignment);
      else if (code === Code.REVOKE_PARTITIONS) this.onRevoke(assignment);
      else {
        this.host.logger.warn(
          { err },
          'rebalance error; releasing the assignment (the group rebalances again; work since the last commit may be redone)',
        );
        // Released like a loss: handlers aborted, nothing committed (another member may get
        // them at once), an open transaction with their work aborted.
        const controls = this.host.assignments.of(list(assignment));
        const reason = `rebalance error: ${err?.message ?? String(code)}`;
        const generation = ++this.generation;
        // An assignment still waiting for its start offsets is not overtaken by this release.
        if (this.pendingAssign && !this.pendingAssign.applied)
          this.pendingAssign.generation = generation;
        this.endUnrevoked(controls, reason, generation, true);
        for (const c of controls) c.fence(`partition lost: ${reason}`);
        this.host.committer.lost(controls);
        this.host.flow.releasing(controls);
        this.unassign(assignment, this.protocol(), generation);
        this.revokeHost.forget(controls);
      }
    } catch (error) {
      this.host.logger.error({ err: error }, 'rebalance handling failed');
      this.host.fail(error instanceof Error ? error : new Error(errorMessage(error)));
    }
  }

  private onAssign(assignment: Assignment[]): void {
    const { startPositions, logger } = this.host;
    const generation = ++this.generation;
    // A revoke would have consumed it; an assignment means we are a member again.
    this.suspectLost = undefined;
    const partitions = list(assignment);
    if (
      partitions.length === 0 ||
      this.host.stage() === 'disconnecting' ||
      !startPositions.needed
    ) {
      this.applyAssign(generation, partitions, NO_START_CHOICES);
      return;
    }
    // librdkafka waits for the assign call: look up start offsets first and put them in it.
    let hookFailure: Error | undefined;
    const pending: PendingAssign = { generation, partitions, applied: false };
    this.pendingAssign = pending;
    const task = startPositions
      .resolve(partitions, generation)
      .catch((err: unknown) => {
        if (err instanceof StartPositionError) {
          hookFailure = err;
        } else {
          logger.warn(
            { err, partitions },
            'could not look up start offsets; an idle partition that moves may let the next owner skip records produced meanwhile (auto.offset.reset=latest)',
          );
        }
        return NO_START_CHOICES;
      })
      .then((choices) => {
        if (this.pendingAssign === pending) this.pendingAssign = undefined;
        // Answered already, without start offsets (see answerPending), or not.
        if (!pending.applied) {
          pending.applied = true;
          this.applyAssign(pending.generation, partitions, choices);
        }
        // A hook that failed ends the consumer even when the assignment was answered early.
        if (hookFailure) {
          logger.error({ err: hookFailure }, 'the onAssign hook failed: closing');
          this.host.fail(hookFailure);
        }
      })
      .catch((err: unknown) =>
        this.host.fail(err instanceof Error ? err : new Error(errorMessage(err))),
      )
      .finally(() => {
        this.tasks.delete(task);
        this.host.changed();
      });
    this.tasks.add(task);
  }

  /**
   * Answers an assignment whose start offsets are still being looked up, without them: a revoke
   * or a close must never find librdkafka still waiting for an assign call (its close would wait
   * for it forever). The partitions are then revoked at once, so nothing starts from a wrong place:
   * the memory is not used (work is redone), the hook's choice and a `latest` start are not needed.
   */
  answerPending(why: string): void {
    const pending = this.pendingAssign;
    if (!pending || pending.applied) return;
    pending.applied = true;
    this.pendingAssign = undefined;
    this.host.logger.info(
      { generation: pending.generation, partitions: pending.partitions, why },
      'answering an assignment before its start offsets were resolved',
    );
    this.applyAssign(pending.generation, pending.partitions, NO_START_CHOICES);
  }

  private applyAssign(
    generation: number,
    partitions: TopicPartition[],
    { starts, memories }: StartChoices,
  ): void {
    const { client, assignments, logger, settings } = this.host;
    if (generation !== this.generation) {
      // A newer rebalance arrived while the start offsets were looked up: librdkafka no longer
      // waits for this assign; applying it now would assign partitions that are not ours.
      logger.info(
        { generation, current: this.generation, partitions },
        'skipped an assignment overtaken by a newer rebalance',
      );
      return;
    }
    const protocol = this.protocol();
    const withOffsets = partitions.map((tp) => {
      const start = starts.get(tpKey(tp.topic, tp.partition));
      return start === undefined ? { ...tp } : { ...tp, offset: start };
    });
    try {
      if (protocol === 'COOPERATIVE') {
        client.raw.incrementalAssign(withOffsets);
        this.host.fetchersResumed();
      } else client.raw.assign(withOffsets);
    } catch (err) {
      if (this.host.stage() !== 'open') {
        // An assign delivered while the client is disconnecting throws; answer it with an
        // unassign (allowed while closing) so librdkafka's close does not wait for it.
        logger.info({ err, partitions, generation }, 'assign refused while closing; unassigning');
        this.unassign(partitions, protocol, generation);
        return;
      }
      throw toKafkaError(err, 'assign failed');
    }
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
    const replaced = partitions
      .map((tp) => assignments.get(tpKey(tp.topic, tp.partition)))
      .filter((c): c is PartitionControl => c !== undefined);
    this.endUnrevoked(replaced, 'reassigned in a newer generation', generation);
    this.host.assigned(partitions);
    const controls: PartitionControl[] = [];
    for (const tp of partitions) {
      const key = tpKey(tp.topic, tp.partition);
      const previous = assignments.get(key);
      if (previous !== undefined) {
        previous.fence('reassigned in a newer generation');
        superseded.push(previous);
      }
      const control = this.host.newControl(tp, generation);
      control.startAt(starts.get(key), memories.get(key));
      assignments.take(control);
      controls.push(control);
    }
    if (superseded.length > 0) this.host.committer.lost(superseded);
    this.host.flow.assigned(controls);
    logger.info(
      { generation, protocol, partitions, starts: Object.fromEntries(starts) },
      'assigned',
    );
    this.host.emit({ type: 'assigned', generation, protocol, partitions, at: Date.now() });
    if (this.host.stage() !== 'open') {
      // Assigned while leaving: end the streams right away; the revoke that follows releases them.
      for (const c of controls) c.end();
      // A static classic member stays subscribed while closing: no revoke follows, so release
      // them now.
      if (this.host.staticInstanceId !== undefined && settings.groupProtocol === 'classic') {
        this.onRevoke(partitions);
      }
    }
    for (const c of controls) this.host.started(c);
    this.host.changed();
  }

  /**
   * Revokes partitions through the revoke protocol (revoke-protocol.ts). Also how a closing
   * static member releases its partitions without leaving the group.
   */
  onRevoke(assignment: Assignment[]): void {
    const { client, settings, assignments, logger } = this.host;
    const stage = this.host.stage();
    // Ask librdkafka at once whether this revoke is a loss (fenced by a heartbeat, the session
    // expired): then others may own these partitions already, and draining would only redo
    // their work. Asked before any (un)assign call, which would clear librdkafka's lost flag; the
    // answer is local and comes with the next consume call.
    const lostProbe =
      stage === 'disconnecting'
        ? Promise.resolve(undefined)
        : client.probeAssignmentLost(
            Math.max(
              1,
              Math.min(settings.commitTimeoutMs, Math.floor(settings.drainTimeoutMs / 4)),
            ),
          );
    const all = list(assignment);
    // A partition whose revoke is already in flight is that revoke's to commit and release: a
    // second revoke of it (librdkafka repeats none, but an unsubscribe can cover it) must neither
    // commit it again nor release it before the first one's final commit.
    const partitions = all.filter((tp) => !this.revoking.has(tpKey(tp.topic, tp.partition)));
    if (partitions.length === 0 && all.length > 0 && stage !== 'disconnecting') {
      logger.info(
        { partitions: all },
        'revoke of partitions already being revoked: left to the revoke in flight',
      );
      return;
    }
    // An assignment still waiting for its start offsets is answered first when this revoke
    // covers it, or the consumer is closing (librdkafka's close would wait for it forever).
    const pending = this.pendingAssign;
    if (
      pending &&
      (stage !== 'open' ||
        pending.partitions.some((p) =>
          partitions.some((tp) => tp.topic === p.topic && tp.partition === p.partition),
        ))
    ) {
      this.answerPending('a revoke arrived');
    }
    const generation = ++this.generation;
    // An assignment still waiting for its start offsets and not covered by this revoke is not
    // overtaken by it (a cooperative revoke of other partitions): it is applied in the new
    // generation once its start offsets are known.
    if (this.pendingAssign && !this.pendingAssign.applied)
      this.pendingAssign.generation = generation;
    const protocol = this.protocol();
    const controls = assignments.of(partitions);

    if (stage === 'disconnecting') {
      // The final revoke fired by disconnect(): only unassign works now (docs/binding-behaviours.md, "Closing").
      this.endUnrevoked(
        controls,
        'the consumer disconnected before the partition was released (close deadline)',
        generation,
      );
      for (const c of controls) c.fence('consumer closed');
      this.unassign(all, protocol, generation);
      this.revokeHost.forget(controls);
      return;
    }
    if (controls.length === 0 && partitions.length > 0) {
      // No stream of ours for any of them (a rebalance error released them already): nothing to
      // drain, commit or announce.
      logger.info({ partitions, generation }, 'revoke of partitions without a stream: unassigning');
      this.unassign(partitions, protocol, generation);
      return;
    }
    const announcedLost = this.suspectLost;
    this.suspectLost = undefined;
    // Counted before the protocol emits anything: a close() called from a `revoking` subscriber
    // must already see this revoke in flight (and wait for it before leaving the group).
    this.revokes += 1;
    for (const tp of partitions) this.revoking.add(tpKey(tp.topic, tp.partition));
    for (const c of controls) this.revokingStreams.add(c);
    const ctx: RevokeContext = {
      partitions,
      controls,
      protocol,
      generation,
      startedAt: Date.now(),
      // A static member closing keeps its assignment at the broker (no LeaveGroup under classic;
      // under KIP-848 a leave with epoch -2): nobody else gets these partitions before its
      // session times out.
      handedOver: !(stage === 'closing' && this.host.staticInstanceId !== undefined),
      groupInstanceId: this.host.staticInstanceId,
      announcedLost,
      lostProbe,
    };
    const task = revoke(ctx, this.revokeHost)
      .catch((err: unknown) => {
        logger.error({ err, generation }, 'revoke failed');
        this.host.fail(err instanceof Error ? err : new Error(errorMessage(err)));
      })
      .finally(() => {
        this.revokes -= 1;
        for (const tp of partitions) this.revoking.delete(tpKey(tp.topic, tp.partition));
        for (const c of controls) this.revokingStreams.delete(c);
        this.tasks.delete(task);
        this.host.changed();
      });
    this.tasks.add(task);
  }

  /**
   * Ends the events of streams released without the revoke protocol (librdkafka's final revoke at
   * disconnect, a close that left some behind, an eager assignment that no longer holds them, a
   * rebalance error): every partition an `assigned` event named ends once, in `revoked` or `lost`
   * (a stream another path ended already is skipped). Nothing is committed here: a stream with no
   * work since its last confirmed commit goes through `revoking → drained → committed (unchanged)
   * → revoked` at once (nothing will be redone), any other ends in `lost`, and every one in `lost`
   * when `asLost`. A stream whose revoke is in flight is left to that revoke (it ends it `lost`
   * when it finds the stream released), unless `evenRevoking` (the consumer is gone: that revoke
   * will not be heard). `generation` must be one no revoke in flight uses.
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
    const { logger } = this.host;
    const protocol = this.protocol();
    const at = Date.now();
    const cleanControls = asLost ? [] : ending.filter((c) => !c.workSinceCommit);
    const revoked = list(cleanControls);
    const lost = list(ending.filter((c) => !cleanControls.includes(c)));
    if (revoked.length > 0) {
      // The whole sequence, at once: nothing in flight to drain, nothing new to commit.
      logger.info({ generation, partitions: revoked, reason }, 'revoked (nothing to commit)');
      const base = { generation, protocol, partitions: revoked, at };
      this.host.emit({ type: 'revoking', ...base });
      this.host.emit({
        type: 'drained',
        ...base,
        inFlight: 0,
        stragglers: 0,
        timedOut: false,
        durationMs: 0,
      });
      this.host.emit({
        type: 'committed',
        ...base,
        results: cleanControls.map((c) => ({
          topic: c.topic,
          partition: c.partition,
          status: 'unchanged' as const,
          offset: c.lastCommitted,
        })),
        durationMs: 0,
      });
      this.host.emit({
        type: 'revoked',
        ...base,
        durationMs: 0,
        totalMs: 0,
        // Only a close ends streams in revoked here: a static member's stay with its instance id.
        handedOver: this.host.staticInstanceId === undefined,
      });
    }
    if (lost.length > 0) {
      logger.warn(
        { generation, partitions: lost, reason },
        'partitions lost: released without a final commit; their work since the last confirmed commit will be redone by the next owner (duplicates)',
      );
      this.host.emit({ type: 'lost', generation, protocol, partitions: lost, reason, at });
    }
  }

  /**
   * The close's last word on streams no revoke released (librdkafka's close fired none for them,
   * or a revoke in flight will not finish before the consumer is gone): they end now.
   */
  endLeftovers(controls: readonly PartitionControl[], reason: string): void {
    this.endUnrevoked(controls, reason, ++this.generation, false, true);
  }

  /** Under cooperative rebalancing after a newer generation: is the partition still assigned? */
  private stillAssigned(control: PartitionControl): boolean {
    if (this.protocol() !== 'COOPERATIVE') return true;
    try {
      return this.host.client.raw
        .assignments()
        .some((a) => a.topic === control.topic && a.partition === control.partition);
    } catch {
      return true;
    }
  }

  /**
   * Releases revoked partitions. If a newer rebalance happened meanwhile (the generation moved on),
   * never touch the newer assignment (Backbeat BB-835): eager skips the full unassign, cooperative
   * unassigns only partitions still assigned and not re-owned by a newer generation.
   */
  private unassign(
    partitions: TopicPartition[],
    protocolAtRevoke: RebalanceProtocol,
    generation: number,
  ): void {
    const { client, assignments, logger } = this.host;
    const raw = client.raw;
    const now = this.protocol();
    const protocol = now === 'NONE' ? protocolAtRevoke : now;
    const stale = generation !== this.generation;
    const stillAssigned = (tps: TopicPartition[]): TopicPartition[] => {
      const assigned = new Set(raw.assignments().map((a) => tpKey(a.topic, a.partition)));
      return tps.filter((tp) => assigned.has(tpKey(tp.topic, tp.partition)));
    };
    try {
      if (protocol === 'COOPERATIVE') {
        const targets = stale
          ? stillAssigned(partitions).filter((tp) => {
              const owner = assignments.get(tpKey(tp.topic, tp.partition));
              return owner === undefined || owner.generation <= generation;
            })
          : partitions;
        if (targets.length > 0) {
          raw.incrementalUnassign(targets);
          this.host.fetchersResumed();
        }
      } else if (stale) {
        logger.info(
          { generation, current: this.generation },
          'skipped a stale unassign: a newer assignment arrived meanwhile',
        );
      } else {
        raw.unassign();
      }
    } catch (err) {
      const code = kafkaCodeOf(err);
      if (protocol === 'COOPERATIVE' && code === Code.INVALID_ARG) {
        // Some partitions were no longer assigned: unassign the ones that still are.
        try {
          const targets = stillAssigned(partitions);
          if (targets.length > 0) {
            raw.incrementalUnassign(targets);
            this.host.fetchersResumed();
          }
          logger.info(
            { partitions, unassigned: targets, generation },
            'unassigned the partitions still assigned',
          );
        } catch (retryErr) {
          logger.warn({ err: retryErr, partitions, generation }, 'unassign retry failed');
        }
        return;
      }
      logger.warn({ err, code, partitions, generation }, 'unassign failed');
    }
  }
}
