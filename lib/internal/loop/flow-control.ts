/**
 * Flow control: the only writer of a partition's paused state. Two reasons pause a partition —
 * the application (`pause()`, kept across rebalances: librdkafka keeps application pauses through
 * a revoke and a re-assignment, docs/binding-behaviours.md, "Application pauses survive rebalances") and backpressure (its buffer is full) — and it fetches
 * only when neither holds. Every librdkafka pause/resume call of the consumer goes through here:
 * new partitions, buffers filling and draining, a seek's new stream, a release.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import type { TopicPartition } from '../../types';
import type { ConsumerClient } from '../binding/consumer-client';
import type { PartitionControl } from '../partition/partition-control';
import { list, tpKey } from '../binding/rdkafka';
import type { PartitionLoggers } from '../observe/partition-loggers';
import type { Assignments } from '../rebalance/assignments';
import type { Shutdown } from './shutdown';

/** The consumer's parts flow control works with. */
export interface FlowControlHost {
  /** Which stream owns each partition. */
  readonly assignments: Assignments;
  /** Librdkafka calls for a stream are made only while it owns its partition and not once disconnecting. */
  readonly shutdown: Shutdown;
  readonly loggers: PartitionLoggers;
  /** Told when the library resumed partitions in librdkafka (fetch-waker.ts). */
  readonly fetchers: { resumed(partitions: readonly TopicPartition[]): void };
  /** Whether the consumer runs (user pauses of owned partitions apply at once). */
  running(): boolean;
}

/**
 * The least a partition's share of `maxBufferedBytesTotal` is (when many partitions are owned):
 * room for some messages ahead of the handlers, so that a partition is not paused at every batch.
 */
export const MIN_SHARE_BYTES = 256 * 1024;

/** How long moving a position back may wait for librdkafka's answer before it is asked again. */
const REWIND_SEEK_TIMEOUT_MS = 500;

export class FlowControl {
  /** Partitions the application paused (kept across rebalances), and whether new ones start paused. */
  private readonly userPaused = new Set<string>();
  private userPausedAll = false;
  /** Partitions resumed by name since the last `pause()` of everything: they start running. */
  private readonly resumedDespiteAll = new Set<string>();
  /**
   * Streams whose messages were held back because the application paused them while librdkafka
   * still fetched: the first offset held back, where the stream must start again. `sought` once
   * the fetch position was moved back to it.
   */
  private readonly rewinds = new Map<PartitionControl, { offset: number; sought: boolean }>();
  private readonly resumeAtMessages: number;

  constructor(
    private readonly client: ConsumerClient,
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    private readonly host: FlowControlHost,
  ) {
    this.resumeAtMessages = Math.floor(settings.maxBufferedMessages * settings.resumeThreshold);
  }

  /**
   * The bytes one partition may hold now: an equal share of `maxBufferedBytesTotal` among the
   * partitions owned (at least {@link MIN_SHARE_BYTES} when the budget is that large), at most
   * `maxBufferedBytes`. A share, not a shared pool: what one partition holds (a stuck handler's
   * buffer, a user's unfinished `bufferCount`) never pauses another.
   */
  bytesLimit(): number {
    const { maxBufferedBytes, maxBufferedBytesTotal } = this.settings;
    let share = Math.floor(maxBufferedBytesTotal / Math.max(1, this.host.assignments.size));
    if (maxBufferedBytesTotal >= MIN_SHARE_BYTES && share < MIN_SHARE_BYTES)
      share = MIN_SHARE_BYTES;
    return Math.min(maxBufferedBytes, share);
  }

  /**
   * A message was handed to the stream: pause the partition if its buffer is full, in its
   * messages' own bytes (with `sharedBatchBuffers` too: a pause on the batches they pin could wait
   * forever for acks that only more messages bring, a `bufferCount` tail).
   */
  afterPush(control: PartitionControl): void {
    if (!control.paused && this.full(control, this.bytesLimit())) {
      this.setBackpressure(control, true);
    }
  }

  /** Whether a partition holds enough to be paused, with `limit` its byte share. */
  private full(control: PartitionControl, limit: number): boolean {
    return (
      control.ledger.window >= this.settings.maxBufferedMessages || control.bufferedBytes >= limit
    );
  }

  /** A message finished: resume the partition once its buffer drained below the threshold. */
  afterAck(control: PartitionControl): void {
    if (
      control.paused &&
      control.ledger.window <= this.resumeAtMessages &&
      control.bufferedBytes <= Math.floor(this.bytesLimit() * this.settings.resumeThreshold)
    ) {
      this.setBackpressure(control, false);
    }
  }

  /**
   * Partitions went: each share grew. A partition paused for its buffer that the new share would
   * not pause resumes here: no ack of its own may come (a `bufferCount` waiting for more), and what
   * it holds may lie between its new resume and pause marks (its pause came with a consume batch
   * already fetched, see the consume loop).
   */
  reshared(): void {
    const limit = this.bytesLimit();
    for (const c of this.host.assignments.controls()) {
      if (!c.paused || !c.active) continue;
      if (!this.full(c, limit)) this.setBackpressure(c, false);
    }
  }

  /**
   * New partitions: librdkafka keeps application pauses across revoke and re-assignment, so set
   * each one's state explicitly — paused if the application paused it (or everything), else
   * running.
   */
  assigned(controls: readonly PartitionControl[]): void {
    if (this.userPausedAll)
      for (const c of controls) if (!this.resumedDespiteAll.has(c.key)) this.userPaused.add(c.key);
    const held = list(controls.filter((c) => this.userPaused.has(c.key)));
    const running = list(controls.filter((c) => !this.userPaused.has(c.key)));
    try {
      if (running.length > 0) this.client.raw.resume(running);
      if (held.length > 0) this.client.raw.pause(held);
    } catch (err) {
      this.logger.warn(
        { err, running, held },
        'pause/resume of newly assigned partitions failed: a partition paused by the application may be fetched, or one left paused by librdkafka may not be, until the next pause()/resume() or rebalance',
      );
    }
  }

  /** Partitions about to be released: lift the library's own pauses. */
  releasing(controls: readonly PartitionControl[]): void {
    for (const c of controls) {
      this.rewinds.delete(c);
      if (c.paused) this.setBackpressure(c, false);
    }
  }

  /** A seek replaced `old` by `next`: the new stream starts with an empty buffer. */
  replaced(old: PartitionControl, next: PartitionControl): void {
    this.rewinds.delete(old);
    if (!old.paused || this.userPaused.has(next.key)) return;
    try {
      const tp = [{ topic: next.topic, partition: next.partition }];
      this.client.raw.resume(tp);
      this.host.fetchers.resumed(tp);
    } catch (err) {
      this.host.loggers
        .of(next)
        .warn(
          { err },
          'resume after seek failed: the partition stays paused until the next rebalance',
        );
    }
  }

  /** Pauses fetching of the given partitions (all owned ones, and future ones, without `tps`). */
  pause(tps?: readonly TopicPartition[]): void {
    const targets = tps ?? this.host.assignments.controls();
    if (tps === undefined) {
      this.userPausedAll = true;
      this.resumedDespiteAll.clear();
    }
    for (const tp of targets) {
      const key = tpKey(tp.topic, tp.partition);
      this.userPaused.add(key);
      this.resumedDespiteAll.delete(key);
    }
    const owned = targets.filter((tp) => this.host.assignments.get(tpKey(tp.topic, tp.partition)));
    if (owned.length === 0 || !this.host.running()) return;
    try {
      this.client.raw.pause(list(owned));
    } catch (err) {
      this.logger.warn({ err, partitions: list(owned) }, 'pause failed');
    }
    this.logger.info({ partitions: list(owned) }, 'paused by the application');
  }

  /**
   * Resumes what `pause()` paused (everything without `tps`). A partition also paused by the
   * library for backpressure stays paused until its buffer drains.
   */
  resume(tps?: readonly TopicPartition[]): void {
    if (tps === undefined) {
      this.userPausedAll = false;
      this.resumedDespiteAll.clear();
    }
    const keys = tps ? tps.map((tp) => tpKey(tp.topic, tp.partition)) : [...this.userPaused];
    for (const k of keys) {
      this.userPaused.delete(k);
      // Resumed by name while everything is paused: it stays resumed when assigned again.
      if (this.userPausedAll) this.resumedDespiteAll.add(k);
    }
    const ready = keys
      .map((k) => this.host.assignments.get(k))
      .filter((c): c is PartitionControl => c !== undefined && !c.paused);
    if (ready.length === 0 || !this.host.running()) return;
    const partitions = list(ready);
    try {
      this.client.raw.resume(partitions);
      this.host.fetchers.resumed(partitions);
    } catch (err) {
      this.logger.warn({ err, partitions }, 'resume failed');
    }
    this.logger.info({ partitions }, 'resumed by the application');
  }

  /** Whether a message must pass {@link admit} (some partition is paused or rewinding). */
  get guarding(): boolean {
    return this.userPaused.size > 0 || this.rewinds.size > 0;
  }

  /**
   * Whether a message of an active stream may be handed to it. A message of a partition the
   * application paused is never delivered, whether it was fetched before the pause applied (a
   * consume call in flight when `pause()` was called) or librdkafka dropped the pause: its
   * pause/resume, seek and fetch-start requests carry version barriers taken before they are
   * queued, and one served after a newer request of librdkafka's own threads (an assignment
   * starting its fetcher, say) is dropped as outdated, and rd_kafka_pause_partitions() reports
   * success all the same. The message is held back, the pause asked again, and the fetch position
   * moved back to the first message held back (by the loop, between two consume calls:
   * {@link applyRewinds}), so it is fetched again after `resume()`. librdkafka's position is not
   * taken for the ledger meanwhile ({@link rewinding}). Once librdkafka confirmed that seek, the
   * first message at or after it ends the rewind (the held-back one, or the next one if it no
   * longer exists: retention, compaction).
   */
  admit(control: PartitionControl, offset: number): boolean {
    const rewind = this.rewinds.get(control);
    if (this.userPaused.has(control.key)) {
      if (rewind === undefined || offset < rewind.offset) {
        this.rewinds.set(control, { offset, sought: false });
        if (rewind === undefined) {
          this.host.loggers
            .of(control)
            .debug(
              { offset },
              'held back a message of a partition paused by the application; fetching it again after resume()',
            );
        }
        this.pauseAgain(control);
      } else if (rewind.sought) {
        // Fetched after the position was moved back, while paused: the pause did not hold.
        this.host.loggers
          .of(control)
          .warn(
            { offset, heldFrom: rewind.offset },
            'a partition paused by the application is still fetched (librdkafka dropped the pause): pausing it again; its messages are held back',
          );
        rewind.sought = false;
        this.pauseAgain(control);
      }
      return false;
    }
    if (rewind === undefined || offset < rewind.offset) return true;
    if (offset === rewind.offset || rewind.sought) {
      this.rewinds.delete(control);
      return true;
    }
    return false; // the position is moved back before the next consume call
  }

  /** Whether librdkafka's position of this stream runs ahead of what it was handed. */
  rewinding(control: PartitionControl): boolean {
    return this.rewinds.has(control);
  }

  /** Whether {@link applyRewinds} has positions to move back (or entries of ended streams). */
  get rewindsWaiting(): boolean {
    for (const [control, r] of this.rewinds) if (!r.sought || !control.active) return true;
    return false;
  }

  /** Moves fetch positions back to the messages held back; only the consume loop calls it. */
  async applyRewinds(): Promise<void> {
    for (const [control, rewind] of [...this.rewinds]) {
      if (!control.active || !this.controllable(control)) {
        this.rewinds.delete(control);
        continue;
      }
      if (rewind.sought) continue;
      try {
        // node-rdkafka waits for librdkafka's answer (at least 10 ms): success means the seek was
        // applied; a timeout may still apply later, so it is asked again (to the same offset).
        await this.client.seek(
          { topic: control.topic, partition: control.partition, offset: rewind.offset },
          REWIND_SEEK_TIMEOUT_MS,
        );
        rewind.sought = true;
      } catch (err) {
        this.host.loggers
          .of(control)
          .warn({ err, offset: rewind.offset }, 'moving the position back failed; retrying');
      }
    }
  }

  /** Owned partitions librdkafka fetches now: paused neither for backpressure nor by the application. */
  *fetching(): Iterable<PartitionControl> {
    for (const c of this.host.assignments.values()) {
      if (!c.paused && !this.userPaused.has(c.key)) yield c;
    }
  }

  /** Partitions paused by the application (owned now or not). */
  pausedByUser(): TopicPartition[] {
    return [...this.userPaused].map((k) => {
      const [topic = '', partition = '0'] = k.split('\u0000');
      return { topic, partition: Number(partition) };
    });
  }

  /** Whether librdkafka calls can be made for this stream now (it owns its partition, connected). */
  private controllable(control: PartitionControl): boolean {
    return this.host.shutdown.stage !== 'disconnecting' && this.host.assignments.owns(control);
  }

  private pauseAgain(control: PartitionControl): void {
    if (!this.controllable(control)) return;
    try {
      this.client.raw.pause([{ topic: control.topic, partition: control.partition }]);
    } catch (err) {
      this.host.loggers.of(control).warn({ err }, 'pause failed');
    }
  }

  private setBackpressure(control: PartitionControl, paused: boolean): void {
    if (control.state === 'released' || !this.controllable(control)) return;
    try {
      const tp = [{ topic: control.topic, partition: control.partition }];
      // A partition the application paused stays paused when backpressure lifts.
      if (paused) this.client.raw.pause(tp);
      else if (!this.userPaused.has(control.key)) {
        this.client.raw.resume(tp);
        if (control.active) this.host.fetchers.resumed(tp);
      }
      control.markPaused(paused);
      this.host.loggers
        .of(control)
        .debug(
          { buffered: control.ledger.window, bytes: control.bufferedBytes },
          paused ? 'paused partition (buffer full)' : 'resumed partition',
        );
    } catch (err) {
      this.host.loggers
        .of(control)
        .warn(
          { err },
          paused
            ? 'pause failed: the partition keeps fetching past its buffer limits (memory grows) until the next attempt'
            : 'resume failed: the partition stays paused until the next attempt or rebalance',
        );
    }
  }
}
