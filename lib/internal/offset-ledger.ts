/**
 * The offset ledger of one partition assignment: which delivered offsets are finished, and the
 * highest offset that may be committed. Pure: no I/O, no RxJS, no timers.
 *
 * "Contiguous" is over the offsets actually delivered: compacted topics and transaction markers
 * leave gaps, so the committable offset after finishing offset 7 when the next delivered offset is
 * 10 is 10, not 8. The committable offset never passes a delivered offset that is not finished.
 * Past the last delivered offset, only the client's position (see `advanceTo`) can tell that the
 * offsets up to it hold nothing to deliver (a trailing transaction marker, an aborted transaction).
 *
 * Cost: `deliver` and `complete` are O(1) amortised (completion of the oldest offset advances a
 * head index; the arrays are compacted when the head passes half their length).
 */
export class OffsetLedger {
  private offsets: number[] = [];
  private done: boolean[] = [];
  private head = 0;
  /** Offset → index in `offsets` (minus `base`), for out-of-order completion. */
  private readonly index = new Map<number, number>();
  private base = 0;
  private lastDelivered = -1;
  private finishedThrough: number | undefined;
  /** The client's position past the last delivered offset, if it reported one. */
  private position: number | undefined;

  /**
   * @param start The partition's position when the assignment began (the next offset to read),
   * if known; committable before anything is delivered.
   */
  constructor(private start?: number) {}

  /** Records that `offset` was handed to the pipeline. Offsets must be delivered in increasing order. */
  deliver(offset: number): void {
    if (offset <= this.lastDelivered) {
      throw new RangeError(`offset ${offset} delivered after ${this.lastDelivered}`);
    }
    this.lastDelivered = offset;
    this.index.set(offset, this.offsets.length + this.base);
    this.offsets.push(offset);
    this.done.push(false);
  }

  /**
   * Marks a delivered offset finished. Returns false (and changes nothing) for an offset that was
   * never delivered or already finished.
   */
  complete(offset: number): boolean {
    const at = this.index.get(offset);
    if (at === undefined) return false;
    this.index.delete(offset);
    const i = at - this.base;
    this.done[i] = true;
    while (this.head < this.offsets.length && this.done[this.head]) {
      this.finishedThrough = this.offsets[this.head];
      this.head += 1;
    }
    if (this.head > 1024 && this.head * 2 > this.offsets.length) this.compact();
    return true;
  }

  /** The next offset to commit (one past the contiguous finished prefix), or undefined if unknown. */
  committable(): number | undefined {
    if (this.head < this.offsets.length) {
      // The first unfinished delivered offset: everything below it is finished or never delivered.
      return this.offsets[this.head];
    }
    const next = this.finishedThrough === undefined ? this.start : this.finishedThrough + 1;
    if (this.position !== undefined && (next === undefined || this.position > next)) {
      return this.position;
    }
    return next;
  }

  /**
   * Records the client's position: the next offset it will hand over. Offsets below it that were
   * not delivered never will be in this assignment (transaction markers; aborted records under
   * `read_committed`), so once every delivered offset is finished the position itself is
   * committable: the committed offset reaches the end of a transactional partition. Only call it
   * when every message the client handed over up to `position` was delivered here. A position at
   * or below the last delivered offset, or below an earlier one, changes nothing.
   */
  advanceTo(position: number): void {
    if (position <= this.lastDelivered) return;
    if (this.position === undefined || position > this.position) this.position = position;
  }

  /** True when every delivered offset is finished. */
  get idle(): boolean {
    return this.index.size === 0;
  }

  /** Number of delivered, unfinished offsets. */
  get unfinished(): number {
    return this.index.size;
  }

  /** Delivered offsets from the first unfinished one on: what the ledger holds in memory. */
  get window(): number {
    return this.offsets.length - this.head;
  }

  /** The last delivered offset, or -1. */
  get lastDeliveredOffset(): number {
    return this.lastDelivered;
  }

  /** True once any offset was delivered. */
  get hasDeliveries(): boolean {
    return this.lastDelivered >= 0;
  }

  /**
   * Offsets finished out of order above the committable one (ascending, at most `max`): the work a
   * new owner would redo if it started from the committed offset.
   */
  completedAbove(max: number): number[] {
    const out: number[] = [];
    for (let i = this.head; i < this.offsets.length && out.length < max; i++) {
      if (this.done[i]) out.push(this.offsets[i] as number);
    }
    return out;
  }

  /** Sets the start position (used when it becomes known after assignment). */
  setStart(start: number): void {
    if (this.start === undefined) this.start = start;
  }

  private compact(): void {
    this.offsets = this.offsets.slice(this.head);
    this.done = this.done.slice(this.head);
    this.base += this.head;
    this.head = 0;
  }
}
