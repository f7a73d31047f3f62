/**
 * Before partitions are released, the group's offsets of those with a commit of unknown outcome
 * (see commit-doubts.ts) are read back: a commit answered "timed out" that the broker applied
 * after the final one moved the group's offset back, and the next owner would redo the work in
 * between. A group offset below the final one is committed again; the partitions are released
 * once the group holds the final offsets and no doubtful commit can still land — or at the bound,
 * reported with the figures.
 *
 * What this closes and what it cannot is in docs/rebalance-semantics.md ("Commits of unknown
 * outcome").
 */
import type { Logger } from 'pino';
import type { ConsumerSettings } from '../config';
import type { ConsumerClient } from './consumer-client';
import type { PartitionControl } from './partition-control';
import { errorMessage } from './rdkafka';

/** A partition about to be released, and the offset the group must hold for it. */
export interface FinalOffset {
  readonly control: PartitionControl;
  readonly offset: number;
}

/** A partition whose group offset was below its final offset at the last read. */
export interface OffsetBehind extends FinalOffset {
  /** What the group held (undefined: no committed offset). */
  readonly held: number | undefined;
}

export interface VerificationOutcome {
  /** Partitions the group still held below their final offset when the bound came. */
  readonly behind: readonly OffsetBehind[];
  /** Times a late-applied commit was found (a group offset below the final one). */
  readonly lateApplied: number;
}

const NOTHING: VerificationOutcome = { behind: [], lateApplied: 0 };

/** Waits for a condition with a deadline (the consume loop keeps polling meanwhile). */
type Until = (condition: () => boolean, deadline: number) => Promise<boolean>;

/**
 * Reads back the group's offsets of `finals` that have a commit of unknown outcome, commits the
 * final offset again where the group holds less, and returns once the group holds every final
 * offset after the last doubtful commit's window has passed, or when `by()` comes.
 */
export async function verifyFinalOffsets(
  client: ConsumerClient,
  settings: ConsumerSettings,
  logger: Logger,
  until: Until,
  finals: readonly FinalOffset[],
  by: () => number,
): Promise<VerificationOutcome> {
  // A late copy of the final offset itself changes nothing: only other offsets are a risk.
  const doubted = finals.filter(({ control, offset }) =>
    client.doubts.of(control.topic, control.partition)?.offsets.some((o) => o !== offset),
  );
  if (doubted.length === 0) return NOTHING;
  const describe = (entries: readonly FinalOffset[]): Record<string, unknown> =>
    Object.fromEntries(
      entries.map(({ control }) => [
        `${control.topic}[${control.partition}]`,
        client.doubts.of(control.topic, control.partition)?.offsets,
      ]),
    );
  logger.info(
    { doubtful: describe(doubted), final: doubted.map(label) },
    'a commit of these partitions has an unknown outcome (it may still be applied): reading the group offsets back before releasing them',
  );
  let behind: OffsetBehind[] = [];
  let lateApplied = 0;
  let warnedAhead = false;
  const pause = (ms: number): Promise<boolean> =>
    until(() => false, Math.min(by(), Date.now() + ms));
  for (;;) {
    const readAt = Date.now();
    const timeoutMs = Math.min(settings.commitTimeoutMs, by() - readAt);
    if (timeoutMs <= 0) break;
    let held: Map<string, number | undefined>;
    try {
      const answer = await client.committed(
        doubted.map(({ control }) => ({ topic: control.topic, partition: control.partition })),
        timeoutMs,
      );
      held = new Map(
        answer.map((tp) => [
          `${tp.topic}[${tp.partition}]`,
          typeof tp.offset === 'number' && tp.offset >= 0 ? tp.offset : undefined,
        ]),
      );
    } catch (err) {
      logger.warn(
        { err: errorMessage(err) },
        'could not read the group offsets back; trying again until the rebalance deadline',
      );
      await pause(200);
      continue;
    }
    const heldOf = ({ control }: FinalOffset): number | undefined =>
      held.get(`${control.topic}[${control.partition}]`);
    behind = doubted
      .filter((f) => (heldOf(f) ?? -1) < f.offset)
      .map((f) => ({ ...f, held: heldOf(f) }));
    const ahead = doubted.filter((f) => (heldOf(f) ?? -1) > f.offset);
    if (ahead.length > 0 && !warnedAhead) {
      warnedAhead = true;
      logger.warn(
        { partitions: ahead.map((f) => `${label(f)} (group holds ${String(heldOf(f))})`) },
        'the group holds an offset past the final commit of this member (someone else committed for these partitions); leaving it',
      );
    }
    if (behind.length > 0) {
      lateApplied += 1;
      logger.warn(
        { partitions: behind.map((b) => `${label(b)} (group holds ${String(b.held)})`) },
        'the group holds an offset below the final commit: a commit answered with an error was applied late by the broker; committing the final offset again (without it the next owner would redo the messages in between: duplicates)',
      );
      const recommitMs = Math.min(settings.commitTimeoutMs, by() - Date.now());
      if (recommitMs <= 0) break;
      try {
        await client.commit(
          behind.map(({ control, offset }) => ({
            topic: control.topic,
            partition: control.partition,
            offset,
          })),
          recommitMs,
        );
      } catch (err) {
        logger.warn({ err: errorMessage(err) }, 'committing the final offset again failed');
        await pause(Math.min(1000, 100 * lateApplied));
      }
      continue;
    }
    // The group holds every final offset. Done once no doubtful commit can land any more.
    const openUntil = Math.max(
      ...doubted.map(({ control }) => client.doubts.openUntil(control.topic, control.partition)),
    );
    if (readAt >= openUntil) {
      for (const { control } of doubted)
        client.doubts.settle(control.topic, control.partition, readAt);
      return { behind: [], lateApplied };
    }
    if (Date.now() >= by()) break;
    await until(() => false, Math.min(openUntil, by()));
  }
  if (behind.length > 0) {
    logger.warn(
      { partitions: behind.map((b) => `${label(b)} (group holds ${String(b.held)})`) },
      'rebalance deadline: the group still holds an offset below the final commit (a late-applied commit); the next owner will process the messages in between again (duplicates)',
    );
  } else {
    logger.warn(
      { partitions: doubted.map(label) },
      'rebalance deadline: releasing the partitions while a commit of unknown outcome could still be applied (if it lands, the next owner may process messages again: duplicates)',
    );
  }
  return { behind, lateApplied };
}

function label({ control, offset }: FinalOffset): string {
  return `${control.topic}[${control.partition}]@${offset}`;
}
