/**
 * One measurement in its own process: the parent (run.ts) passes a task as JSON in BENCH_TASK and
 * receives progress and the result over IPC. Each contender or scenario runs in a fresh process so
 * that CPU time and peak RSS are its own.
 */
import { contender } from './contenders';
import { Meter } from './meter';
import type { ChildMessage, Task } from './tasks';
import { runJoin } from './scenarios/join-stall';
import { runOrdering } from './scenarios/ordering';
import { runMemory } from './scenarios/backlog-memory';
import { runRevoke } from './scenarios/revoke';
import { runTransform } from './scenarios/transform';

function send(message: ChildMessage): void {
  process.send?.(message);
}

/** Sends and waits until the message is handed to the IPC channel (before the process exits). */
function sendNow(message: ChildMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(message, undefined, {}, () => resolve());
  });
}

async function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function throughput(task: Extract<Task, { kind: 'throughput' }>): Promise<void> {
  const info = contender(task.contender);
  // Module loading is not the contender's work per message: load before the CPU clock starts.
  info.load?.();
  const meter = new Meter(task.contender, task.expected);
  const progress = setInterval(() => send({ type: 'progress', count: meter.count }), 250);
  const stop = await info.run({
    brokers: task.brokers,
    topic: task.topic,
    groupId: task.groupId,
    meter,
  });
  const result = await meter.done;
  clearInterval(progress);
  await sendNow({ type: 'result', result: { kind: 'throughput', ...result } });
  // Closing is not measured; do not let a slow close hold the next run.
  await withDeadline(stop(), 15_000);
}

async function main(): Promise<void> {
  const raw = process.env.BENCH_TASK;
  if (!raw) throw new Error('BENCH_TASK is not set: child.ts is started by run.ts');
  const task = JSON.parse(raw) as Task;
  switch (task.kind) {
    case 'throughput':
      return throughput(task);
    case 'revoke':
      return sendNow({ type: 'result', result: await runRevoke(task, send) });
    case 'join':
      return sendNow({ type: 'result', result: await runJoin(task, send) });
    case 'memory':
      return sendNow({ type: 'result', result: await runMemory(task, send) });
    case 'ordering':
      return sendNow({ type: 'result', result: await runOrdering(task, send) });
    case 'transform':
      return sendNow({ type: 'result', result: await runTransform(task, send) });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    void sendNow({ type: 'error', message: err instanceof Error ? err.message : String(err) }).then(
      () => process.exit(1),
    );
  },
);
