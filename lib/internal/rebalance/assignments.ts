/**
 * Which stream owns each partition now. One control per assigned partition per assignment (a seek
 * replaces it with a fresh one); streams a seek replaced stay "retired" until their aborted
 * handlers have finished, because a revoke or a close must wait for them too.
 *
 * The only writer of the ownership map. The dispatch of a consume batch looks partitions up
 * through a one-entry cache (consecutive messages usually share a partition), which every change
 * of ownership invalidates here, so no caller can forget to.
 */
import type { TopicPartition } from '../../types';
import type { PartitionControl } from '../partition/partition-control';
import { tpKey } from '../binding/rdkafka';

export class Assignments {
  private readonly owned = new Map<string, PartitionControl>();
  private readonly retired = new Set<PartitionControl>();
  private cachedTopic = '';
  private cachedPartition = -1;
  private cached: PartitionControl | undefined;

  get size(): number {
    return this.owned.size;
  }

  /** Current controls, active ones and ones being revoked. */
  values(): IterableIterator<PartitionControl> {
    return this.owned.values();
  }

  controls(): PartitionControl[] {
    return [...this.owned.values()];
  }

  get(key: string): PartitionControl | undefined {
    return this.owned.get(key);
  }

  /** The owner of a partition, for the dispatch of one message (cached). */
  ownerOf(topic: string, partition: number): PartitionControl | undefined {
    if (partition === this.cachedPartition && topic === this.cachedTopic) return this.cached;
    const control = this.owned.get(tpKey(topic, partition));
    this.cachedTopic = topic;
    this.cachedPartition = partition;
    this.cached = control;
    return control;
  }

  /** Whether this control is still the one owning its partition. */
  owns(control: PartitionControl): boolean {
    return this.owned.get(control.key) === control;
  }

  /** The owned controls of these partitions. */
  of(partitions: readonly TopicPartition[]): PartitionControl[] {
    return partitions
      .map((tp) => this.owned.get(tpKey(tp.topic, tp.partition)))
      .filter((c): c is PartitionControl => c !== undefined);
  }

  /** A new assignment's control takes the partition (the caller fenced the previous one). */
  take(control: PartitionControl): void {
    this.owned.set(control.key, control);
    this.invalidate();
  }

  /**
   * A seek's fresh control replaces `old`; the old one is retired until its aborted handlers
   * return (its `drained` promise resolved when it was fenced; `isDrained` turns true only once
   * its pipeline finished).
   */
  replace(old: PartitionControl, control: PartitionControl): void {
    if (!old.isDrained) this.retired.add(old);
    this.take(control);
  }

  /** Drops the partitions of a released assignment (ones a newer assignment took stay). */
  forget(controls: readonly PartitionControl[]): void {
    for (const c of controls) if (this.owned.get(c.key) === c) this.owned.delete(c.key);
    this.invalidate();
  }

  /** Drops every owned partition whose key `keep` rejects; returns the dropped controls. */
  dropUnless(keep: (key: string) => boolean): PartitionControl[] {
    const dropped: PartitionControl[] = [];
    for (const [key, c] of this.owned) {
      if (keep(key)) continue;
      this.owned.delete(key);
      dropped.push(c);
    }
    this.invalidate();
    return dropped;
  }

  clear(): void {
    this.owned.clear();
    this.invalidate();
  }

  /** An ack on `control`: a retired stream is forgotten once its aborted handlers finished. */
  acked(control: PartitionControl): void {
    if (this.retired.size > 0 && control.isDrained) this.retired.delete(control);
  }

  /** Streams retired by a seek of one of these partitions and still running. */
  retiredOf(partitions: readonly TopicPartition[]): PartitionControl[] {
    const keys = new Set(partitions.map((p) => tpKey(p.topic, p.partition)));
    this.pruneRetired();
    return [...this.retired].filter((c) => keys.has(c.key));
  }

  /** No retired stream still runs aborted handlers. */
  get retiredDrained(): boolean {
    this.pruneRetired();
    return this.retired.size === 0;
  }

  private pruneRetired(): void {
    for (const c of this.retired) if (c.isDrained) this.retired.delete(c);
  }

  private invalidate(): void {
    this.cached = undefined;
    this.cachedPartition = -1;
    this.cachedTopic = '';
  }
}
