/**
 * Before partitions are released, the group's offsets of those with a commit of unknown outcome
 * (see commit-doubts.ts) are read back: a commit answered "timed out" that the broker applied
 * after the final one moved the group's offset, and the next owner would redo (or skip) the work
 * in between. Where the group holds another offset that this member's doubtful commits carried, or
 * one below the final offset, the final offset is committed again; the partitions are released
 * once a read made after the last doubtful commit's window shows every final offset — or at the
 * bound, reported with the figures.
 *
 * What this closes and what it cannot is in docs/rebalance-semantics.md ("Commits of unknown
 * outcome").
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { PartitionCommitResult } from '../../types';
import { untilMoving } from '../loop/wait-conditions';
import type { ConsumerClient } from '../binding/consumer-client';
import type { PartitionControl } from '../partition/partition-control';
import { OWNERSHIP_LOST_CODES, errorMessage, kafkaCodeOf, tpKey } from '../binding/rdkafka';

/** A partition about to be released, and the offset the group must hold for it. */
export interface FinalOffset {
  readonly control: PartitionControl;
  readonly offset: number;
}

/** How the verification of one partition ended, when it did not confirm its final offset. */
export type Unverified =
  | (FinalOffset & {
      readonly kind: 'behind';
      /** What the group held at the last read (undefined: no committed offset). */
      readonly held: number | undefined;
    })
  /** No read after the window showed the final offset before the bound (reads failed, or too early). */
  | (FinalOffset & { readonly kind: 'unconfirmed'; readonly why: string })
  /** The re-commit was refused for ownership: the member no longer owns the partition. */
  | (FinalOffset & { readonly kind: 'lost'; readonly reason: string });

export interface VerificationOutcome {
  /** Partitions whose final offset the group was not seen to hold, and why. */
  readonly unverified: readonly Unverified[];
  /** Times a late-applied commit was found and the final offset committed again. */
  readonly recommits: number;
}

/** What the verification needs from its owner. */
export interface VerificationHost {
  /** Waits for a condition with a deadline (the consume loop keeps polling meanwhile). */
  until(condition: () => boolean, deadline: number): Promise<boolean>;
  /** Wakes what waits in `until` (a read-back answered). */
  changed(): void;
}

const NOTHING: VerificationOutcome = { unverified: [], recommits: 0 };

/** The partition may still be released through this revoke (no newer assignment took it). */
const releasable = ({ control }: FinalOffset): boolean =>
  control.state === 'ending' || control.state === 'active';

/**
 * Reads back the group's offsets of `finals` whose doubtful commits carried another offset,
 * commits the final offset again where the group holds what a doubtful commit carried or less
 * than the final one, and returns once a read after every doubtful commit's window shows the final
 * offsets, or when `by()` (which a close may bring forward) comes.
 */
export async function verifyFinalOffsets(
  client: ConsumerClient,
  settings: ConsumerSettings,
  logger: Logger,
  host: VerificationHost,
  finals: readonly FinalOffset[],
  by: () => number,
): Promise<VerificationOutcome> {
  const doubtOf = ({ control }: FinalOffset) => client.doubts.of(control.topic, control.partition);
  // A late copy of the final offset itself changes nothing: only other offsets are a risk.
  let pending = finals.filter((f) => doubtOf(f)?.offsets.some((o) => o !== f.offset));
  if (pending.length === 0) return NOTHING;
  logger.info(
    {
      doubtful: Object.fromEntries(pending.map((f) => [label(f), doubtOf(f)?.offsets])),
    },
    'a commit of these partitions has an unknown outcome (it may still be applied): reading the group offsets back before releasing them',
  );
  const unverified: Unverified[] = [];
  let recommits = 0;
  let lastFailure = 'the group offsets could not be read back';
  /** Waits until `done()` or `until` (both moving with `by()`). */
  const wait = (done: () => boolean, until: () => number): Promise<boolean> =>
    untilMoving(
      (c, d) => host.until(c, d),
      done,
      () => Math.min(until(), by()),
    );
  /** Waits `ms`, less when `by()` comes first. */
  const pause = (ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    return wait(
      () => false,
      () => until,
    );
  };
  /** `promise`'s outcome, or an error when `by()` came first. */
  const bounded = async <T>(promise: Promise<T>): Promise<{ value: T } | { error: unknown }> => {
    let outcome: { value: T } | { error: unknown } | undefined;
    void promise.then(
      (value) => {
        outcome = { value };
        host.changed();
      },
      (error: unknown) => {
        outcome = { error };
        host.changed();
      },
    );
    await wait(
      () => outcome !== undefined,
      () => Infinity,
    );
    return outcome ?? { error: new Error('the rebalance deadline came first') };
  };
  const drop = (lost: readonly FinalOffset[]): void => {
    pending = pending.filter((f) => !lost.includes(f));
  };
  for (;;) {
    // A newer assignment took it (a stale revoke): nothing more is committed for it here.
    drop(pending.filter((f) => !releasable(f)));
    if (pending.length === 0) break;
    const readAt = Date.now();
    // Whole reads: rd_kafka_committed sends a fresh OffsetFetch per call, so reads shorter than the
    // coordinator's answer would never succeed. A close does not disconnect under one (it waits for
    // it up to its deadline, then leaves the disconnect to when it returns).
    const timeoutMs = Math.min(settings.commitTimeoutMs, by() - readAt);
    if (timeoutMs <= 0) break;
    const read = await bounded(
      client.committed(
        pending.map(({ control }) => ({ topic: control.topic, partition: control.partition })),
        timeoutMs,
      ),
    );
    if ('error' in read) {
      lastFailure = `the group offsets could not be read back: ${errorMessage(read.error)}`;
      logger.warn(
        { err: errorMessage(read.error) },
        'could not read the group offsets back; trying again until the rebalance deadline',
      );
      await pause(200);
      if (Date.now() >= by()) break;
      continue;
    }
    const held = new Map(
      read.value.map((tp) => [
        tpKey(tp.topic, tp.partition),
        typeof tp.offset === 'number' && tp.offset >= 0 ? tp.offset : undefined,
      ]),
    );
    const heldOf = ({ control }: FinalOffset): number | undefined =>
      held.get(tpKey(control.topic, control.partition));
    // Moved by this member's own late commit (lower, or higher after a seek back), or below the
    // final offset: the final one goes out again. Higher and not ours: someone else committed.
    const moved = pending.filter((f) => {
      const h = heldOf(f);
      if (h === f.offset) return false;
      return h === undefined || h < f.offset || (doubtOf(f)?.offsets.includes(h) ?? false);
    });
    for (const f of pending.filter((p) => !moved.includes(p) && heldOf(p) !== p.offset)) {
      logger.warn(
        { partition: label(f), held: heldOf(f) },
        'the group holds an offset past the final commit of this member that none of its commits carried (someone else committed for the partition); leaving it',
      );
      drop([f]);
    }
    if (moved.length > 0) {
      recommits += 1;
      logger.warn(
        { partitions: moved.map((f) => `${label(f)} (group holds ${String(heldOf(f))})`) },
        'the group holds another offset than the final commit: a commit answered with an error was applied late by the broker; committing the final offset again (without it the next owner would process the messages in between again, or skip them)',
      );
      // Not behind a copy librdkafka still holds: it could overtake this one.
      const sendable = moved.filter(({ control, offset }) =>
        client.canCommit(control.topic, control.partition, offset),
      );
      const recommitMs = Math.min(settings.commitTimeoutMs, by() - Date.now());
      if (recommitMs <= 0) {
        for (const f of moved) unverified.push({ ...f, kind: 'behind', held: heldOf(f) });
        drop(moved);
        break;
      }
      const sent = await bounded(
        sendable.length === 0
          ? Promise.reject(new Error('an earlier commit of the partition is still unanswered'))
          : client.commit(
              sendable.map(({ control, offset }) => ({
                topic: control.topic,
                partition: control.partition,
                offset,
              })),
              recommitMs,
            ),
      );
      if ('error' in sent) {
        const code = kafkaCodeOf(sent.error);
        if (code !== undefined && OWNERSHIP_LOST_CODES.has(code)) {
          const reason = `committing the final offset again was refused: ${errorMessage(sent.error)}`;
          for (const f of sendable) unverified.push({ ...f, kind: 'lost', reason });
          drop(sendable);
          continue;
        }
        logger.warn({ err: errorMessage(sent.error) }, 'committing the final offset again failed');
        await pause(Math.min(1000, 100 * recommits));
        if (Date.now() >= by()) {
          for (const f of moved) unverified.push({ ...f, kind: 'behind', held: heldOf(f) });
          drop(moved);
          break;
        }
      }
      continue;
    }
    // The group holds every final offset. Done once no doubtful commit can land any more.
    const openUntil = Math.max(
      ...pending.map(({ control }) => client.doubts.openUntil(control.topic, control.partition)),
    );
    if (readAt >= openUntil) {
      for (const { control } of pending) {
        client.doubts.settle(control.topic, control.partition, readAt);
      }
      pending = [];
      break;
    }
    lastFailure = `a commit of unknown outcome could still be applied until ${openUntil - Date.now()} ms from now`;
    await wait(
      () => false,
      () => openUntil,
    );
    if (Date.now() >= by() && Date.now() < openUntil) break;
  }
  for (const f of pending) unverified.push({ ...f, kind: 'unconfirmed', why: lastFailure });
  const behind = unverified.filter((u) => u.kind === 'behind');
  if (behind.length > 0) {
    logger.warn(
      { partitions: behind.map((b) => `${label(b)} (group holds ${String(b.held)})`) },
      'rebalance deadline: the group still holds another offset than the final commit (a late-applied commit); the next owner will process the messages in between again (duplicates)',
    );
  }
  if (pending.length > 0) {
    logger.warn(
      { partitions: pending.map(label), why: lastFailure },
      'rebalance deadline: releasing the partitions without confirming the group holds their final offsets (a commit of unknown outcome could still land: the next owner may process messages again)',
    );
  }
  return { unverified, recommits };
}

function label({ control, offset }: FinalOffset): string {
  return `${control.topic}[${control.partition}]@${offset}`;
}

/**
 * A commit of these partitions that librdkafka answered with an error of unknown outcome (timed
 * out, transport failure, coordinator moved) may have been applied after the final one: the
 * group's offsets are read back, and the final ones committed again where the group holds
 * another, before the release. The results of partitions not confirmed so become `failed`, or
 * `lost` where the broker refused for ownership.
 */
export async function verifyResults(
  client: ConsumerClient,
  settings: ConsumerSettings,
  logger: Logger,
  host: VerificationHost,
  controls: readonly PartitionControl[],
  results: Map<PartitionControl, PartitionCommitResult>,
  holdBy: () => number,
): Promise<void> {
  const finals: FinalOffset[] = [];
  for (const control of controls) {
    const r = results.get(control);
    if ((r?.status === 'committed' || r?.status === 'unchanged') && r.offset !== undefined)
      finals.push({ control, offset: r.offset });
  }
  const { unverified } = await verifyFinalOffsets(
    client,
    settings,
    logger,
    host,
    finals,
    () => holdBy() - 100,
  );
  for (const u of unverified) {
    const { control, offset } = u;
    if (u.kind === 'lost') {
      results.set(control, {
        topic: control.topic,
        partition: control.partition,
        status: 'lost',
        reason: u.reason,
      });
      continue;
    }
    results.set(control, {
      topic: control.topic,
      partition: control.partition,
      status: 'failed',
      offset,
      reason:
        u.kind === 'behind'
          ? `the group holds offset ${u.held === undefined ? 'none' : String(u.held)}: a commit answered with an error was applied after the final one, and committing ${offset} again was not confirmed by the rebalance deadline`
          : `not confirmed that the group holds ${offset} by the rebalance deadline: ${u.why}`,
    });
  }
}
