import { seededRandom } from '../helpers/random';

/** The base seed: TEST_SEED, else a fixed default. */
export const BASE_SEED = Number(process.env.TEST_SEED ?? 20261130);

/**
 * The seeds a multi-seed variant runs with: TEST_SEEDS (comma-separated) if set, else the base seed
 * followed by `count - 1` seeds derived from it. Every run prints its seed first, so a failure names
 * it (re-run one with TEST_SEEDS=<seed>).
 */
export function chaosSeeds(count: number): number[] {
  const listed = process.env.TEST_SEEDS;
  if (listed) {
    const seeds = listed.split(',').map((s) => Number(s.trim()));
    if (seeds.some((s) => !Number.isSafeInteger(s)))
      throw new Error(`TEST_SEEDS must be comma-separated integers, got ${listed}`);
    return seeds;
  }
  const next = seededRandom(BASE_SEED);
  return [BASE_SEED, ...Array.from({ length: count - 1 }, () => Math.floor(next() * 1e8))];
}
