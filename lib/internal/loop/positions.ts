/**
 * librdkafka's fetch positions, read between two consume calls: for `positions()` (what the
 * application and the metrics see) and for each ledger, which moves past offsets never delivered
 * (transaction markers, aborted records under read_committed).
 */
import type { ConsumerClient } from '../binding/consumer-client';
import { list, tpKey } from '../binding/rdkafka';
import type { Assignments } from '../rebalance/assignments';
import type { FlowControl } from './flow-control';

/** Longest time between two position lookups while consume calls return full batches. */
const POSITION_INTERVAL_MS = 100;

export class Positions {
  /** The consume call's time after which positions were last asked. */
  private notedAt = 0;

  constructor(
    private readonly client: ConsumerClient,
    private readonly assignments: Assignments,
    private readonly flow: FlowControl,
  ) {}

  /**
   * Fetch positions of the owned partitions (undefined where librdkafka does not know it yet);
   * `connected` false: what the ledgers know.
   */
  owned(connected: boolean): { topic: string; partition: number; offset: number | undefined }[] {
    const owned = this.assignments.controls();
    const tps = list(owned);
    if (tps.length === 0 || !connected) return tps.map((t) => ({ ...t, offset: undefined }));
    let positions: { topic: string; partition: number; offset?: number }[] = [];
    try {
      positions = this.client.raw.position(tps);
    } catch {
      // not connected: fall back to what the ledgers know
    }
    return owned.map((c) => {
      const p = positions.find((x) => x.topic === c.topic && x.partition === c.partition)?.offset;
      // While held-back messages are fetched again, librdkafka's position runs ahead of what the
      // stream was handed; where it knows none (after a seek), the ledger's next offset to read.
      const known = typeof p === 'number' && p >= 0 && !this.flow.rewinding(c);
      return { topic: c.topic, partition: c.partition, offset: known ? p : c.ledger.nextToRead };
    });
  }

  /**
   * Whether {@link note} would ask librdkafka now: the loop then makes its next consume call only
   * after the batch was dispatched and the positions taken (no call in flight meanwhile).
   */
  due(polledAt: number, short: boolean): boolean {
    if (this.assignments.size === 0) return false;
    const sinceNoted = polledAt - this.notedAt; // negative: the wall clock stepped back
    return short || sinceNoted < 0 || sinceNoted >= POSITION_INTERVAL_MS;
  }

  /**
   * Tells each active partition's ledger librdkafka's position, which moves past offsets that are
   * never delivered: transaction markers, and aborted records under read_committed. Only here,
   * between two consume calls, does the position count exactly the messages dispatched (a
   * consume in flight moves it for messages JS has not seen yet).
   *
   * `position()` costs about as much as dispatching a few dozen messages, so it is asked after a
   * consume call that returned fewer messages than asked (`short`: the prefetched messages ran out,
   * which is when a partition can sit at a trailing marker) and otherwise at most every
   * {@link POSITION_INTERVAL_MS}. The committable offset stays correct with any subset of these
   * calls: each position taken here was exact when taken (every offset below it was delivered or
   * never will be), the ledger only ever moves it up and ignores one at or below its last
   * delivered offset, so a skipped call only delays moving past trailing markers — by at most one
   * interval while messages keep coming, by nothing once the partition is caught up. A commit
   * meanwhile (a revoke's final one, say) stops at the marker: the next owner reads nothing there.
   */
  note(polledAt: number, short: boolean): void {
    if (!this.due(polledAt, short)) return;
    // After a seek librdkafka resets the position to invalid until the new position's first
    // record is consumed, so an old, higher position is never taken for the new stream's.
    // A stream whose messages flow control held back: librdkafka's position counts them.
    const active = this.assignments.controls().filter((c) => c.active && !this.flow.rewinding(c));
    if (active.length === 0) return;
    let positions: { topic: string; partition: number; offset?: number }[];
    this.notedAt = polledAt;
    try {
      positions = this.client.raw.position(list(active));
    } catch {
      return;
    }
    for (const p of positions) {
      if (typeof p.offset !== 'number' || p.offset < 0) continue;
      this.assignments.get(tpKey(p.topic, p.partition))?.ledger.advanceTo(p.offset);
    }
  }
}
