/** The timers of a {@link VirtualClock}: a binary min-heap on (time, scheduling order). */

export type Callback = (...args: unknown[]) => void;

export interface Timer {
  readonly id: number;
  at: number;
  seq: number;
  readonly fn: Callback;
  readonly args: unknown[];
  /** What it was scheduled with: a refresh re-arms it this far from now. */
  readonly delay: number;
  readonly interval: number | undefined;
  cancelled: boolean;
  /** Shared by a timer's re-armed copies: cleared, a refresh no longer re-arms it. */
  readonly state: { cleared: boolean };
}

export class TimerHeap {
  private heap: Timer[] = [];

  /** The earliest timer not cancelled, without taking it. */
  peek(): Timer | undefined {
    while (this.heap.length > 0 && (this.heap[0] as Timer).cancelled) this.pop();
    return this.heap[0];
  }

  /** Takes the earliest timer not cancelled. */
  take(): Timer | undefined {
    return this.peek() === undefined ? undefined : this.pop();
  }

  clear(): void {
    this.heap = [];
  }

  push(t: Timer): void {
    const h = this.heap;
    h.push(t);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(h[i] as Timer, h[parent] as Timer)) break;
      [h[i], h[parent]] = [h[parent] as Timer, h[i] as Timer];
      i = parent;
    }
  }

  private pop(): Timer | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0] as Timer;
    const last = h.pop() as Timer;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && less(h[l] as Timer, h[m] as Timer)) m = l;
        if (r < h.length && less(h[r] as Timer, h[m] as Timer)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m] as Timer, h[i] as Timer];
        i = m;
      }
    }
    return top;
  }
}

function less(a: Timer, b: Timer): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
