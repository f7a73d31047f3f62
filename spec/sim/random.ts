/** A seeded PRNG (mulberry32) with the helpers a simulation draws its choices from. */
export class Random {
  private a: number;

  constructor(seed: number) {
    this.a = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.a = (this.a + 0x6d2b79f5) >>> 0;
    let t = this.a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** A random subset (each item kept with probability `p`), never empty when `items` is not. */
  subset<T>(items: readonly T[], p = 0.5): T[] {
    if (items.length === 0) return [];
    const out = items.filter(() => this.chance(p));
    return out.length > 0 ? out : [this.pick(items)];
  }

  /** Picks among weighted options; options with weight 0 are never picked. */
  weighted<T>(options: readonly (readonly [T, number])[]): T | undefined {
    const total = options.reduce((s, [, w]) => s + w, 0);
    if (total <= 0) return undefined;
    let r = this.next() * total;
    for (const [v, w] of options) {
      if (r < w) return v;
      r -= w;
    }
    return options[options.length - 1]?.[0];
  }

  /** A new generator seeded from this one (independent streams for the library's jitter). */
  fork(): Random {
    return new Random(Math.floor(this.next() * 2 ** 32));
  }
}
