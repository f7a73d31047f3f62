/**
 * Commits whose outcome is unknown, per partition. librdkafka answers a commit "timed out" (or a
 * transport or coordinator error) when it gave up waiting, not when the broker refused it: the
 * request, or a copy librdkafka sent again on a new connection, may still be applied — even after
 * a newer commit, moving the group's offset back. A partition with such a doubt must not be
 * handed over before the group's offset has been read back (see commit-verification.ts).
 *
 * Doubts outlive the stream that sent them: a partition lost and assigned back still carries the
 * doubt of its earlier life. A doubt is settled once the window in which the broker can still
 * apply the request has passed and, after it, the group's offset was read back or a newer commit
 * was confirmed.
 */
import { tpKey } from '../binding/rdkafka';

/** One partition's commits of unknown outcome. */
export interface CommitDoubt {
  readonly topic: string;
  readonly partition: number;
  /** The offsets those commits carried. */
  readonly offsets: readonly number[];
  /** When the last of them was given up on (ms since the epoch). */
  readonly since: number;
}

export class CommitDoubts {
  private readonly doubts = new Map<string, CommitDoubt>();

  /**
   * @param windowMs how long after librdkafka gave up on a commit the broker may still apply it
   * (`lateCommitWindowMs`): a request waiting on a connection behind one whose answer waits for
   * the replicas is handled within the broker's `offsets.commit.timeout.ms` of the one before it.
   */
  constructor(readonly windowMs: number) {}

  /** Records commits of these offsets whose outcome is unknown as of `at`. */
  add(offsets: readonly { topic: string; partition: number; offset: number }[], at: number): void {
    for (const o of offsets) {
      const k = tpKey(o.topic, o.partition);
      const before = this.doubts.get(k);
      this.doubts.set(k, {
        topic: o.topic,
        partition: o.partition,
        offsets: [...new Set([...(before?.offsets ?? []), o.offset])],
        since: Math.max(at, before?.since ?? 0),
      });
    }
  }

  /** The partition's doubt, if any. */
  of(topic: string, partition: number): CommitDoubt | undefined {
    return this.doubts.get(tpKey(topic, partition));
  }

  /** Until when the broker may still apply a doubtful commit of the partition (0: none). */
  openUntil(topic: string, partition: number): number {
    const d = this.of(topic, partition);
    return d === undefined ? 0 : d.since + this.windowMs;
  }

  /**
   * The group's offset of the partition was known at `knownAt` (read back, or a commit sent then
   * was confirmed): a doubt whose window had passed by then is settled.
   */
  settle(topic: string, partition: number, knownAt: number): void {
    const k = tpKey(topic, partition);
    const d = this.doubts.get(k);
    if (d !== undefined && d.since + this.windowMs <= knownAt) this.doubts.delete(k);
  }

  get size(): number {
    return this.doubts.size;
  }
}
