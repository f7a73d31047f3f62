/**
 * `seek()`: moves an owned partition to a new position. Its buffered messages are dropped, its
 * in-flight handlers are aborted and no longer count, and a fresh stream (a new ledger starting at
 * the new offset) replaces the old one. A revoke arriving meanwhile drains the new stream.
 *
 * A seek belongs to the assignment it was called for: if the partition is revoked (and perhaps
 * assigned again) before it applies, it fails with {@link NotAssignedError} and changes nothing.
 * The native seek runs only between two consume calls (the loop calls {@link Seeks.apply}), so no
 * rebalance can interleave with it and no stale record can reach the new stream.
 */
import { NotAssignedError } from '../../errors';
import type { StartPosition, TopicPartition } from '../../types';
import type { Assignments } from './assignments';
import type { ConsumerClient } from '../binding/consumer-client';
import type { Shutdown } from '../loop/shutdown';
import type { Conditions } from '../loop/wait-conditions';
import type { PartitionLoggers } from '../observe/partition-loggers';
import type { PartitionLifecycle } from '../partition/lifecycle';
import type { PartitionControl } from '../partition/partition-control';
import { Code, errorMessage, kafkaCodeOf, tpKey } from '../binding/rdkafka';
import type { StartPositions } from './start-positions';

interface PendingSeek {
  readonly key: string;
  /**
   * The stream the seek was called for; it applies to that assignment only (that generation: an
   * earlier seek may have replaced the stream meanwhile, the assignment is the same).
   */
  readonly owner: PartitionControl;
  readonly tp: TopicPartition;
  readonly offset: number;
  readonly position: StartPosition;
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
}

/** The consumer's parts seeks work with. */
export interface SeekParts {
  readonly client: ConsumerClient;
  /** Which stream owns each partition (read here; the lifecycle writes it). */
  readonly assignments: Assignments;
  readonly startPositions: StartPositions;
  /** Replaces a partition's stream with a fresh one. */
  readonly lifecycle: PartitionLifecycle;
  /** Seeks are taken only while the consumer is open (not closing). */
  readonly shutdown: Shutdown;
  readonly conditions: Conditions;
  readonly loggers: PartitionLoggers;
}

const notOwned = (tp: TopicPartition, why: string): NotAssignedError =>
  new NotAssignedError(`Cannot seek ${tp.topic}[${tp.partition}]: ${why}`, {
    topic: tp.topic,
    partition: tp.partition,
  });

export class Seeks {
  private readonly pending: PendingSeek[] = [];
  /** Per partition: settles once the latest seek requested is queued (or failed). */
  private readonly turns = new Map<string, Promise<void>>();

  constructor(private readonly host: SeekParts) {}

  /** Seeks waiting for the loop. */
  get waiting(): boolean {
    return this.pending.length > 0;
  }

  /**
   * Resolves the position, then waits for the loop to apply it; returns the offset. Seeks of one
   * partition are queued in call order: a position lookup (earliest, latest, a timestamp) waits
   * until the seek called before it is queued, so a later plain offset cannot overtake it.
   */
  async request(tp: TopicPartition, position: StartPosition): Promise<number> {
    const { assignments, startPositions } = this.host;
    const key = tpKey(tp.topic, tp.partition);
    const owner = assignments.get(key);
    if (!this.running || owner === undefined || !owner.active) {
      throw notOwned(tp, 'this consumer does not own it right now');
    }
    const previous = this.turns.get(key);
    let queued!: () => void;
    const turn = new Promise<void>((resolve) => (queued = resolve));
    this.turns.set(key, turn);
    try {
      if (previous !== undefined) await previous;
      const offset = await startPositions.resolvePosition(tp, position);
      if (!this.stillOwnedBy(key, owner)) {
        throw notOwned(tp, 'it was revoked while its position was looked up');
      }
      const applied = new Promise<void>((resolve, reject) => {
        this.pending.push({ key, owner, tp, offset, position, resolve, reject });
        this.host.conditions.changed();
      });
      queued(); // the next seek of the partition may go on
      await applied;
      return offset;
    } finally {
      queued();
      if (this.turns.get(key) === turn) this.turns.delete(key);
    }
  }

  /** Applies the seeks requested since the last consume call; only the consume loop calls it. */
  async apply(): Promise<void> {
    const { client, assignments, lifecycle, loggers } = this.host;
    for (const s of this.pending.splice(0)) {
      if (!this.stillOwnedBy(s.key, s.owner)) {
        s.reject(notOwned(s.tp, 'it was revoked before the seek could be applied'));
        continue;
      }
      // The assignment's stream now: an earlier seek of it may have replaced `s.owner`.
      const old = assignments.get(s.key) as PartitionControl;
      try {
        // librdkafka bumps the partition's version barrier and queues the seek before it waits for
        // the reply, so once queued the seek is certain to apply. node-rdkafka raises the timeout
        // to at least 10 ms: a busy broker thread then makes the call answer ERR__TIMED_OUT for a
        // seek that still happens — taken as applied. Other errors are local (partition not
        // assigned): nothing changed, the old stream goes on.
        await client.seek({ topic: s.tp.topic, partition: s.tp.partition, offset: s.offset }, 0);
      } catch (err) {
        if (kafkaCodeOf(err) !== Code.TIMED_OUT) {
          s.reject(err instanceof Error ? err : new Error(errorMessage(err)));
          continue;
        }
        loggers
          .of(old)
          .debug({ offset: s.offset }, 'seek queued, its reply timed out: it applies all the same');
      }
      // A rebalance (node-rdkafka dispatches its callback on its own async handle, consume call or
      // not) or a close may have come while the seek was applied: is the stream still the owner?
      if (assignments.get(s.key) !== old || !old.active) {
        s.reject(
          notOwned(
            s.tp,
            'it was revoked or the consumer closed while the seek was applied; its stream drains from where it was',
          ),
        );
        continue;
      }
      const control = lifecycle.reseek(old, s.offset);
      loggers
        .of(control)
        .info(
          { offset: s.offset, position: s.position },
          'seek: buffered messages dropped, in-flight work aborted, restarting the partition stream',
        );
      lifecycle.hand([control]);
      s.resolve();
    }
    this.host.conditions.changed();
  }

  /** Fails every seek still waiting (the consumer closed). */
  rejectAll(): void {
    for (const s of this.pending.splice(0)) {
      s.reject(notOwned(s.tp, 'the consumer closed before the seek could be applied'));
    }
  }

  /** Whether the assignment `owner` belongs to is still held, and its stream active. */
  private stillOwnedBy(key: string, owner: PartitionControl): boolean {
    const current = this.host.assignments.get(key);
    return (
      current !== undefined &&
      current.generation === owner.generation &&
      current.active &&
      this.running
    );
  }

  private get running(): boolean {
    return this.host.shutdown.stage === 'open';
  }
}
