/**
 * Where a newly assigned partition starts: the `onAssign` hook's choice, the group's committed
 * offset, or — under `auto.offset.reset=latest` with nothing committed — the end offset looked up
 * now (so that committing that start keeps the next owner from skipping records produced
 * meanwhile); and the completed-offset memories of the previous owner. All of it is resolved
 * before the assign call (librdkafka, and the whole group, waits for it), within a deadline.
 *
 * Under processTransactional() ({@link StartPositions.stableStarts}) every partition's start is
 * looked up here and put in the assign call, never left to librdkafka: its own committed-offset
 * fetch starts a partition at `auto.offset.reset` when the broker answered "unstable offset
 * commit" (a transaction holding offsets of it is still open) and the assignment changed while
 * that fetch was in flight (librdkafka 2.12, rdkafka_assignment.c) — reading around the open
 * transaction, which repeats its inputs when it commits later (docs/binding-behaviours.md,
 * "A pending transaction's offsets"). Here the lookup waits for the transaction to end instead.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { StartPositionError } from '../../errors';
import type { StartPosition, TopicPartition } from '../../types';
import type { CompletedStore } from '../commit/completed-store';
import type { ConsumerClient } from '../binding/consumer-client';
import type { TopicPartitionOffset } from '../binding/rdkafka';
import { errorMessage, tpKey } from '../binding/rdkafka';
import { timerDelay } from '../loop/timers';

/** The start offsets and previous owner's memories of an assignment, by partition key. */
export interface StartChoices {
  readonly starts: Map<string, number>;
  readonly memories: Map<string, readonly number[]>;
}

export const NO_START_CHOICES: StartChoices = { starts: new Map(), memories: new Map() };

/** One assignment's lookups: cancelled when the assignment is answered without them. */
export class StartLookup {
  /** No more reads: the resolve ended, or the lookup was cancelled. */
  over = false;
  cancelled = false;
  deadline = Infinity;
  /** The last failed read's error (named by the failure at the deadline). */
  lastError: unknown;
  private stop!: (err: Error) => void;
  /** Rejects when cancelled. */
  readonly stopped = new Promise<never>((_, reject) => (this.stop = reject));

  constructor() {
    this.stopped.catch(() => undefined);
  }

  /** No more reads; the resolve ends at once (its result is not used). */
  cancel(): void {
    this.over = true;
    this.cancelled = true;
    this.stop(new Error('start offset lookup cancelled: the assignment was answered without it'));
  }
}

export class StartPositions {
  constructor(
    private readonly client: ConsumerClient,
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    private readonly store: CompletedStore | undefined,
  ) {}

  /**
   * Every start is looked up before the assign call and put in it, the group's committed offset
   * read stable (waiting for an open transaction that holds offsets of the partition): set when
   * offsets go through transactions, before the consumer starts.
   */
  stableStarts = false;

  /**
   * The partitions an assignment answered without its start offsets may assign: all of them, or
   * none under stable starts (librdkafka's own committed-offset fetch may read around an open
   * transaction).
   */
  withoutStarts(partitions: TopicPartition[]): TopicPartition[] {
    return this.stableStarts ? [] : partitions;
  }

  /** Whether an assignment needs any lookup before its assign call. */
  get needed(): boolean {
    return (
      this.stableStarts ||
      this.settings.onAssign !== undefined ||
      this.resetsToLatest() ||
      this.store !== undefined
    );
  }

  /**
   * How long an assignment's lookups may take. A stable read waits for another member's open
   * transaction (ended by its commit, its abort, or the broker at its `transaction.timeout.ms`),
   * so it may take up to the rebalance deadline: librdkafka waits for the assign call meanwhile,
   * and the consume loop keeps the member alive.
   */
  private get limitMs(): number {
    const { drainTimeoutMs, commitTimeoutMs, maxPollIntervalMs } = this.settings;
    return this.stableStarts ? maxPollIntervalMs : Math.min(drainTimeoutMs, 2 * commitTimeoutMs);
  }

  /**
   * {@link startOffsets} within a deadline (librdkafka — and the whole group — waits for the assign
   * call meanwhile). With an `onAssign` hook, any failure to honour its choices (a lookup that
   * failed or timed out) is a {@link StartPositionError}: silently starting elsewhere could skip or
   * repeat what the application asked for.
   */
  async resolve(
    partitions: TopicPartition[],
    generation: number,
    lookup: StartLookup = new StartLookup(),
  ): Promise<StartChoices> {
    const limitMs = this.limitMs;
    let timer: NodeJS.Timeout | undefined;
    const hooked = this.settings.onAssign !== undefined;
    // A stable start is as binding as a hook's choice: starting elsewhere could repeat inputs.
    const strict = hooked || this.stableStarts;
    const first = partitions[0] as TopicPartition;
    lookup.deadline = Date.now() + limitMs;
    try {
      return await Promise.race([
        this.startOffsets(partitions, generation, lookup),
        lookup.stopped,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                strict
                  ? new StartPositionError(
                      hooked
                        ? `Start positions were not resolved within ${limitMs} ms (onAssign hook and offset lookups)`
                        : `The group's committed offsets were not readable within ${limitMs} ms (max.poll.interval.ms) for ${describe(partitions)}: a transaction holding offsets of them stayed open, or the group coordinator did not answer (last answer: ${lookup.lastError === undefined ? 'none' : errorMessage(lookup.lastError)}); starting anywhere else could repeat or skip inputs`,
                      { topic: first.topic, partition: first.partition },
                      { cause: lookup.lastError },
                    )
                  : new Error(`start offset lookup timed out after ${limitMs} ms`),
              ),
            timerDelay(limitMs),
          );
          timer.unref();
        }),
      ]);
    } catch (err) {
      if (!strict || err instanceof StartPositionError) throw err;
      throw new StartPositionError(
        hooked
          ? `Could not resolve the start positions the onAssign hook asked for: ${errorMessage(err)}`
          : `Could not resolve the start positions of ${describe(partitions)}: ${errorMessage(err)}`,
        { topic: first.topic, partition: first.partition },
        { cause: err },
      );
    } finally {
      lookup.over = true;
      clearTimeout(timer);
    }
  }

  /**
   * The group's committed offsets of `partitions`. In {@link stableStarts} mode a read that timed
   * out — librdkafka retries an "unstable offset commit" answer until the call's timeout — or
   * failed is asked again until it succeeds or the assignment's deadline passed (`lookup.over`).
   * A partition answered with an error is never taken as "nothing committed" (a start at
   * `auto.offset.reset` could skip or repeat records): that read fails.
   */
  private async committedOf(
    partitions: TopicPartition[],
    lookup: StartLookup,
  ): Promise<TopicPartitionOffset[]> {
    const read = async (): Promise<TopicPartitionOffset[]> => {
      // Never past the assignment's deadline, and a stable read in steps of at most a second:
      // a close waits for a read still in flight.
      const stepMs = this.stableStarts ? 1000 : Infinity;
      const timeoutMs = Math.max(
        1,
        Math.min(this.settings.commitTimeoutMs, stepMs, lookup.deadline - Date.now()),
      );
      const answer = await this.client.committed(partitions, timeoutMs);
      const failed = answer.find((x) => (x as unknown) instanceof Error) as Error | undefined;
      if (failed !== undefined) throw failed;
      return answer;
    };
    if (!this.stableStarts) return read();
    for (let attempt = 1; ; attempt++) {
      if (lookup.over || this.client.disconnectStarted) {
        throw lookup.lastError ?? new Error('start offset lookup ended');
      }
      try {
        return await read();
      } catch (err) {
        lookup.lastError = err;
        // Only a timeout (librdkafka's retries of "unstable offset commit" ran out) or a transient
        // failure is worth waiting out; a refusal (authorization) is not.
        if (PERMANENT.test(errorMessage(err))) throw err;
        if (attempt === 1) {
          this.logger.info(
            { err, partitions },
            "waiting to read the group's committed offsets: a transaction holding offsets of these partitions is still open (unstable offset commit), or the coordinator did not answer; the assignment starts once they are known",
          );
        }
        await new Promise((resolve) =>
          setTimeout(resolve, timerDelay(Math.min(250, 50 * attempt))).unref(),
        );
      }
    }
  }

  /**
   * Start offsets to put in the assign call: the `onAssign` hook's choices, and under
   * `auto.offset.reset=latest` (librdkafka's default) the end offset of partitions the group has
   * no committed offset for — so that if this member processes nothing before the partition
   * moves, committing that start keeps the next owner from resetting to a later end and skipping
   * the records in between.
   */
  private async startOffsets(
    partitions: TopicPartition[],
    generation: number,
    lookup: StartLookup,
  ): Promise<StartChoices> {
    const starts = new Map<string, number>();
    const committed = await this.committedOf(partitions, lookup);
    const memories: Map<string, readonly number[]> = this.store
      ? await this.loadMemories(partitions, committed)
      : new Map<string, readonly number[]>();
    const hook = this.settings.onAssign;
    await Promise.all(
      partitions.map(async (tp) => {
        const o = committed.find(
          (x) => x.topic === tp.topic && x.partition === tp.partition,
        )?.offset;
        const hasCommitted = typeof o === 'number' && o >= 0;
        let position: StartPosition | undefined;
        if (hook) {
          try {
            position = await hook({
              topic: tp.topic,
              partition: tp.partition,
              committed: hasCommitted ? o : undefined,
              generation,
            });
          } catch (err) {
            throw new StartPositionError(
              `The onAssign hook failed for ${tp.topic}[${tp.partition}]: ${errorMessage(err)}`,
              { topic: tp.topic, partition: tp.partition },
              { cause: err },
            );
          }
        }
        const key = tpKey(tp.topic, tp.partition);
        if (position === undefined || position === 'committed') {
          if (hasCommitted) {
            // Stable starts: librdkafka must not fetch the committed offset again itself.
            if (this.stableStarts) starts.set(key, o);
            return;
          }
          const reset = this.resetPolicy();
          if (reset === 'latest') position = 'latest';
          else if (reset === 'earliest' && this.stableStarts) position = 'earliest';
          else return;
        }
        let start: number;
        try {
          start = await this.resolvePosition(tp, position);
        } catch (err) {
          // Nothing committed and nothing pending (the stable read said so): librdkafka's own
          // reset reads around nothing, so without a hook a failed end/start lookup is not fatal.
          if (hook || !this.stableStarts) throw err;
          this.logger.warn(
            { err, topic: tp.topic, partition: tp.partition, position },
            'could not look up the reset position of a partition with nothing committed: librdkafka applies auto.offset.reset itself',
          );
          return;
        }
        starts.set(key, start);
        // A memory belongs to a start at the committed offset it was written for: a start chosen
        // elsewhere (a replay from 'earliest', say) runs everything from there.
        if (start !== o) memories.delete(key);
      }),
    );
    return { starts, memories };
  }

  /**
   * Loads the completed-offset memories of partitions being assigned. A memory applies only while
   * the committed offset is the one it was written for; anything else (a failed commit after the
   * write, offsets reset by an operator) is ignored, and the work is redone rather than skipped.
   */
  private async loadMemories(
    partitions: TopicPartition[],
    committed: { topic: string; partition: number; offset?: number }[],
  ): Promise<Map<string, readonly number[]>> {
    const loaded = new Map<string, readonly number[]>();
    if (!this.store) return loaded;
    let memories: Map<string, { base: number; completed: readonly number[] }>;
    try {
      memories = await this.store.load(partitions);
    } catch (err) {
      this.logger.warn(
        { err, partitions },
        'could not read the completed-offset memory: work finished out of order by the previous owner will be redone (duplicates)',
      );
      return loaded;
    }
    for (const tp of partitions) {
      const key = tpKey(tp.topic, tp.partition);
      const memory = memories.get(key);
      const c = committed.find((x) => x.topic === tp.topic && x.partition === tp.partition)?.offset;
      if (!memory || memory.completed.length === 0) continue;
      if (typeof c !== 'number' || c !== memory.base) {
        this.logger.info(
          { topic: tp.topic, partition: tp.partition, memoryBase: memory.base, committed: c },
          'completed-offset memory belongs to another committed offset: ignored',
        );
        continue;
      }
      loaded.set(key, memory.completed);
    }
    return loaded;
  }

  /** The offset a {@link StartPosition} stands for now. */
  async resolvePosition(tp: TopicPartition, position: StartPosition): Promise<number> {
    const timeout = this.settings.commitTimeoutMs;
    if (position === 'earliest' || position === 'latest') {
      const w = await this.client.watermarks(tp.topic, tp.partition, timeout);
      return position === 'earliest' ? w.low : w.high;
    }
    if (position === 'committed') {
      const [c] = await this.client.committed([tp], timeout);
      if (typeof c?.offset === 'number' && c.offset >= 0) return c.offset;
      throw new StartPositionError(`${tp.topic}[${tp.partition}] has no committed offset`, {
        topic: tp.topic,
        partition: tp.partition,
      });
    }
    if (typeof position === 'object' && position !== null) {
      if ('offset' in position && Number.isInteger(position.offset) && position.offset >= 0) {
        return position.offset;
      }
      if ('timestamp' in position && Number.isFinite(position.timestamp)) {
        const offset = await this.client.offsetForTime(tp, position.timestamp, timeout);
        return offset >= 0
          ? offset
          : (await this.client.watermarks(tp.topic, tp.partition, timeout)).high;
      }
    }
    throw new StartPositionError(
      `Expected a start position ('committed', 'earliest', 'latest', { offset } or { timestamp }) for ${tp.topic}[${tp.partition}], got ${JSON.stringify(position)}`,
      { topic: tp.topic, partition: tp.partition },
    );
  }

  resetsToLatest(): boolean {
    return this.resetPolicy() === 'latest';
  }

  /** `auto.offset.reset` (topic config first, then global; librdkafka's default: largest). */
  private resetPolicy(): 'latest' | 'earliest' | 'error' {
    const raw =
      (this.settings.topicConfig as Record<string, unknown>)['auto.offset.reset'] ??
      (this.settings.globalConfig as Record<string, unknown>)['auto.offset.reset'] ??
      'largest';
    if (raw === 'largest' || raw === 'latest' || raw === 'end') return 'latest';
    if (raw === 'smallest' || raw === 'earliest' || raw === 'beginning') return 'earliest';
    return 'error';
  }
}

/** Answers a stable read is not retried on. */
const PERMANENT = /authoriz/i;

const describe = (partitions: readonly TopicPartition[]): string =>
  partitions.map((tp) => `${tp.topic}[${tp.partition}]`).join(', ');
