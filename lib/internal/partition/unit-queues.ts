/**
 * The queues of a {@link PartitionRunner}: FIFO (ordering 'partition' and 'none', batches) and
 * keyed (ordering 'key': one unit per key at a time, ready keys in the order they became ready).
 */

/** Ordering by key: the key of a unit and its position (offset) in the partition. */
export interface KeyOrdering<U> {
  keyOf(unit: U): unknown;
  positionOf(unit: U): number;
}

export interface UnitQueue<U> {
  /** Units waiting (not started). */
  readonly waiting: number;
  /** Units that could start now (the heads of ready keys, for keyed ordering). */
  readonly ready: number;
  push(unit: U): void;
  /** The next unit to start; only called while `ready > 0`. */
  take(): U;
  finished(unit: U): void;
  /** Drops waiting units at or after `position` (every unit: `-Infinity`). */
  cut(position: number): void;
}

export class FifoQueue<U> implements UnitQueue<U> {
  /** Waiting units in `[head, tail)`; slots are reused once the queue empties. */
  private items: (U | undefined)[] = [];
  private head = 0;
  private tail = 0;

  get waiting(): number {
    return this.tail - this.head;
  }

  get ready(): number {
    return this.tail - this.head;
  }

  push(unit: U): void {
    if (this.tail === this.items.length) this.items.push(unit);
    else this.items[this.tail] = unit;
    this.tail += 1;
  }

  take(): U {
    const unit = this.items[this.head] as U;
    this.items[this.head] = undefined;
    this.head += 1;
    if (this.head === this.tail) {
      this.head = 0;
      this.tail = 0;
    } else if (this.head > 1024 && this.head * 2 > this.tail) {
      this.items = this.items.slice(this.head, this.tail);
      this.tail -= this.head;
      this.head = 0;
    }
    return unit;
  }

  finished(): void {
    // nothing to do: FIFO order does not depend on completions
  }

  cut(): void {
    // Units are in position order and every waiting one comes after every started one.
    this.items = [];
    this.head = 0;
    this.tail = 0;
  }
}

interface KeyEntry<U> {
  queue: U[];
  head: number;
  running: boolean;
}

export class KeyedQueue<U> implements UnitQueue<U> {
  /** Per key: its waiting units (from `head` on) and whether one of them is running. */
  private readonly keys = new Map<unknown, KeyEntry<U>>();
  /** Keys with a waiting unit and nothing running, in the order they became ready. */
  private readyKeys: unknown[] = [];
  private readyHead = 0;
  private waiting_ = 0;

  constructor(private readonly ordering: KeyOrdering<U>) {}

  get waiting(): number {
    return this.waiting_;
  }

  get ready(): number {
    return this.readyKeys.length - this.readyHead;
  }

  push(unit: U): void {
    const key = this.ordering.keyOf(unit);
    let entry = this.keys.get(key);
    if (entry === undefined) {
      entry = { queue: [], head: 0, running: false };
      this.keys.set(key, entry);
    }
    entry.queue.push(unit);
    this.waiting_ += 1;
    if (!entry.running && entry.queue.length - entry.head === 1) this.readyKeys.push(key);
  }

  take(): U {
    const key = this.readyKeys[this.readyHead];
    this.readyHead += 1;
    if (this.readyHead > 1024 && this.readyHead * 2 > this.readyKeys.length) {
      this.readyKeys = this.readyKeys.slice(this.readyHead);
      this.readyHead = 0;
    }
    const entry = this.keys.get(key) as KeyEntry<U>;
    const unit = entry.queue[entry.head] as U;
    entry.queue[entry.head] = undefined as U;
    entry.head += 1;
    if (entry.head > 64 && entry.head * 2 > entry.queue.length) {
      entry.queue = entry.queue.slice(entry.head);
      entry.head = 0;
    }
    entry.running = true;
    this.waiting_ -= 1;
    return unit;
  }

  finished(unit: U): void {
    const key = this.ordering.keyOf(unit);
    const entry = this.keys.get(key);
    if (entry === undefined) return;
    entry.running = false;
    if (entry.head < entry.queue.length) this.readyKeys.push(key);
    else this.keys.delete(key);
  }

  cut(position: number): void {
    this.waiting_ = 0;
    const ready: unknown[] = [];
    for (const [k, e] of this.keys) {
      const kept = e.queue.slice(e.head).filter((u) => this.ordering.positionOf(u) < position);
      e.queue = kept;
      e.head = 0;
      this.waiting_ += kept.length;
      if (kept.length === 0 && !e.running) this.keys.delete(k);
      else if (kept.length > 0 && !e.running) ready.push(k);
    }
    // Ready keys keep the order they became ready in (every key ready now was ready before).
    const keep = new Set(ready);
    this.readyKeys = this.readyKeys.slice(this.readyHead).filter((k) => keep.has(k));
    this.readyHead = 0;
  }
}
