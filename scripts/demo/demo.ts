/**
 * `make demo`: two ReactiveConsumers share a topic while rebalances happen under load, then the
 * demo checks from what the handlers saw that nothing was lost and nothing was processed twice.
 *
 *   1. start a broker: librdkafka's embedded mock cluster, or the cluster in `KAFKA_BROKERS`;
 *   2. produce DEMO_MESSAGES (3000) keyed messages whose value is their sequence number;
 *   3. consumer A processes them with slow-ish handlers (5–15 ms, at most 4 at once);
 *   4. consumer B joins the same group mid-flight: A's revoke drains, commits, releases;
 *   5. A leaves with close() while its handlers run: B takes over where A committed;
 *   6. when every message was seen, B closes; the summary compares what the handlers saw with
 *      what was produced, and the group's committed offsets with the end offsets.
 *
 * Exits 0 only when nothing was lost, nothing was processed twice and everything is committed.
 * Environment: KAFKA_BROKERS (a real cluster: the demo creates a 6-partition topic there and deletes
 * it at the end unless DEMO_KEEP_TOPIC is set), DEMO_MESSAGES (100–50000), DEMO_PROTOCOL
 * (consumer | cooperative | eager; classic protocols misbehave on the embedded broker),
 * DEMO_LOG_LEVEL (pino level of the library's logs shown among the events; default warn).
 */
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import type { ConsumerGlobalConfig } from 'node-rdkafka';
import { ReactiveConsumer } from '../../lib';
import type { RebalanceEvent, PartitionCommitResult } from '../../lib';
import {
  committedOffsets,
  createTopic,
  deleteTopic,
  endOffsets,
  produceNumbered,
  startCluster,
} from './cluster';
import { Display, bar } from './display';
import type { Colors } from './display';

const MESSAGES = Number(process.env.DEMO_MESSAGES ?? 3000);
const PARTITIONS_ON_A_REAL_CLUSTER = 6;
const CONCURRENCY = 4;
const PARTITION_CONCURRENCY = 2;
const HANDLER_MS: readonly [number, number] = [5, 15];
/** Give up waiting for the last messages after this long (the demo normally needs ~10 s). */
const RUN_DEADLINE_MS = 45_000;

type Protocol = 'consumer' | 'cooperative' | 'eager';
const PROTOCOL_CONFIG: Record<Protocol, { config: Partial<ConsumerGlobalConfig>; label: string }> =
  {
    consumer: {
      config: { 'group.protocol': 'consumer' },
      label: 'group.protocol=consumer (KIP-848)',
    },
    cooperative: {
      config: { 'partition.assignment.strategy': 'cooperative-sticky' },
      label: 'classic protocol, cooperative-sticky',
    },
    eager: {
      config: { 'partition.assignment.strategy': 'range' },
      label: 'classic protocol, eager (range)',
    },
  };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One consumer of the demo and what the display shows about it. */
interface Member {
  readonly name: string;
  readonly consumer: ReactiveConsumer;
  state: 'starting' | 'running' | 'closing' | 'closed' | 'failed';
  readonly owned: Set<number>;
  readonly revoking: Set<number>;
  processed: number;
  inFlight: number;
  rebalances: number;
  /** Settles when the consumer's pipeline completes (after close) or errors. */
  readonly finished: Promise<void>;
}

async function main(): Promise<number> {
  const display = new Display();
  const c = display.color;
  const protocol = (process.env.DEMO_PROTOCOL ?? 'consumer') as Protocol;
  if (!(protocol in PROTOCOL_CONFIG)) {
    display.plain(`DEMO_PROTOCOL must be consumer, cooperative or eager, got ${protocol}`);
    return 2;
  }
  if (!Number.isInteger(MESSAGES) || MESSAGES < 100 || MESSAGES > 50_000) {
    display.plain(`DEMO_MESSAGES must be an integer between 100 and 50000, got ${MESSAGES}`);
    return 2;
  }
  const startedAt = Date.now();
  const run = randomBytes(3).toString('hex');
  const topic = `demo-orders-${run}`;
  const groupId = `demo-billing-${run}`;

  display.plain(c.bold('reactive-rdkafka demo: rebalances under load, then a count'));
  const cluster = await startCluster(process.env.KAFKA_BROKERS);
  const members: Member[] = [];
  let topicCreated = false;
  const stopOnSignal = (signal: NodeJS.Signals): void => {
    display.event(c.yellow(`${signal}: closing the consumers`));
    void Promise.allSettled(members.map((m) => m.consumer.close())).then(() => process.exit(130));
  };
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);

  try {
    display.plain(
      cluster.embedded
        ? `broker    embedded: librdkafka's mock cluster at ${cluster.bootstrap} (set KAFKA_BROKERS to use a real cluster)`
        : `broker    ${cluster.bootstrap} (KAFKA_BROKERS)`,
    );
    display.plain(`protocol  ${PROTOCOL_CONFIG[protocol].label}`);
    if (cluster.embedded && protocol === 'consumer') {
      display.plain(
        c.dim(
          '          why: the mock cluster refuses commits during an eager rebalance (so every revoke would fail to commit) and stalls classic rebalances; with KIP-848 it revokes incrementally and accepts the commits',
        ),
      );
    } else if (cluster.embedded) {
      display.plain(
        c.yellow(
          '          expect trouble: the mock cluster refuses commits during a classic rebalance (REBALANCE_IN_PROGRESS) and stalls classic rebalances for ~45 s',
        ),
      );
    }
    const partitions = await createTopic(cluster, topic, PARTITIONS_ON_A_REAL_CLUSTER);
    topicCreated = true;
    const producedAt = Date.now();
    await produceNumbered(cluster.producer, topic, MESSAGES);
    const ends = await endOffsets(cluster.producer, topic, partitions);
    display.plain(
      `topic     ${topic}: ${partitions} partitions, ${MESSAGES} keyed messages produced in ${Date.now() - producedAt} ms` +
        (cluster.embedded ? c.dim(' (the mock creates topics with 4 partitions)') : ''),
    );
    display.plain(
      `handlers  ${HANDLER_MS[0]}–${HANDLER_MS[1]} ms each, concurrency ${CONCURRENCY}, partitionConcurrency ${PARTITION_CONCURRENCY}, group ${groupId}`,
    );
    if (cluster.embedded && protocol === 'consumer') {
      display.plain(
        c.dim(
          '          the mock asks members to heartbeat every 3 s, so a partition moves up to 3 s after a member joins or leaves',
        ),
      );
    }
    display.plain();

    /** How many times the handlers saw each message (index = sequence number). */
    const seen = new Uint16Array(MESSAGES);
    let unique = 0;
    const foreign: string[] = [];

    const startMember = (name: string): Member => {
      const logger = pino(
        { level: process.env.DEMO_LOG_LEVEL ?? 'warn', base: { consumer: name } },
        { write: (line: string) => logLine(display, name, line) },
      );
      const consumer = new ReactiveConsumer({
        config: {
          'bootstrap.servers': cluster.bootstrap,
          'group.id': groupId,
          'client.id': `demo-${name}`,
          ...PROTOCOL_CONFIG[protocol].config,
        },
        topicConfig: { 'auto.offset.reset': 'earliest' },
        topics: [topic],
        logger,
      });
      const member: Member = {
        name,
        consumer,
        state: 'starting',
        owned: new Set(),
        revoking: new Set(),
        processed: 0,
        inFlight: 0,
        rebalances: 0,
        finished: new Promise<void>((resolve) => {
          consumer
            .process(
              async (message) => {
                member.inFlight += 1;
                try {
                  await sleep(HANDLER_MS[0] + Math.random() * (HANDLER_MS[1] - HANDLER_MS[0]));
                  const id = Number(message.value?.toString());
                  if (Number.isInteger(id) && id >= 0 && id < MESSAGES) {
                    if (seen[id] === 0) unique += 1;
                    seen[id] = (seen[id] ?? 0) + 1;
                  } else {
                    foreign.push(`${message.partition}@${message.offset}`);
                  }
                  member.processed += 1;
                } finally {
                  member.inFlight -= 1;
                }
              },
              { concurrency: CONCURRENCY, partitionConcurrency: PARTITION_CONCURRENCY },
            )
            .subscribe({
              error: (err: unknown) => {
                member.state = 'failed';
                display.event(c.red(`${name}  consumer failed: ${String(err)}`));
                resolve();
              },
              complete: () => {
                member.state = 'closed';
                resolve();
              },
            });
        }),
      };
      consumer.rebalances$.subscribe((event) => onRebalance(display, member, event));
      members.push(member);
      return member;
    };

    const deadline = Date.now() + RUN_DEADLINE_MS;
    /** Waits until `what()` holds; false when the run's deadline passed first. */
    const until = async (what: () => boolean): Promise<boolean> => {
      while (!what()) {
        if (Date.now() > deadline) return false;
        await sleep(20);
      }
      return true;
    };
    const allSeen = (): boolean => unique === MESSAGES;

    display.event(c.cyan(`A  starts: new ReactiveConsumer(...).process(handler)`));
    const a = startMember('A');
    display.follow({
      lines: (color) => statusLines(members, unique, MESSAGES, color),
      summary: () =>
        `status    ${members.map((m) => `${m.name} ${m.state} [${[...m.owned].sort((x, y) => x - y).join(',')}] ${m.processed} done, ${m.inFlight} running`).join(' | ')} | ${unique}/${MESSAGES} seen`,
    });

    await until(() => unique >= MESSAGES * 0.15 || allSeen());

    display.event(c.cyan(`B  joins the same group while A has ${a.inFlight} handlers running`));
    const b = startMember('B');
    // Let B take part (own partitions, process some) before A leaves.
    await until(() => b.processed >= 150 || allSeen());

    display.event(c.cyan(`A  leaves: close() while ${a.inFlight} of its handlers are running`));
    a.state = 'closing';
    const aClosing = a.consumer.close();

    const complete = await until(allSeen);
    await aClosing;
    display.event(
      complete
        ? c.cyan(`B  closes: every message was seen`)
        : c.red(`B  closes: gave up waiting after ${RUN_DEADLINE_MS / 1000} s`),
    );
    b.state = 'closing';
    await b.consumer.close();
    await Promise.all(members.map((m) => m.finished));
    display.stop();

    // ---- verification -------------------------------------------------------------------------
    const committed = await committedOffsets(cluster.bootstrap, groupId, topic, partitions);
    let lost = 0;
    let twice = 0;
    for (const n of seen) {
      if (n === 0) lost += 1;
      else if (n > 1) twice += n - 1;
    }
    const processed = members.reduce((n, m) => n + m.processed, 0);
    const behind = ends
      .map((end, p) => ({ p, end, committed: committed[p] }))
      .filter((x) => x.end > 0 && x.committed !== x.end);
    const ok = lost === 0 && twice === 0 && behind.length === 0 && foreign.length === 0;
    const n = (v: number, good: boolean): string => (good ? c.green(String(v)) : c.red(String(v)));

    display.plain();
    display.plain(c.bold('summary'));
    display.plain(`  produced           ${MESSAGES}`);
    display.plain(
      `  processed          ${processed}  (${members.map((m) => `${m.name} ${m.processed}`).join(', ')})`,
    );
    display.plain(`  lost               ${n(lost, lost === 0)}`);
    display.plain(`  processed twice    ${n(twice, twice === 0)}`);
    if (foreign.length > 0) display.plain(`  unexpected records ${c.red(foreign.join(' '))}`);
    display.plain(
      behind.length === 0
        ? `  committed offsets  ${c.green('= end offsets')} on all ${partitions} partitions (${ends.join(', ')})`
        : `  committed offsets  ${c.red('behind')}: ${behind.map((x) => `p${x.p} ${String(x.committed ?? 'none')}/${x.end}`).join(', ')}`,
    );
    display.plain(
      `  rebalances         ${members.map((m) => `${m.name} ${m.rebalances}`).join(', ')} revokes completed`,
    );
    display.plain(`  time               ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
    display.plain(ok ? c.green(c.bold('PASS')) : c.red(c.bold('FAIL')));
    return ok ? 0 : 1;
  } finally {
    display.stop();
    await Promise.allSettled(members.map((m) => m.consumer.close()));
    if (topicCreated && !process.env.DEMO_KEEP_TOPIC) {
      await deleteTopic(cluster, topic).catch((err: unknown) =>
        display.plain(c.yellow(`could not delete topic ${topic}: ${String(err)}`)),
      );
    }
    await cluster.close(); // last: with the embedded broker this stops the mock cluster
  }
}

/** Keeps the display's view of a member in step with its rebalance events, and prints them. */
function onRebalance(display: Display, member: Member, event: RebalanceEvent): void {
  const c = display.color;
  const parts = event.partitions.map((tp) => tp.partition).sort((x, y) => x - y);
  const list = parts.length > 0 ? parts.join(',') : 'none';
  const who = `${member.name}  `;
  const gen = c.dim(`gen ${String(event.generation).padStart(2)}`);
  switch (event.type) {
    case 'assigned':
      for (const p of parts) member.owned.add(p);
      if (member.state === 'starting') member.state = 'running';
      display.event(
        `${who}${c.green('assigned ')}  ${gen}  ` +
          (parts.length > 0 ? `partitions ${list}` : c.dim('no new partitions')),
      );
      break;
    case 'revoking':
      for (const p of parts) member.revoking.add(p);
      display.event(
        `${who}${c.yellow('revoking ')}  ${gen}  partitions ${list}  ${c.dim(`(${event.protocol})`)}`,
      );
      break;
    case 'drained':
      display.event(
        `${who}${c.yellow('drained  ')}  ${gen}  ${event.inFlight} in flight at the revoke, drained in ${event.durationMs} ms` +
          (event.timedOut ? c.red(`  TIMED OUT, ${event.stragglers} stragglers`) : ''),
      );
      break;
    case 'committed':
      display.event(
        `${who}${c.yellow('committed')}  ${gen}  ${describeCommits(event.results, c)}  ${c.dim(`in ${event.durationMs} ms`)}`,
      );
      break;
    case 'revoked':
      for (const p of parts) {
        member.owned.delete(p);
        member.revoking.delete(p);
      }
      member.rebalances += 1;
      display.event(
        `${who}${c.yellow('revoked  ')}  ${gen}  partitions ${list} released ${c.dim(`(${event.totalMs} ms from revoking to revoked)`)}`,
      );
      break;
    case 'lost':
      for (const p of parts) {
        member.owned.delete(p);
        member.revoking.delete(p);
      }
      display.event(`${who}${c.red('LOST     ')}  ${gen}  partitions ${list}: ${event.reason}`);
      break;
  }
}

/** `p0@742 p1@773`, plus the reasons of failed or lost partitions, each reason once. */
function describeCommits(results: readonly PartitionCommitResult[], c: Colors): string {
  const reasons = new Set<string>();
  const parts = results.map((r) => {
    switch (r.status) {
      case 'committed':
        return `p${r.partition}@${r.offset}`;
      case 'unchanged':
        return c.dim(`p${r.partition}@${r.offset ?? '-'} (unchanged)`);
      case 'failed':
      case 'lost':
        // librdkafka's messages repeat the offsets; keep the last clause (the broker's reason).
        reasons.add(r.reason.split(': ').pop() ?? r.reason);
        return c.red(`p${r.partition} ${r.status.toUpperCase()}`);
    }
  });
  return parts.join(' ') + (reasons.size > 0 ? c.red(` (${[...reasons].join('; ')})`) : '');
}

function statusLines(members: Member[], unique: number, total: number, c: Colors): string[] {
  const lines = members.map((m) => {
    const owned = [...m.owned].sort((x, y) => x - y);
    // Pad on the plain text, then colour: escape codes have no width.
    const parts = owned
      .map((p) => (m.revoking.has(p) ? c.yellow(`${p}↓`) : `${p} `))
      .join(' ')
      .concat(' '.repeat(Math.max(0, 18 - owned.length * 3)));
    const paintState = m.state === 'running' ? c.green : m.state === 'closed' ? c.dim : c.yellow;
    const state = paintState(m.state.padEnd(9));
    return (
      `  ${c.bold(m.name)}  ${state} owns ${parts}` +
      `processed ${String(m.processed).padStart(5)}   handlers running ${m.inFlight}`
    );
  });
  lines.push(
    `  ${c.bold('all')} ${bar(unique / total)} ${unique}/${total} seen  ${c.dim('(↓ being revoked)')}`,
  );
  return lines;
}

/** Shows the library's log lines (warn and above by default) among the events. */
function logLine(display: Display, name: string, line: string): void {
  try {
    const entry = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
    const level = entry.level ?? 30;
    const label = level >= 50 ? 'error' : level >= 40 ? 'warn ' : level >= 30 ? 'info ' : 'debug';
    const text = `${name}  log ${label}  ${entry.msg ?? ''}${entry.err?.message ? ` (${entry.err.message})` : ''}`;
    display.event(level >= 50 ? display.color.red(text) : display.color.dim(text));
  } catch {
    display.event(`${name}  ${line.trim()}`);
  }
}

main().then(
  (code) => {
    // node-rdkafka's native threads may keep the event loop alive for a while after disconnect.
    process.stdout.write('', () => process.exit(code));
  },
  (err: unknown) => {
    console.error('demo failed:', err);
    process.exit(1);
  },
);
