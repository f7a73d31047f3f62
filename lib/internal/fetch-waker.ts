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
 * small requests per rebalance, none on the per-message path. node-rdkafka runs each of these
 * requests on a libuv pool thread until it is answered, as it runs `consume(n)` (pitfall 13), so
 * the waker sends one request at a time, with a short timeout, and coalesces what is asked
 * meanwhile: a full wake asked while one is pending runs once, a leader already queued is queued
 * once. Failures only cost the wake (librdkafka's own timer fetches within a second).
 *
 * The same sleep follows the library's own resumes (a buffer drained below its threshold, the
 * application's `resume()`) when every partition the resumed one's leader serves was paused: a slow
 * consumer whose partitions all filled their buffers then fetched again up to a second late after
 * each resume (measured: 40% fewer messages processed with `maxBufferedMessages: 200`). For those,
 * one ListOffsets goes to the partition's leader (known from the last metadata) — only when no
 * other partition that leader serves is being fetched (its thread is awake then).
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
  /** Upper bound of one request's wait, in ms (it holds a libuv pool thread meanwhile). */
  readonly timeoutMs: number;
}

interface PartitionMetadata {
  id: number;
  leader?: number;
}

const keyOf = (tp: TopicPartition): string => `${tp.topic}\u0000${tp.partition}`;

/** Upper bound of a wake request's wait, in ms: it holds a libuv pool thread meanwhile. */
export const FETCH_WAKE_TIMEOUT_MS = 2000;

/** At most this many topics' metadata is asked per full wake (one request each). */
const MAX_TOPICS = 16;

export class FetchWaker {
  /** Full wakes (metadata, then every leader of the held partitions) since the consumer started. */
  wakes = 0;
  /** Single-leader wakes after a resume since the consumer started. */
  resumeWakes = 0;
  /** Each partition's leader broker, from the last metadata asked. */
  private readonly leaders = new Map<string, number>();
  /** A full wake is asked and has not started yet. */
  private fullWake = false;
  /** Leaders to wake, each with the partition to ask about (a later ask replaces it). */
  private readonly queued = new Map<number, TopicPartition>();
  /** A request is in flight (only one at a time). */
  private busy = false;

  constructor(private readonly host: FetchWakerHost) {}

  /** librdkafka resumed the partitions it paused for an incremental rebalance: wake them all. */
  wake(): void {
    this.fullWake = true;
    this.pump();
  }

  /**
   * The library resumed these partitions (its own pause or the application's). Wakes the leader of
   * each one unless another partition it serves is being fetched.
   */
  resumed(partitions: readonly TopicPartition[]): void {
    for (const tp of partitions) {
      const leader = this.leaders.get(keyOf(tp));
      if (leader === undefined) {
        this.fullWake = true; // leaders unknown yet: learn them
      } else if (!this.leaderAwake(leader, tp)) {
        if (!this.queued.has(leader)) this.resumeWakes += 1;
        this.queued.set(leader, tp);
      }
    }
    this.pump();
  }

  /** Whether a partition other than `tp` that `leader` serves is being fetched. */
  private leaderAwake(leader: number, tp: TopicPartition): boolean {
    for (const other of this.host.fetching()) {
      if (other.partition === tp.partition && other.topic === tp.topic) continue;
      if (this.leaders.get(keyOf(other)) === leader) return true;
    }
    return false;
  }

  /** Sends the next request unless one is in flight. */
  private pump(): void {
    if (this.busy) return;
    if (!this.host.canRequest()) {
      this.fullWake = false;
      this.queued.clear();
      return;
    }
    let next: Promise<void>;
    const first = this.queued.entries().next();
    if (!first.done) {
      // Wakes first; a full wake asked meanwhile (to learn leaders again) after them.
      const [leader, tp] = first.value;
      this.queued.delete(leader);
      next = this.listOffsets(tp.topic, tp.partition);
    } else if (this.fullWake) {
      this.fullWake = false;
      const held = this.host.held();
      if (held.length === 0) return;
      this.wakes += 1;
      next = this.learnLeaders(held);
    } else {
      return;
    }
    this.busy = true;
    void next.finally(() => {
      this.busy = false;
      this.pump();
    });
  }

  /**
   * Asks the metadata of the held partitions' topics, one at a time (each request wakes the broker
   * it goes to), then queues one wake per leader of the held partitions.
   */
  private async learnLeaders(held: readonly TopicPartition[]): Promise<void> {
    const topics = [...new Set(held.map((tp) => tp.topic))].slice(0, MAX_TOPICS);
    for (const topic of topics) {
      if (!this.host.canRequest()) return;
      for (const [id, leader] of await this.leadersOf(topic)) {
        this.leaders.set(keyOf({ topic, partition: id }), leader);
      }
    }
    const woken = new Set<number>();
    for (const tp of held) {
      const leader = this.leaders.get(keyOf(tp));
      if (leader === undefined || leader < 0 || woken.has(leader)) continue;
      woken.add(leader);
      this.queued.set(leader, tp);
    }
    this.host.logger.debug(
      { brokers: [...woken], partitions: held.length },
      'waking the broker threads of the partitions librdkafka resumed',
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
