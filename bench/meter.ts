import { readFileSync, readdirSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';

/**
 * Counts what a throughput contender consumed and when, inside its child process: the time of the
 * first and of the last expected message, bytes of the values, and the process's CPU time and peak
 * RSS when the last one arrived.
 */
export interface ThroughputResult {
  contender: string;
  messages: number;
  bytes: number;
  /** Consumer created → first message, in ms (connect, group join, first fetch). */
  firstMessageMs: number;
  /** First → last expected message, in ms: the window msg/s is computed over. */
  elapsedMs: number;
  /**
   * CPU time of the child (user + system) from consumer creation to the last message, in ms (the
   * client library's modules are loaded before the Meter is created: see ContenderInfo.load).
   */
  cpuMs: number;
  /** Peak resident set size of the child process, in bytes (see peakRss). */
  peakRssBytes: number;
  /**
   * The same CPU time split by thread (Linux only, else absent), in ms: the main thread (where the
   * JavaScript and the binding's message conversion run), librdkafka's own threads (`rdk:*`:
   * fetching, decompression, the broker protocol) and every other thread (libuv's pool, where
   * node-rdkafka's consume(n) waits and copies, and V8's GC and compiler helpers).
   */
  cpuByThreadMs?: ThreadCpu;
  /** Time the main thread spent in garbage collection (V8's `gc` performance entries), in ms. */
  gcMs?: number;
}

export interface ThreadCpu {
  main: number;
  librdkafka: number;
  other: number;
}

/** Linux: user + system CPU ms of each live thread of this process, by thread id, with its name. */
function threadTimes(): Map<string, { name: string; ms: number }> | undefined {
  const times = new Map<string, { name: string; ms: number }>();
  try {
    const ticksPerMs = 100 / 1000; // USER_HZ is 100 on Linux
    for (const tid of readdirSync('/proc/self/task')) {
      let stat: string;
      try {
        stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      } catch {
        continue; // the thread ended meanwhile
      }
      const open = stat.indexOf('(');
      const close = stat.lastIndexOf(')');
      const fields = stat.slice(close + 2).split(' ');
      // fields[0] is field 3 (state): utime is field 14, stime field 15.
      const ms = (Number(fields[11]) + Number(fields[12])) / ticksPerMs;
      times.set(tid, { name: stat.slice(open + 1, close), ms });
    }
  } catch {
    return undefined;
  }
  return times;
}

/** CPU spent by each kind of thread between two {@link threadTimes} readings. */
function threadCpuSince(
  before: Map<string, { name: string; ms: number }> | undefined,
): ThreadCpu | undefined {
  const after = threadTimes();
  if (!before || !after) return undefined;
  const split: ThreadCpu = { main: 0, librdkafka: 0, other: 0 };
  const self = String(process.pid);
  for (const [tid, t] of after) {
    const ms = t.ms - (before.get(tid)?.ms ?? 0);
    if (tid === self) split.main += ms;
    else if (t.name.startsWith('rdk:')) split.librdkafka += ms;
    else split.other += ms;
  }
  return split;
}

/**
 * This process's peak RSS in bytes: Linux's VmHWM. Not `process.resourceUsage().maxRSS`: Linux
 * carries ru_maxrss over fork + exec, so a child would report its parent's peak when that is higher.
 */
export function peakRss(): number {
  try {
    const kb = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    if (kb) return Number(kb) * 1024;
  } catch {
    // not Linux
  }
  return process.resourceUsage().maxRSS * 1024;
}

export class Meter {
  count = 0;
  bytes = 0;
  private readonly createdAt = performance.now();
  private readonly cpuAtCreate = process.cpuUsage();
  private readonly threadsAtCreate = threadTimes();
  private gcMs = 0;
  private readonly gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) this.gcMs += entry.duration;
  });
  private firstAt: number | undefined;
  private result: ThroughputResult | undefined;
  private resolveDone!: (r: ThroughputResult) => void;
  /** Resolves when `expected` messages have been seen. */
  readonly done = new Promise<ThroughputResult>((resolve) => (this.resolveDone = resolve));

  constructor(
    private readonly contender: string,
    private readonly expected: number,
  ) {
    this.gcObserver.observe({ entryTypes: ['gc'] });
  }

  /** Records `n` messages carrying `bytes` value bytes. */
  add(n: number, bytes: number): void {
    if (this.result) return;
    if (this.firstAt === undefined) this.firstAt = performance.now();
    this.count += n;
    this.bytes += bytes;
    if (this.count >= this.expected) {
      const now = performance.now();
      const cpu = process.cpuUsage(this.cpuAtCreate);
      this.result = {
        contender: this.contender,
        messages: this.count,
        bytes: this.bytes,
        firstMessageMs: this.firstAt - this.createdAt,
        elapsedMs: now - this.firstAt,
        cpuMs: (cpu.user + cpu.system) / 1000,
        peakRssBytes: peakRss(),
        cpuByThreadMs: threadCpuSince(this.threadsAtCreate),
        gcMs: this.gcMs,
      };
      this.gcObserver.disconnect();
      this.resolveDone(this.result);
    }
  }
}
