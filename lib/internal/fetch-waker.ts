/**
 * Wakes librdkafka's broker threads after an incremental rebalance, so that the partitions a
 * member keeps are fetched again at once.
 *
 * While librdkafka hands an incremental (cooperative-sticky, or KIP-848) assign or revoke to the
 * application, it pauses every partition the member holds, and resumes them when the application
 * answers (rdkafka_cgrp.c `rd_kafka_rebalance_op_incr`: "Pausing fetchers … incremental
 * rebalance"; `rd_kafka_cgrp_incremental_assign`/`_unassign`: `rd_kafka_assignment_resume`). The
 * resume changes each partition's state on librdkafka's main thread but does not wake the broker
 * thread that fetches it (rdkafka_partition.c `rd_kafka_toppar_pause_resume`; a fetch start does,
 * a resume does not). A broker thread whose partitions were all paused sleeps until its next I/O
 * or its one-second cap (rdkafka_broker.c `rd_kafka_max_block_ms`), so every partition a member
 * kept stood still for about half a second after each rebalance (measured on one broker: 465–571 ms
 * for every kept partition of a 7-member group, against ~100 ms between two fetches before it).
 *
 * Any request queued to a broker thread wakes it. So, after such an answer, this asks for the
 * topic's metadata (which wakes the broker it goes to, and names each partition's leader) and then
 * one ListOffsets (`queryWatermarkOffsets`) from each leader of the partitions still held: a few
 * small requests per rebalance, none on the per-message path. Wakes are coalesced: one runs at a
 * time, and a request made meanwhile runs once after it with the latest partitions. Failures only
 * cost the wake (librdkafka's own timer fetches within a second).
 *
 * The same sleep follows the library's own resumes (a buffer drained below its threshold, the
 * application's `resume()`) when every partition the resumed one's leader serves was paused: a slow
 * consumer whose partitions all filled their buffers then fetched again up to a second late after
 * each resume (measured: 40% fewer messages processed with `maxBufferedMessages: 200`). For those,
 * one ListOffsets goes to the partition's leader (known from the last metadata) — only when no
 * other partition that leader serves is being fetched (its thread is awake then), one in flight
 * per leader.
 */
import type { Logger } from 'pino';
import type { ConsumerClient } from './consumer-client';
import type { TopicPartition } from '../types';

export interface FetchWakerHost {
  readonly client: ConsumerClient;
  readonly logger: Logger;
  /** Whether requests may still be sent (false once the client disconnects). */
  canRequest(): boolean;
  /** The partitions to wake: those held now. */
  held(): readonly TopicPartition[];
  /** The held partitions librdkafka fetches now (paused neither by the library nor the application). */
  fetching(): Iterable<TopicPartition>;
  /** Upper bound of one request's wait, in ms. */
  readonly timeoutMs: number;
}

interface PartitionMetadata {
  id: number;
  leader?: number;
}

const keyOf = (tp: TopicPartition): string => `${tp.topic}\u0000${tp.partition}`;

/** At most this many topics' metadata is asked per wake (one request each). */
const MAX_TOPICS = 16;

export class FetchWaker {
  private running = false;
  private again = false;
  /** Wakes sent since the consumer started (metrics/tests). */
  wakes = 0;
  /** Single-broker wakes after a resume since the consumer started (metrics/tests). */
  resumeWakes = 0;
  /** Each partition's leader broker, from the last metadata asked. */
  private readonly leaders = new Map<string, number>();
  /** Leaders with a wake in flight, and whether another was asked meanwhile (with its partition). */
  private readonly leaderWakes = new Map<number, TopicPartition | undefined>();

  constructor(private readonly host: FetchWakerHost) {}

  /** librdkafka resumed the partitions it paused for an incremental rebalance. */
  wake(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    const partitions = this.host.held();
    if (partitions.length === 0 || !this.host.canRequest()) return;
    this.running = true;
    this.wakes += 1;
    void this.run(partitions).finally(() => {
      this.running = false;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  /**
   * The library resumed these partitions (its own pause or the application's). Wakes the leader of
   * each one unless another partition it serves is being fetched.
   */
  resumed(partitions: readonly TopicPartition[]): void {
    if (!this.host.canRequest()) return;
    for (const tp of partitions) {
      const leader = this.leaders.get(keyOf(tp));
      if (leader === undefined) {
        this.wake(); // leaders unknown yet: learn them
        return;
      }
      if (this.leaderAwake(leader, tp)) continue;
      if (this.leaderWakes.has(leader)) {
        this.leaderWakes.set(leader, tp); // once more when the one in flight is answered
        continue;
      }
      this.wakeLeader(leader, tp);
    }
  }

  /** Whether a partition other than `tp` that `leader` serves is being fetched. */
  private leaderAwake(leader: number, tp: TopicPartition): boolean {
    for (const other of this.host.fetching()) {
      if (other.partition === tp.partition && other.topic === tp.topic) continue;
      if (this.leaders.get(keyOf(other)) === leader) return true;
    }
    return false;
  }

  private wakeLeader(leader: number, tp: TopicPartition): void {
    this.leaderWakes.set(leader, undefined);
    this.resumeWakes += 1;
    void this.listOffsets(tp.topic, tp.partition).then(() => {
      const again = this.leaderWakes.get(leader);
      this.leaderWakes.delete(leader);
      if (again !== undefined && this.host.canRequest() && !this.leaderAwake(leader, again)) {
        this.wakeLeader(leader, again);
      }
    });
  }

  private async run(partitions: readonly TopicPartition[]): Promise<void> {
    const byTopic = new Map<string, number[]>();
    for (const tp of partitions) {
      const list = byTopic.get(tp.topic);
      if (list) list.push(tp.partition);
      else byTopic.set(tp.topic, [tp.partition]);
    }
    const topics = [...byTopic].slice(0, MAX_TOPICS);
    const leaders = await Promise.all(topics.map(([topic]) => this.leadersOf(topic)));
    topics.forEach(([topic], i) => {
      for (const [id, leader] of leaders[i]!)
        this.leaders.set(keyOf({ topic, partition: id }), leader);
    });
    if (!this.host.canRequest()) return;
    // One partition per leader broker: its ListOffsets wakes that broker's thread.
    const woken = new Set<number>();
    const requests: Promise<void>[] = [];
    topics.forEach(([topic, ids], i) => {
      const leaderOf = leaders[i]!;
      for (const id of ids) {
        const leader = leaderOf.get(id);
        if (leader === undefined || leader < 0 || woken.has(leader)) continue;
        woken.add(leader);
        requests.push(this.listOffsets(topic, id));
      }
    });
    await Promise.all(requests);
    this.host.logger.debug(
      { brokers: [...woken], partitions: partitions.length },
      'woke the broker threads of the partitions librdkafka resumed after the rebalance',
    );
  }

  /** Partition id → leader broker id (empty when the metadata request fails). */
  private leadersOf(topic: string): Promise<Map<number, number>> {
    return new Promise((resolve) => {
      const leaders = new Map<number, number>();
      try {
        this.host.client.raw.getMetadata({ topic, timeout: this.host.timeoutMs }, (err, md) => {
          if (!err && md) {
            for (const t of md.topics) {
              if (t.name !== topic) continue;
              for (const p of t.partitions as PartitionMetadata[]) {
                if (p.leader !== undefined) leaders.set(p.id, p.leader);
              }
            }
          }
          resolve(leaders);
        });
      } catch {
        resolve(leaders); // disconnected meanwhile
      }
    });
  }

  private listOffsets(topic: string, partition: number): Promise<void> {
    return new Promise((resolve) => {
      try {
        this.host.client.raw.queryWatermarkOffsets(topic, partition, this.host.timeoutMs, () =>
          resolve(),
        );
      } catch {
        resolve();
      }
    });
  }
}
