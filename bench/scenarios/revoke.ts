/**
 * revoke → revoked per partition. Member A owns every partition; member B joins (A's moved
 * partitions are revoked), then leaves (under eager A is revoked again). Each `revoked` event of a
 * member that is not closing gives one sample per partition: its `totalMs` (revoking → revoked:
 * drain, final commit confirmed, unassign). Idle: an empty topic, no handler running. In flight: a
 * backlog and handlers of 5–50 ms (seeded), one per partition (`partitionConcurrency` 1).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { seededRandom } from '../../integration/helpers/random';
import { createTopic, deleteTopic, fillTopic } from '../kafka-admin';
import type { RevokeResult, Send, Task } from '../tasks';
import { reactiveMember, waitUntil } from './members';
import type { Processing } from './members';

export async function runRevoke(
  task: Extract<Task, { kind: 'revoke' }>,
  send: Send,
): Promise<RevokeResult> {
  const suffix = `${Date.now().toString(36)}-${task.seed}`;
  const topic = `bench-revoke-${task.protocol}-${task.variant}-${suffix}`;
  const groupId = `bench-revoke-group-${task.protocol}-${task.variant}-${suffix}`;
  const random = seededRandom(task.seed);
  await createTopic(task.brokers, topic, task.partitions);
  if (task.variant === 'in-flight') {
    await fillTopic(task.brokers, topic, task.partitions, task.backlog, 100, task.seed);
  }
  const [lo, hi] = task.handlerMs;
  const handlerMs = task.variant === 'idle' ? () => 0 : () => Math.round(lo + random() * (hi - lo));
  const result: RevokeResult = {
    kind: 'revoke',
    protocol: task.protocol,
    variant: task.variant,
    samplesMs: [],
    inFlight: 0,
    revokes: 0,
    timedOut: 0,
  };
  const log: Processing[] = [];
  const closing = new Set<number>();
  const member = (index: number) =>
    reactiveMember({
      brokers: task.brokers,
      topic,
      groupId,
      protocol: task.protocol,
      index,
      handlerMs,
      log,
      onEvent: (event) => {
        if (closing.has(index)) return;
        if (event.type === 'drained') {
          result.inFlight += event.inFlight;
          if (event.timedOut) result.timedOut += 1;
        }
        if (event.type === 'revoked') {
          result.revokes += 1;
          for (let i = 0; i < event.partitions.length; i++) result.samplesMs.push(event.totalMs);
        }
      },
    });
  const a = member(0);
  await a.start();
  await waitUntil(
    () => a.owned.size === task.partitions,
    60_000,
    'member A to own every partition',
  );
  if (task.variant === 'in-flight') {
    await waitUntil(() => log.length > 0, 30_000, 'member A to process');
  }
  for (let cycle = 1; cycle <= task.cycles; cycle++) {
    const b = member(cycle);
    await b.start();
    await waitUntil(
      () => b.owned.size > 0 && a.owned.size + b.owned.size === task.partitions,
      60_000,
      `member B (cycle ${cycle}) to get partitions`,
    );
    await sleep(1000);
    closing.add(b.index);
    await b.close();
    await waitUntil(
      () => a.owned.size === task.partitions,
      60_000,
      `member A to own every partition again (cycle ${cycle})`,
    );
    await sleep(500);
    send({ type: 'progress', count: cycle, note: `cycle ${cycle}/${task.cycles}` });
  }
  closing.add(a.index);
  await a.close();
  await deleteTopic(task.brokers, topic).catch(() => undefined);
  return result;
}
