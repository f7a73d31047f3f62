/**
 * The chaos worker's injected behaviour, as pure functions of seeds: which messages fail (and for
 * how many attempts), how long a handler sleeps, and a stable hash to derive both from.
 */

/** FNV-1a over a string's UTF-16 code units, then a mulberry32-style finaliser: a uniform [0, 1). */
export function hashUnit(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 4294967296;
}

/** Which messages fail, and their first how many attempts: deterministic per (seed, key). */
export interface FailurePlan {
  /** Fraction of the keys that fail at first. */
  readonly rate: number;
  /** A failing key fails its first 1..maxAttempts attempts. */
  readonly maxAttempts: number;
}

/** How many first attempts of `key` fail (0 for most keys). */
export function failingAttempts(seed: number, key: string, plan: FailurePlan): number {
  if (hashUnit(`${seed}:fail:${key}`) >= plan.rate) return 0;
  return 1 + Math.floor(hashUnit(`${seed}:attempts:${key}`) * plan.maxAttempts);
}

/** Handler latency profiles. */
export type LatencyProfile = 'default' | 'heavy';

/**
 * A handler's sleep in ms from one uniform draw `r`:
 * - default: 0–5 ms, a 5 % tail of 20–220 ms;
 * - heavy: 0–20 ms, a 2 % tail of 50–300 ms.
 */
export function latencyMs(r: number, profile: LatencyProfile): number {
  if (profile === 'heavy') return r < 0.98 ? (r / 0.98) * 20 : 50 + ((r - 0.98) / 0.02) * 250;
  return r < 0.95 ? r * 5 : 20 + (r - 0.95) * 4000;
}
