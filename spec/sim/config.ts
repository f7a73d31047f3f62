/**
 * What one simulation run explores, drawn from its seed. Each run enables its own mix of actions
 * (swarm testing): a run that only revokes and closes lines those two up far more often than a
 * run that does a bit of everything.
 */
import { Random } from './random';

export type SimProtocol = 'eager' | 'cooperative' | 'kip848';

export type ActionKind =
  /** The coordinator revokes or assigns (per protocol). */
  | 'rebalance'
  /** `close()`. */
  | 'close'
  /** Unsubscribing the `process()` subscription. */
  | 'unsubscribe'
  /** `takeUntil(stop$)` on the pipeline. */
  | 'takeUntil'
  /** A new life of a member whose previous one stopped. */
  | 'restart'
  | 'seek'
  | 'pause'
  | 'resume'
  /** A running handler finishes now (out of its planned order). */
  | 'settle'
  /** The broker drops a member (KIP-848 fenced, classic unknown member): not graceful. */
  | 'fence'
  /** Two actions at the same instant, with nothing run in between. */
  | 'combo'
  /**
   * The next action runs from inside the library's call: in the next handler to start, or in a
   * `rebalances$` subscriber at the next rebalance event, whichever comes first.
   */
  | 'reentrant';

export const ACTIONS: readonly ActionKind[] = [
  'rebalance',
  'close',
  'unsubscribe',
  'takeUntil',
  'restart',
  'seek',
  'pause',
  'resume',
  'settle',
  'fence',
  'combo',
  'reentrant',
];

export interface SimConfig {
  readonly seed: number;
  readonly protocol: SimProtocol;
  /** Member slots; each runs one life at a time (a closed member may start again). */
  readonly members: number;
  readonly partitions: number;
  /** Records per partition. */
  readonly messages: readonly number[];
  /** Distinct keys (key = offset mod keys), 0 for no keys at all. */
  readonly keys: number;
  readonly concurrency: number;
  readonly partitionConcurrency: number;
  readonly ordering: 'partition' | 'key' | 'none';
  readonly retryCount: number;
  readonly retryDelayMs: number;
  /** Chance that an attempt fails (only while retries are left: every message succeeds in the end). */
  readonly failureRate: number;
  /** A handler takes 0..handlerMaxMs (virtual). */
  readonly handlerMaxMs: number;
  readonly rememberCompleted: boolean;
  readonly commitIntervalMs: number;
  readonly consumeBatchSize: number;
  readonly maxBufferedMessages: number;
  /** Non-graceful injections allowed: fences, refused commits, commits and handlers past deadlines. */
  readonly chaos: boolean;
  /** Virtual ms of random actions before the calm phase. */
  readonly chaosMs: number;
  /** Mean virtual ms between two actions. */
  readonly actionGapMs: number;
  readonly weights: Readonly<Record<ActionKind, number>>;
  /** Thousands of buffered messages in one partition with a huge partitionConcurrency. */
  readonly big: boolean;
}

/** The library's timings in a run (virtual ms). */
export const TIMINGS = {
  drainTimeoutMs: 5000,
  /** A revoke holds its partitions for a commit librdkafka still holds until shortly before this. */
  maxPollIntervalMs: 7000,
  commitTimeoutMs: 200,
  /** The broker applies a commit answered with an error within this long, or never. */
  lateCommitWindowMs: 600,
  consumeTimeoutMs: 2,
} as const;

/**
 * The configuration of seed `seed`. `weights` overrides action weights after the draw (e.g.
 * `{ close: 0 }` to look for failures that do not need a stop; the other choices stay the seed's).
 */
export function drawConfig(
  seed: number,
  overrides: Partial<Record<ActionKind, number>> = {},
): SimConfig {
  const rnd = new Random(seed);
  const protocol = rnd.pick<SimProtocol>(['eager', 'cooperative', 'kip848']);
  const big = rnd.chance(0.06);
  const partitions = big ? 1 : rnd.int(1, 4);
  const messages = Array.from({ length: partitions }, () =>
    big ? rnd.int(3000, 6000) : rnd.int(0, 40),
  );
  const partitionConcurrency = big ? rnd.int(4000, 10_000) : rnd.pick([1, 1, 2, 3, 4]);
  const ordering =
    partitionConcurrency === 1
      ? rnd.pick<'partition' | 'key'>(['partition', 'partition', 'key'])
      : rnd.pick<'key' | 'none'>(['key', 'none']);
  const retryCount = rnd.pick([0, 1, 2, 3]);
  const chaos = rnd.chance(0.25);
  // Each action's weight comes from its own stream, so adding an action changes no other choice
  // of the configuration (the schedule itself still changes: replay seeds with the same code).
  const weights = {} as Record<ActionKind, number>;
  for (const a of ACTIONS) weights[a] = new Random(seed ^ nameHash(a)).pick([0, 1, 3]);
  weights.rebalance = Math.max(1, weights.rebalance) * 2;
  if (!chaos) weights.fence = 0;
  Object.assign(weights, overrides);
  return {
    seed,
    protocol,
    members: rnd.int(1, 3),
    partitions,
    messages,
    keys: rnd.pick([0, 1, 3, 1000]),
    concurrency: big ? rnd.int(1, 2) : rnd.int(1, 8),
    partitionConcurrency,
    ordering,
    retryCount,
    retryDelayMs: rnd.int(1, 50),
    failureRate: retryCount === 0 ? 0 : rnd.pick([0, 0.1, 0.3]),
    handlerMaxMs: big ? 1 : rnd.pick([0, 2, 10, 40]),
    rememberCompleted: !big && partitionConcurrency > 1 && rnd.chance(0.35),
    commitIntervalMs: rnd.pick([1, 5, 20, 100]),
    consumeBatchSize: big ? 500 : rnd.pick([1, 5, 50, 500]),
    maxBufferedMessages: big ? 100_000 : rnd.pick([2, 10, 1000]),
    chaos,
    chaosMs: rnd.int(100, 1500),
    actionGapMs: rnd.pick([1, 5, 20, 60]),
    weights,
    big,
  };
}

function nameHash(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** One line describing a configuration (printed with the seed). */
export function describeConfig(c: SimConfig): string {
  const on = Object.entries(c.weights)
    .filter(([, w]) => w > 0)
    .map(([a, w]) => `${a}:${w}`)
    .join(' ');
  return (
    `${c.protocol} members=${c.members} messages=[${c.messages.join(',')}] keys=${c.keys} ` +
    `concurrency=${c.concurrency} partitionConcurrency=${c.partitionConcurrency} ordering=${c.ordering} ` +
    `retry=${c.retryCount}x${c.retryDelayMs}ms fail=${c.failureRate} handler≤${c.handlerMaxMs}ms ` +
    `memory=${c.rememberCompleted} commitInterval=${c.commitIntervalMs} batch=${c.consumeBatchSize} ` +
    `buffer=${c.maxBufferedMessages} chaos=${c.chaos} chaosMs=${c.chaosMs} gap=${c.actionGapMs} [${on}]`
  );
}

/** Parses `SIM_WEIGHTS` (`close=0,seek=3`) into weight overrides. */
export function parseWeights(text: string | undefined): Partial<Record<ActionKind, number>> {
  const out: Partial<Record<ActionKind, number>> = {};
  for (const part of (text ?? '').split(',').filter(Boolean)) {
    const [name = '', value = ''] = part.split('=');
    if (!(ACTIONS as readonly string[]).includes(name) || !/^\d+$/.test(value)) {
      throw new Error(
        `SIM_WEIGHTS: expected action=weight (actions: ${ACTIONS.join(', ')}), got ${part}`,
      );
    }
    out[name as ActionKind] = Number(value);
  }
  return out;
}
