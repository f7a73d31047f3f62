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
 * requests on a libuv pool thread until it is answered, as it runs `consume(n)` (docs/binding-behaviours.md, "The libuv thread pool"), so
 * the waker sends one request at a time, with a short timeout, and coalesces what is asked
 * meanwhile: a full wake asked while one is pending runs once, a leader already queued is queued
 * once, and a leader is woken at most every {@link MIN_WAKE_INTERVAL_MS}. Leaders are remembered
 * per topic and asked again only after {@link LEARN_INTERVAL_MS} (also after a failed request, and
 * for a partition with no leader), so a broker that is down or a leaderless partition never turns
 * resumes into a stream of metadata requests. Failures only cost the wake (librdkafka's own timer
 * fetches within a second).
 *
 * The same sleep follows the library's own resumes (a buffer drained below its threshold, the
 * application's `resume()`) when every partition the resumed one's leader serves was paused: a slow
 * consumer whose partitions all filled their buffers then fetched again up to a second late after
 * each resume (measured: 40% fewer messages processed with `maxBufferedMessages: 200`). For those,
 * one ListOffsets goes to the partition's leader (known from the last metadata) — only when no
 * partition that leader serves is being fetched (its thread is awake then), other than the ones
 * resumed together.
 */
import type { Logger } from '../../logger';
import type { ConsumerClient } from '../binding/consumer-client';
import type { TopicPartition } from '../../types';

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
/** A topic's leaders are asked again at most this often (ms), whatever the last answer was. */
export const LEARN_INTERVAL_MS = 10_000;
/** One leader is woken at most this often (ms): far below the one-second sleep it cuts short. */
export const MIN_WAKE_INTERVAL_MS = 50;
/** Up to this many topics are asked one by one; more, in one request for every topic. */
const SEPARATE_TOPICS = 4;

interface TopicLeaders {
  /** When they were asked (performance.now()), answered or not. */
  readonly at: number;
  /** Partition id → leader broker id (partitions without a leader are absent). */
  readonly leaders: Map<number, number>;
}

export class FetchWaker {
  /** Full wakes (every leader of the partitions held) since the consumer started. */
  wakes = 0;
  /** Single-leader wakes after a resume since the consumer started. */
  resumeWakes = 0;
  /** Requests sent (metadata and ListOffsets) since the consumer started. */
  requests = 0;
  /** Each held topic's partition leaders, from the last metadata asked for it. */
  private readonly topics = new Map<string, TopicLeaders>();
  /** A full wake is asked and has not started yet. */
  private fullWake = false;
  /** Leaders to wake, each with the partition to ask about (a later ask replaces it). */
  private readonly queued = new Map<number, TopicPartition>();
  /** When each leader was last woken (performance.now()). */
  private readonly wokenAt = new Map<number, number>();
  /** A request is in flight (only one at a time). */
  private busy = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly host: FetchWakerHost,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** librdkafka resumed the partitions it paused for an incremental rebalance: wake them all. */
  wake(): void {
    this.fullWake = true;
    this.pump();
  }

  /**
   * The library resumed these partitions (its own pause or the application's). Wakes the leader of
   * each unless a partition it serves, other than these, is being fetched.
   */
  resumed(partitions: readonly TopicPartition[]): void {
    const batch = new Set(partitions.map(keyOf));
    const asleep = new Map<number, TopicPartition>();
    for (const tp of partitions) {
      const leader = this.leaderOf(tp);
      if (leader === undefined) {
        // Unknown (or no leader): learn it, unless it was asked recently.
        if (this.stale(tp.topic)) this.fullWake = true;
      } else if (!asleep.has(leader)) {
        asleep.set(leader, tp);
      }
    }
    for (const other of this.host.fetching()) {
      if (batch.has(keyOf(other))) continue;
      const leader = this.leaderOf(other);
      if (leader !== undefined) asleep.delete(leader); // its thread is awake: it fetches `other`
    }
    for (const [leader, tp] of asleep) {
      if (!this.queued.has(leader)) this.resumeWakes += 1;
      this.queued.set(leader, tp);
    }
    this.pump();
  }

  private leaderOf(tp: TopicPartition): number | undefined {
    return this.topics.get(tp.topic)?.leaders.get(tp.partition);
  }

  private stale(topic: string): boolean {
    const known = this.topics.get(topic);
    return known === undefined || this.now() - known.at >= LEARN_INTERVAL_MS;
  }

  /** Sends the next request unless one is in flight. */
  private pump(): void {
    if (this.busy) return;
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (!this.host.canRequest()) {
      this.fullWake = false;
      this.queued.clear();
      return;
    }
    let next: Promise<void> | undefined;
    let wait = Number.POSITIVE_INFINITY;
    const now = this.now();
    for (const [leader, tp] of this.queued) {
      const due = (this.wokenAt.get(leader) ?? -Infinity) + MIN_WAKE_INTERVAL_MS - now;
      if (due > 0) {
        wait = Math.min(wait, due);
        continue;
      }
      // Wakes first; a full wake asked meanwhile (to learn leaders again) after them.
      this.queued.delete(leader);
      this.wokenAt.set(leader, now);
      next = this.listOffsets(tp.topic, tp.partition);
      break;
    }
    if (next === undefined && this.fullWake) {
      this.fullWake = false;
      const held = this.host.held();
      if (held.length > 0) {
        this.wakes += 1;
        next = this.wakeAll(held);
      }
    }
    if (next === undefined) {
      if (Number.isFinite(wait)) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, Math.ceil(wait));
        this.timer.unref?.();
      }
      return;
    }
    this.busy = true;
    void next.finally(() => {
      this.busy = false;
      this.pump();
    });
  }

  /**
   * Learns the leaders of the held topics not asked recently (each metadata request also wakes the
   * broker it goes to), forgets topics no longer held, then queues one wake per leader.
   */
  private async wakeAll(held: readonly TopicPartition[]): Promise<void> {
    const heldTopics = new Set(held.map((tp) => tp.topic));
    for (const topic of this.topics.keys()) if (!heldTopics.has(topic)) this.topics.delete(topic);
    const stale = [...heldTopics].filter((t) => this.stale(t));
    if (stale.length > SEPARATE_TOPICS) {
      await this.learn(stale, undefined);
    } else {
      for (const topic of stale) {
        if (!this.host.canRequest()) return;
        await this.learn([topic], topic);
      }
    }
    const woken = new Set<number>();
    for (const tp of held) {
      const leader = this.leaderOf(tp);
      if (leader === undefined || woken.has(leader)) continue;
      woken.add(leader);
      this.queued.set(leader, tp);
    }
    this.host.logger.debug(
      { brokers: [...woken], partitions: held.length },
      'waking the broker threads of the partitions librdkafka resumed',
    );
  }

  /** Asks the leaders of `topics`: of `topic` alone, or (undefined) in one request for all. */
  private learn(topics: readonly string[], topic: string | undefined): Promise<void> {
    const at = this.now();
    for (const t of topics) this.topics.set(t, { at, leaders: new Map() });
    return new Promise((resolve) => {
      try {
        this.requests += 1;
        const options =
          topic === undefined
            ? { timeout: this.host.timeoutMs }
            : { topic, timeout: this.host.timeoutMs };
        this.host.client.raw.getMetadata(options, (err, md) => {
          if (!err && md) {
            for (const t of md.topics) {
              const known = this.topics.get(t.name);
              if (known === undefined || known.at !== at) continue;
              for (const p of t.partitions as PartitionMetadata[]) {
                if (p.leader !== undefined && p.leader >= 0) known.leaders.set(p.id, p.leader);
              }
            }
          }
          resolve();
        });
      } catch {
        resolve(); // disconnected meanwhile
      }
    });
  }

  private listOffsets(topic: string, partition: number): Promise<void> {
    return new Promise((resolve) => {
      try {
        this.requests += 1;
        this.host.client.raw.queryWatermarkOffsets(topic, partition, this.host.timeoutMs, () =>
          resolve(),
        );
      } catch {
        resolve();
      }
    });
  }
}
