/**
 * The binding's side of a rebalance: the generation each rebalance callback opens, the protocol
 * librdkafka runs, and the (incremental_)assign and unassign calls it waits for
 * (docs/binding-behaviours.md, "Deferred unassign"). An unassign never touches a newer assignment
 * (Backbeat BB-835): once a newer rebalance moved the generation on, eager skips the full
 * unassign, and cooperative unassigns only partitions still assigned and not re-owned by a newer
 * generation. Holds no partition state of its own.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { RebalanceProtocol, TopicPartition } from '../../types';
import type { ConsumerClient } from '../binding/consumer-client';
import type { TopicPartitionOffset } from '../binding/rdkafka';
import { Code, kafkaCodeOf, tpKey } from '../binding/rdkafka';
import type { Assignments } from './assignments';

/** Wakes librdkafka's broker threads after it resumed partitions itself (fetch-waker.ts). */
export interface FetcherWake {
  wake(): void;
}

export class AssignCalls {
  private generation_ = 0;
  private lastKnown: RebalanceProtocol = 'NONE';

  constructor(
    private readonly client: ConsumerClient,
    private readonly assignments: Assignments,
    private readonly logger: Logger,
    private readonly fetchers: FetcherWake,
  ) {}

  /** The generation of the latest rebalance callback. */
  get generation(): number {
    return this.generation_;
  }

  /** A rebalance callback (or a release outside one) opens a new generation. */
  nextGeneration(): number {
    this.generation_ += 1;
    return this.generation_;
  }

  protocol(): RebalanceProtocol {
    try {
      const p = this.client.raw.rebalanceProtocol();
      if (p === 'COOPERATIVE' || p === 'EAGER') {
        this.lastKnown = p;
        return p;
      }
      return 'NONE';
    } catch {
      return 'NONE';
    }
  }

  /**
   * The protocol librdkafka last reported (it reports NONE once its close began, and before the
   * first rebalance).
   */
  get lastKnownProtocol(): RebalanceProtocol {
    return this.lastKnown;
  }

  /** Answers an assignment: librdkafka waits for this call. Throws what the binding throws. */
  assign(partitions: TopicPartitionOffset[] | TopicPartition[], protocol: RebalanceProtocol): void {
    if (protocol === 'COOPERATIVE') {
      this.client.raw.incrementalAssign(partitions);
      // librdkafka resumed the partitions it paused for the rebalance without waking the fetchers.
      this.fetchers.wake();
    } else this.client.raw.assign(partitions);
  }

  /** Under cooperative rebalancing after a newer generation: is the partition still assigned? */
  stillAssigned(tp: TopicPartition): boolean {
    if (this.protocol() !== 'COOPERATIVE') return true;
    try {
      return this.client.raw
        .assignments()
        .some((a) => a.topic === tp.topic && a.partition === tp.partition);
    } catch {
      return true;
    }
  }

  /** Whether librdkafka holds no assignment (or cannot say: disconnected). */
  get empty(): boolean {
    try {
      return this.client.raw.assignments().length === 0;
    } catch {
      return true;
    }
  }

  /**
   * Releases revoked partitions of `generation`, never touching a newer assignment (see the
   * header).
   */
  unassign(
    partitions: TopicPartition[],
    protocolAtRevoke: RebalanceProtocol,
    generation: number,
  ): void {
    const raw = this.client.raw;
    const now = this.protocol();
    const protocol = now === 'NONE' ? protocolAtRevoke : now;
    const stale = generation !== this.generation_;
    const stillAssigned = (tps: TopicPartition[]): TopicPartition[] => {
      const assigned = new Set(raw.assignments().map((a) => tpKey(a.topic, a.partition)));
      return tps.filter((tp) => assigned.has(tpKey(tp.topic, tp.partition)));
    };
    try {
      if (protocol === 'COOPERATIVE') {
        const targets = stale
          ? stillAssigned(partitions).filter((tp) => {
              const owner = this.assignments.get(tpKey(tp.topic, tp.partition));
              return owner === undefined || owner.generation <= generation;
            })
          : partitions;
        if (targets.length > 0) {
          raw.incrementalUnassign(targets);
          this.fetchers.wake();
        }
      } else if (stale) {
        this.logger.info(
          { generation, current: this.generation_ },
          'skipped a stale unassign: a newer assignment arrived meanwhile',
        );
      } else {
        raw.unassign();
      }
    } catch (err) {
      const code = kafkaCodeOf(err);
      if (protocol === 'COOPERATIVE' && code === Code.INVALID_ARG) {
        // Some partitions were no longer assigned: unassign the ones that still are — even none,
        // for a current revoke: librdkafka waits for an answer (its group view may name partitions
        // answered without being assigned: an assignment answered empty under stable starts).
        try {
          const targets = stillAssigned(partitions);
          if (targets.length > 0 || !stale) raw.incrementalUnassign(targets);
          if (targets.length > 0) this.fetchers.wake();
          this.logger.info(
            { partitions, unassigned: targets, generation },
            'unassigned the partitions still assigned',
          );
        } catch (retryErr) {
          this.logger.warn({ err: retryErr, partitions, generation }, 'unassign retry failed');
        }
        return;
      }
      this.logger.warn({ err, code, partitions, generation }, 'unassign failed');
    }
  }
}

/**
 * The protocol an assignment delivered during the close belongs to: the one librdkafka last
 * reported (it says NONE once its close began), else the configured one when it admits only one
 * (a close during the first join); undefined when it cannot be told (then the assignment is
 * answered).
 */
export function protocolForClose(
  calls: AssignCalls,
  settings: Pick<ConsumerSettings, 'groupProtocol' | 'globalConfig'>,
): RebalanceProtocol | undefined {
  const known = calls.lastKnownProtocol;
  if (known !== 'NONE') return known;
  if (settings.groupProtocol === 'consumer') return 'COOPERATIVE';
  const configured = settings.globalConfig['partition.assignment.strategy'];
  const strategies = String(configured ?? 'range,roundrobin')
    .split(',')
    .map((x) => x.trim());
  if (strategies.every((x) => x === 'range' || x === 'roundrobin')) return 'EAGER';
  if (strategies.every((x) => x === 'cooperative-sticky')) return 'COOPERATIVE';
  return undefined;
}
