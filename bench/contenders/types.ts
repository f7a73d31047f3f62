import type { Meter } from '../meter';

/** What a throughput contender gets: a fresh group on a pre-filled topic, and a meter to feed. */
export interface ContenderContext {
  brokers: string;
  topic: string;
  groupId: string;
  meter: Meter;
}

/** Starts consuming; resolves to a function that stops the consumer once the meter is done. */
export type Contender = (ctx: ContenderContext) => Promise<() => Promise<void>>;
