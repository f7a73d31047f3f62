/**
 * Where a newly assigned partition starts: the `onAssign` hook's choice, the group's committed
 * offset, or — under `auto.offset.reset=latest` with nothing committed — the end offset looked up
 * now (so that committing that start keeps the next owner from skipping records produced
 * meanwhile); and the completed-offset memories of the previous owner. All of it is resolved
 * before the assign call (librdkafka, and the whole group, waits for it), within a deadline.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { StartPositionError } from '../../errors';
import type { StartPosition, TopicPartition } from '../../types';
import type { CompletedStore } from '../commit/completed-store';
import type { ConsumerClient } from '../binding/consumer-client';
import { errorMessage, tpKey } from '../binding/rdkafka';
import { timerDelay } from '../loop/timers';

/** The start offsets and previous owner's memories of an assignment, by partition key. */
export interface StartChoices {
  readonly starts: Map<string, number>;
  readonly memories: Map<string, readonly number[]>;
}

export const NO_START_CHOICES: StartChoices = { starts: new Map(), memories: new Map() };

export class StartPositions {
  constructor(
    private readonly client: ConsumerClient,
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    private readonly store: CompletedStore | undefined,
  ) {}

  /** Whether an assignment needs any lookup before its assign call. */
  get needed(): boolean {
    return (
      this.settings.onAssign !== undefined || this.resetsToLatest() || this.store !== undefined
    );
  }

  /**
   * {@link startOffsets} within a deadline (librdkafka — and the whole group — waits for the assign
   * call meanwhile). With an `onAssign` hook, any failure to honour its choices (a lookup that
   * failed or timed out) is a {@link StartPositionError}: silently starting elsewhere could skip or
   * repeat what the application asked for.
   */
  async resolve(partitions: TopicPartition[], generation: number): Promise<StartChoices> {
    const limitMs = Math.min(this.settings.drainTimeoutMs, 2 * this.settings.commitTimeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const hooked = this.settings.onAssign !== undefined;
    const first = partitions[0] as TopicPartition;
    try {
      return await Promise.race([
        this.startOffsets(partitions, generation),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                hooked
                  ? new StartPositionError(
                      `Start positions were not resolved within ${limitMs} ms (onAssign hook and offset lookups)`,
                      { topic: first.topic, partition: first.partition },
                    )
                  : new Error(`start offset lookup timed out after ${limitMs} ms`),
              ),
            timerDelay(limitMs),
          );
        }),
      ]);
    } catch (err) {
      if (!hooked || err instanceof StartPositionError) throw err;
      throw new StartPositionError(
        `Could not resolve the start positions the onAssign hook asked for: ${errorMessage(err)}`,
        { topic: first.topic, partition: first.partition },
        { cause: err },
      );
    } finally {
      clearTimeout(timer);
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
  ): Promise<StartChoices> {
    const starts = new Map<string, number>();
    const committed = await this.client.committed(partitions, this.settings.commitTimeoutMs);
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
        if (position === undefined || position === 'committed') {
          if (hasCommitted || !this.resetsToLatest()) return;
          position = 'latest';
        }
        const key = tpKey(tp.topic, tp.partition);
        const start = await this.resolvePosition(tp, position);
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
    const raw =
      (this.settings.topicConfig as Record<string, unknown>)['auto.offset.reset'] ??
      (this.settings.globalConfig as Record<string, unknown>)['auto.offset.reset'] ??
      'largest';
    return raw === 'largest' || raw === 'latest' || raw === 'end';
  }
}
