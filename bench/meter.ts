import { readFileSync } from 'node:fs';

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
  private firstAt: number | undefined;
  private result: ThroughputResult | undefined;
  private resolveDone!: (r: ThroughputResult) => void;
  /** Resolves when `expected` messages have been seen. */
  readonly done = new Promise<ThroughputResult>((resolve) => (this.resolveDone = resolve));

  constructor(
    private readonly contender: string,
    private readonly expected: number,
  ) {}

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
      };
      this.resolveDone(this.result);
    }
  }
}
