/**
 * A 7th member joins a 6-member group while records arrive at a steady rate. The stall is the
 * longest time after the join during which no member finished any message (the group made no
 * progress at all); the baseline is the same measure just before the join. Every processed
 * (partition, offset) is recorded, so duplicates and losses are counted against what the producer
 * wrote (high watermarks).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { seededRandom } from '../../integration/helpers/random';
import { createTopic, deleteTopic, highWatermarks } from '../kafka-admin';
import type { JoinResult, Send, Task } from '../tasks';
import { kafkajsMember, reactiveMember, waitUntil } from './members';
import type { GroupMember, Processing } from './members';
import { steadyProducer } from './steady-producer';

/** Longest gap between consecutive completions within [from, to], counting both ends. */
export function longestGap(times: readonly number[], from: number, to: number): number {
  let previous = from;
  let longest = 0;
  for (const t of times) {
    if (t < from) continue;
    if (t > to) break;
    longest = Math.max(longest, t - previous);
    previous = t;
  }
  return Math.max(longest, to - previous);
}

/** The longest gap of any single partition within [from, to] (see longestGap). */
export function longestPartitionGap(
  log: readonly Processing[],
  partitions: number | readonly number[],
  from: number,
  to: number,
): number {
  let longest = 0;
  const which =
    typeof partitions === 'number' ? Array.from({ length: partitions }, (_, p) => p) : partitions;
  for (const p of which) {
    const times = log
      .filter((r) => r.partition === p)
      .map((r) => r.at)
      .sort((a, b) => a - b);
    longest = Math.max(longest, longestGap(times, from, to));
  }
  return longest;
}

export async function runJoin(
  task: Extract<Task, { kind: 'join' }>,
  send: Send,
): Promise<JoinResult> {
  const suffix = `${Date.now().toString(36)}-${task.seed}`;
  const topic = `bench-join-${task.client}-${task.protocol}-${suffix}`;
  const groupId = `bench-join-group-${task.client}-${task.protocol}-${suffix}`;
  const random = seededRandom(task.seed);
  await createTopic(task.brokers, topic, task.partitions);
  const log: Processing[] = [];
  // A little real work per message: 1–3 ms (seeded), one at a time per partition.
  const handlerMs = () => 1 + Math.floor(random() * 3);
  const make = (index: number): GroupMember =>
    (task.client === 'kafkajs' ? kafkajsMember : reactiveMember)({
      brokers: task.brokers,
      topic,
      groupId,
      protocol: task.protocol,
      index,
      handlerMs,
      log,
    });
  const producer = await steadyProducer(task.brokers, topic, task.partitions, task.rate);
  const members: GroupMember[] = [];
  for (let i = 0; i < task.members - 1; i++) {
    const m = make(i);
    members.push(m);
    await m.start();
  }
  const stable = () =>
    members.every((m) => m.owned.size > 0) &&
    members.reduce((n, m) => n + m.owned.size, 0) === task.partitions;
  await waitUntil(stable, 90_000, `${members.length} members to share every partition`);
  send({ type: 'progress', count: 0, note: `${members.length} members stable` });
  await sleep(task.settleMs);
  const joinAt = performance.now();
  const newcomer = make(task.members - 1);
  members.push(newcomer);
  await newcomer.start();
  await sleep(task.observeMs);
  const observedTo = performance.now();
  send({ type: 'progress', count: 1, note: 'observed the join' });
  await producer.stop();
  const ends = await highWatermarks(task.brokers, topic, task.partitions);
  const produced = ends.reduce((a, b) => a + b, 0);
  const distinct = new Set<string>();
  let scanned = 0;
  await waitUntil(
    () => {
      for (; scanned < log.length; scanned++) {
        const r = log[scanned]!;
        distinct.add(`${r.partition}:${r.offset}`);
      }
      return distinct.size >= produced;
    },
    90_000,
    `every one of ${produced} records to be processed`,
  ).catch((err: unknown) => console.error(String(err)));
  await Promise.all(members.map((m) => m.close()));
  await deleteTopic(task.brokers, topic).catch(() => undefined);

  const times = log.map((r) => r.at).sort((a, b) => a - b);
  const counts = new Map<string, number>();
  for (const r of log) {
    const key = `${r.partition}:${r.offset}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  let duplicates = 0;
  for (const n of counts.values()) duplicates += n - 1;
  let losses = 0;
  ends.forEach((end, partition) => {
    for (let offset = 0; offset < end; offset++)
      if (!counts.has(`${partition}:${offset}`)) losses++;
  });
  const firstOfNewcomer = log.find((r) => r.member === newcomer.index);
  // A partition is kept when the member that processed it last before the join also processed it
  // last in the observed window; otherwise it moved (to the newcomer, or elsewhere).
  const lastOwner = (p: number, from: number, to: number): number | undefined => {
    let owner: number | undefined;
    for (const r of log) if (r.partition === p && r.at >= from && r.at <= to) owner = r.member;
    return owner;
  };
  const kept: number[] = [];
  const moved: number[] = [];
  for (let p = 0; p < task.partitions; p++) {
    const before = lastOwner(p, 0, joinAt);
    (before !== undefined && before === lastOwner(p, joinAt, observedTo) ? kept : moved).push(p);
  }
  const baselineWindow = Math.min(task.settleMs, task.observeMs);
  return {
    kind: 'join',
    client: task.client,
    protocol: task.protocol,
    stallMs: longestGap(times, joinAt, observedTo),
    baselineGapMs: longestGap(times, joinAt - baselineWindow, joinAt),
    partitionPauseMs: longestPartitionGap(log, task.partitions, joinAt, observedTo),
    baselinePartitionPauseMs: longestPartitionGap(
      log,
      task.partitions,
      joinAt - baselineWindow,
      joinAt,
    ),
    keptPartitionPauseMs:
      kept.length > 0 ? longestPartitionGap(log, kept, joinAt, observedTo) : undefined,
    movedPartitionPauseMs:
      moved.length > 0 ? longestPartitionGap(log, moved, joinAt, observedTo) : undefined,
    newMemberAssignedMs:
      newcomer.firstAssignedAt !== undefined ? newcomer.firstAssignedAt - joinAt : undefined,
    newMemberFirstMs: firstOfNewcomer ? firstOfNewcomer.at - joinAt : undefined,
    produced,
    processed: log.length,
    duplicates,
    losses,
  };
}
