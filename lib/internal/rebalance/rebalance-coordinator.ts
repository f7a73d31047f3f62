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
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { StartPositionError } from '../../errors';
import type { TopicPartition } from '../../types';
import type { OffsetCommits } from '../commit/committer';
import type { ConsumerClient } from '../binding/consumer-client';
import type { Shutdown } from '../loop/shutdown';
import type { Conditions } from '../loop/wait-conditions';
import type { PartitionLifecycle } from '../partition/lifecycle';
import type { Assignment, LibrdKafkaError } from '../binding/rdkafka';
import { Code, errorMessage, list, toKafkaError, tpKey } from '../binding/rdkafka';
import type { AssignCalls } from './assign-calls';
import { protocolForClose } from './assign-calls';
import type { Assignments } from './assignments';
import { lostOnArrival, revoke } from './revoke-protocol';
import type { RevokeHook } from './revoke-hook';
import type { RevokeContext, RevokeParts } from './revoke-protocol';
import { NO_START_CHOICES, StartLookup } from './start-positions';
import type { StartChoices, StartPositions } from './start-positions';

export type { Stage } from '../loop/shutdown';

/** The parts the coordinator works with. */
export interface RebalanceParts {
  readonly settings: ConsumerSettings;
  readonly logger: Logger;
  readonly client: ConsumerClient;
  readonly calls: AssignCalls;
  readonly lifecycle: PartitionLifecycle;
  /** Which stream owns each partition (read here; the lifecycle writes it). */
  readonly assignments: Assignments;
  readonly startPositions: StartPositions;
  readonly commits: OffsetCommits;
  readonly conditions: Conditions;
  readonly shutdown: Shutdown;
  /** `group.instance.id` when this consumer is a static member. */
  readonly staticInstanceId: string | undefined;
  /** Told which topics were assigned (they exist and are readable). */
  readonly topics: { topicsAvailable(topics: Iterable<string>): void };
  /** The user's `onRevoke` (see revoke-hook.ts). */
  readonly revokeHook: RevokeHook;
}

interface PendingAssign {
  generation: number;
  readonly partitions: TopicPartition[];
  applied: boolean;
  readonly lookup: StartLookup;
}

export class RebalanceCoordinator {
  /** An assignment whose start offsets are being looked up (librdkafka waits for its assign call). */
  private pendingAssign: PendingAssign | undefined;
  private readonly tasks = new Set<Promise<void>>();
  /** Revokes being drained and committed (close waits for them before leaving the group). */
  private revokes = 0;
  /** Partitions whose revoke is in flight. */
  private readonly revoking = new Set<string>();
  /** Why librdkafka says this member was dropped from the group, until the next rebalance. */
  private suspectLost: string | undefined;
  private readonly revokeParts: RevokeParts;

  constructor(private readonly parts: RebalanceParts) {
    const { settings, logger, commits, lifecycle, conditions, shutdown, revokeHook } = parts;
    this.revokeParts = {
      settings,
      logger,
      commits,
      lifecycle,
      conditions,
      shutdown,
      hook: revokeHook,
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

  /** librdkafka's rebalance callback. */
  onRebalance(err: LibrdKafkaError | undefined, assignment: Assignment[]): void {
    try {
      const code = err?.code;
      if (code === Code.ASSIGN_PARTITIONS) this.onAssign(assignment);
      else if (code === Code.REVOKE_PARTITIONS) this.onRevoke(assignment);
      else {
        this.parts.logger.warn(
          { err },
          'rebalance error; releasing the assignment (the group rebalances again; work since the last commit may be redone)',
        );
        // Released like a loss: handlers aborted, nothing committed (another member may get
        // them at once), an open transaction with their work aborted.
        const partitions = list(assignment);
        const controls = this.parts.assignments.of(partitions);
        const reason = `rebalance error: ${err?.message ?? String(code)}`;
        // An assignment still waiting for its start offsets is not overtaken by this release.
        const generation = this.nextGenerationKeepingPending();
        this.parts.lifecycle.releaseOnError(controls, partitions, reason, generation);
      }
    } catch (error) {
      this.parts.logger.error({ err: error }, 'rebalance handling failed');
      this.parts.shutdown.fail(error instanceof Error ? error : new Error(errorMessage(error)));
    }
  }

  private onAssign(assignment: Assignment[]): void {
    const { startPositions, logger, calls, shutdown } = this.parts;
    const generation = calls.nextGeneration();
    // A revoke would have consumed it; an assignment means we are a member again.
    this.suspectLost = undefined;
    const partitions = list(assignment);
    if (partitions.length === 0 || shutdown.stage === 'disconnecting' || !startPositions.needed) {
      const disconnecting = shutdown.stage === 'disconnecting';
      const answered = disconnecting ? startPositions.withoutStarts(partitions) : partitions;
      this.applyAssign(generation, answered, NO_START_CHOICES);
      return;
    }
    // librdkafka waits for the assign call: look up start offsets first and put them in it.
    let hookFailure: Error | undefined;
    const lookup = new StartLookup();
    const pending: PendingAssign = { generation, partitions, applied: false, lookup };
    this.pendingAssign = pending;
    const task = startPositions
      .resolve(partitions, generation, lookup)
      .catch((err: unknown) => {
        // Cancelled: answered without its offsets already (a revoke or the close).
        if (lookup.cancelled) return NO_START_CHOICES;
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
          const answered = hookFailure ? startPositions.withoutStarts(partitions) : partitions;
          this.applyAssign(pending.generation, answered, choices);
        }
        // A hook that failed ends the consumer even when the assignment was answered early.
        if (hookFailure) {
          logger.error({ err: hookFailure }, 'start positions not resolved: closing');
          shutdown.fail(hookFailure);
        }
      })
      .catch((err: unknown) =>
        shutdown.fail(err instanceof Error ? err : new Error(errorMessage(err))),
      )
      .finally(() => {
        this.tasks.delete(task);
        this.parts.conditions.changed();
      });
    this.tasks.add(task);
  }

  /**
   * Before the binding disconnects: a new generation, so that a revoke the close deadline left
   * behind never unassigns an eager assignment the close releases itself (docs/binding-behaviours.md,
   * "An assignment during the close"). An assignment waiting for its offsets moves into it.
   */
  beforeDisconnect(): void {
    this.nextGenerationKeepingPending();
  }

  /** A new generation; an assignment waiting for its start offsets moves into it (not skipped). */
  private nextGenerationKeepingPending(): number {
    const generation = this.parts.calls.nextGeneration();
    if (this.pendingAssign && !this.pendingAssign.applied)
      this.pendingAssign.generation = generation;
    return generation;
  }

  /**
   * Answers an assignment still waiting for its start offsets, without them (a revoke or a close
   * must never find librdkafka waiting for an assign call): its partitions are revoked at once.
   */
  answerPending(why: string): void {
    const pending = this.pendingAssign;
    if (!pending || pending.applied) return;
    pending.applied = true;
    this.pendingAssign = undefined;
    const { startPositions } = this.parts;
    const stable = startPositions.stableStarts;
    if (stable) pending.lookup.cancel();
    this.parts.logger.info(
      { generation: pending.generation, partitions: pending.partitions, why, assigned: !stable },
      'answering an assignment before its start offsets were resolved',
    );
    const answered = startPositions.withoutStarts(pending.partitions);
    this.applyAssign(pending.generation, answered, NO_START_CHOICES);
  }

  private applyAssign(
    generation: number,
    partitions: TopicPartition[],
    choices: StartChoices,
  ): void {
    const { calls, lifecycle, logger, settings, shutdown } = this.parts;
    if (generation !== calls.generation) {
      // A newer rebalance arrived while the start offsets were looked up: librdkafka no longer
      // waits for this assign; applying it now would assign partitions that are not ours.
      logger.info(
        { generation, current: calls.generation, partitions },
        'skipped an assignment overtaken by a newer rebalance',
      );
      return;
    }
    const protocol = calls.protocol();
    const withOffsets = partitions.map((tp) => {
      const start = choices.starts.get(tpKey(tp.topic, tp.partition));
      return start === undefined ? { ...tp } : { ...tp, offset: start };
    });
    try {
      calls.assign(withOffsets, protocol);
    } catch (err) {
      if (
        this.parts.client.disconnectStarted &&
        protocolForClose(calls, this.parts.settings) === 'EAGER'
      ) {
        // An eager assignment delivered while the binding disconnects: node-rdkafka refuses the
        // call, and librdkafka's close ends without an answer (its unsubscribe releases the
        // assignment). No unassign either: it would race with the end of that close, and the
        // binding can then block the main thread forever (docs/binding-behaviours.md, "An
        // assignment during the close"). Nothing of it was started here, so nothing is lost.
        logger.info(
          { err, partitions, generation },
          'eager assignment refused while disconnecting: left to the close, which releases it',
        );
        return;
      }
      if (shutdown.stage !== 'open') {
        // Refused while leaving or disconnecting: answer it with an unassign (allowed while
        // closing). Under cooperative rebalancing (and KIP-848) librdkafka's close waits for this
        // answer (or for a revoke's that follows), so it cannot race with the close's end.
        logger.info({ err, partitions, generation }, 'assign refused while closing; unassigning');
        calls.unassign(partitions, protocol, generation);
        return;
      }
      throw toKafkaError(err, 'assign failed');
    }
    this.parts.topics.topicsAvailable(partitions.map((p) => p.topic));
    const controls = lifecycle.assign(generation, protocol, partitions, choices);
    if (shutdown.stage !== 'open') {
      // Assigned while leaving: end the streams right away; the revoke that follows releases them.
      lifecycle.stopIntake(controls);
      // A static classic member stays subscribed while closing: no revoke follows, so release
      // them now.
      if (this.parts.staticInstanceId !== undefined && settings.groupProtocol === 'classic') {
        this.onRevoke(partitions);
      }
    }
    lifecycle.hand(controls);
  }

  /**
   * Revokes partitions through the revoke protocol (revoke-protocol.ts), whose outcome the
   * partition lifecycle applies. Also how a closing static member releases its partitions without
   * leaving the group.
   */
  onRevoke(assignment: Assignment[]): void {
    const { client, settings, assignments, logger, calls, lifecycle, shutdown } = this.parts;
    const stage = shutdown.stage;
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
    // An assignment still waiting for its start offsets and not covered by this revoke is not
    // overtaken by it (a cooperative revoke of other partitions): it is applied in the new
    // generation once its start offsets are known.
    const generation = this.nextGenerationKeepingPending();
    const protocol = calls.protocol();
    const controls = assignments.of(partitions);

    if (stage === 'disconnecting') {
      lifecycle.releaseDisconnected(controls, all, protocol, generation);
      return;
    }
    if (controls.length === 0 && partitions.length > 0) {
      // No stream of ours for any of them (a rebalance error released them already): nothing to
      // drain, commit or announce.
      logger.info({ partitions, generation }, 'revoke of partitions without a stream: unassigning');
      calls.unassign(partitions, protocol, generation);
      return;
    }
    const announcedLost = this.suspectLost;
    this.suspectLost = undefined;
    // Counted before the protocol emits anything: a close() called from a `revoking` subscriber
    // must already see this revoke in flight (and wait for it before leaving the group).
    this.revokes += 1;
    for (const tp of partitions) this.revoking.add(tpKey(tp.topic, tp.partition));
    const ctx: RevokeContext = {
      partitions,
      controls,
      protocol,
      generation,
      startedAt: Date.now(),
      // A static member closing keeps its assignment at the broker (no LeaveGroup under classic;
      // under KIP-848 a leave with epoch -2): nobody else gets these partitions before its
      // session times out.
      handedOver: !(stage === 'closing' && this.parts.staticInstanceId !== undefined),
      groupInstanceId: this.parts.staticInstanceId,
      announcedLost,
      lostProbe,
    };
    lifecycle.revokeStarted(controls);
    // Lost on arrival is applied at once, inside librdkafka's callback, as a loss must be; a
    // failure in it goes the way of any revoke's (the consumer fails, the revoke is counted out).
    const arrival = lostOnArrival(ctx);
    let outcome: Promise<void>;
    if (arrival === undefined) {
      outcome = revoke(ctx, this.revokeParts).then((o) => lifecycle.conclude(ctx, o));
    } else {
      try {
        lifecycle.conclude(ctx, arrival);
        outcome = Promise.resolve();
      } catch (err) {
        outcome = Promise.reject(err);
      }
    }
    const task = outcome
      .catch((err: unknown) => {
        logger.error({ err, generation }, 'revoke failed');
        shutdown.fail(err instanceof Error ? err : new Error(errorMessage(err)));
      })
      .finally(() => {
        this.revokes -= 1;
        for (const tp of partitions) this.revoking.delete(tpKey(tp.topic, tp.partition));
        lifecycle.revokeEnded(controls);
        this.tasks.delete(task);
        this.parts.conditions.changed();
      });
    this.tasks.add(task);
  }
}
