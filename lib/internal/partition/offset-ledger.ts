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
 * Cost: `deliver` is O(1); `complete` is O(1) for the oldest unfinished offset and for any offset
 * of a run of consecutive offsets (the common case), O(log window) otherwise (a binary search of
 * the delivered offsets, which are increasing). No per-offset map: the window is two arrays, reset
 * when everything delivered is finished and compacted when the head passes half their length.
 */
export class OffsetLedger {
  /** Delivered offsets, increasing, in `[0, size)`; those before `head` are finished. */
  private offsets: number[] = [];
  /** Whether `offsets[i]` is finished. */
  private done: boolean[] = [];
  private head = 0;
  /** Used length of `offsets` and `done` (slots past it are reused, not truncated). */
  private size = 0;
  private unfinishedCount = 0;
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
    const i = this.size;
    if (i === this.offsets.length) {
      this.offsets.push(offset);
      this.done.push(false);
    } else {
      this.offsets[i] = offset;
      this.done[i] = false;
    }
    this.size = i + 1;
    this.unfinishedCount += 1;
  }

  /**
   * Marks a delivered offset finished. Returns false (and changes nothing) for an offset that was
   * never delivered or already finished.
   */
  complete(offset: number): boolean {
    const i = this.indexOf(offset);
    if (i < 0 || this.done[i] === true) return false;
    this.done[i] = true;
    this.unfinishedCount -= 1;
    if (i === this.head) {
      const offsets = this.offsets;
      const done = this.done;
      let head = this.head + 1;
      const size = this.size;
      while (head < size && done[head] === true) head += 1;
      this.finishedThrough = offsets[head - 1];
      if (head === size) {
        // Everything delivered is finished: start the window afresh.
        this.head = 0;
        this.size = 0;
      } else {
        this.head = head;
        if (head > 1024 && head * 2 > size) this.compact();
      }
    }
    return true;
  }

  /** The index of a delivered, not yet passed offset in `offsets`, or -1. */
  private indexOf(offset: number): number {
    const offsets = this.offsets;
    const head = this.head;
    const n = this.size;
    if (head >= n) return -1;
    const first = offsets[head] as number;
    if (offset < first || offset > this.lastDelivered) return -1;
    // A run of consecutive offsets (no gaps since the head): found directly.
    const direct = head + (offset - first);
    if (direct < n && offsets[direct] === offset) return direct;
    let lo = head;
    let hi = n - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const value = offsets[mid] as number;
      if (value === offset) return mid;
      if (value < offset) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** The next offset to commit (one past the contiguous finished prefix), or undefined if unknown. */
  committable(): number | undefined {
    if (this.head < this.size) {
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
    return this.unfinishedCount === 0;
  }

  /** Number of delivered, unfinished offsets. */
  get unfinished(): number {
    return this.unfinishedCount;
  }

  /** Delivered offsets from the first unfinished one on: what the ledger holds in memory. */
  get window(): number {
    return this.size - this.head;
  }

  /** The last delivered offset, or -1. */
  get lastDeliveredOffset(): number {
    return this.lastDelivered;
  }

  /**
   * The next offset the client hands over, as far as the ledger knows: one past the last delivered
   * offset (or the client's recorded position, if beyond), else the start; undefined if unknown.
   */
  get nextToRead(): number | undefined {
    const past = this.lastDelivered >= 0 ? this.lastDelivered + 1 : this.start;
    if (this.position !== undefined && (past === undefined || this.position > past)) {
      return this.position;
    }
    return past;
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
    for (let i = this.head; i < this.size && out.length < max; i++) {
      if (this.done[i]) out.push(this.offsets[i] as number);
    }
    return out;
  }

  /** Sets the start position (used when it becomes known after assignment). */
  setStart(start: number): void {
    if (this.start === undefined) this.start = start;
  }

  private compact(): void {
    this.offsets = this.offsets.slice(this.head, this.size);
    this.done = this.done.slice(this.head, this.size);
    this.size -= this.head;
    this.head = 0;
  }
}
