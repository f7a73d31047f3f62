/**
 * Terminal output of the demo. Events (rebalance phases, demo steps, warnings) are printed once and
 * scroll; below them a status block (one line per consumer and a total) is redrawn in place when
 * stdout is a terminal. Without a terminal (CI, a pipe) there are no escape codes: events are plain
 * lines and the status is printed as one line per second.
 */

const ESC = '\u001b[';

export interface StatusSource {
  /** The lines of the status block, redrawn in place. */
  lines(color: Colors): string[];
  /** One line summarising the status, for non-terminal output. */
  summary(): string;
}

export interface Colors {
  bold(s: string): string;
  dim(s: string): string;
  red(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  cyan(s: string): string;
}

const paint =
  (on: boolean, code: string) =>
  (s: string): string =>
    on ? `${ESC}${code}m${s}${ESC}0m` : s;

export class Display {
  readonly live: boolean;
  readonly color: Colors;
  private drawn = 0;
  private timer: NodeJS.Timeout | undefined;
  private lastSummary = '';
  private readonly startedAt = Date.now();

  constructor(
    private readonly out: NodeJS.WriteStream = process.stdout,
    private source?: StatusSource,
  ) {
    this.live = out.isTTY === true && !process.env.CI && process.env.TERM !== 'dumb';
    const on = this.live && !process.env.NO_COLOR;
    this.color = {
      bold: paint(on, '1'),
      dim: paint(on, '2'),
      red: paint(on, '31'),
      green: paint(on, '32'),
      yellow: paint(on, '33'),
      cyan: paint(on, '36'),
    };
  }

  /** Seconds since the demo started, as a fixed-width prefix. */
  stamp(): string {
    return this.color.dim(`[${((Date.now() - this.startedAt) / 1000).toFixed(2).padStart(6)}s]`);
  }

  /** Starts showing `source`: redrawn every 100 ms on a terminal, else a line per second. */
  follow(source: StatusSource): void {
    this.source = source;
    this.stopTimer();
    this.timer = setInterval(() => this.tick(), this.live ? 100 : 1000);
    this.timer.unref();
    this.tick();
  }

  /** Prints a line that stays (above the status block). */
  event(line: string): void {
    this.clear();
    this.out.write(`${this.stamp()} ${line}\n`);
    this.draw();
  }

  /** Prints a line without a time stamp (headers and the summary). */
  plain(line = ''): void {
    this.clear();
    this.out.write(`${line}\n`);
    this.draw();
  }

  /** Draws the status a last time and stops redrawing; the block stays on screen. */
  stop(): void {
    this.stopTimer();
    if (this.live) {
      this.clear();
      this.draw();
      this.drawn = 0; // leave it in place
    } else {
      this.printSummary(true);
    }
    this.source = undefined;
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    if (this.live) {
      this.clear();
      this.draw();
    } else {
      this.printSummary(false);
    }
  }

  private printSummary(force: boolean): void {
    if (!this.source) return;
    const summary = this.source.summary();
    if (!force && summary === this.lastSummary) return;
    this.lastSummary = summary;
    this.out.write(`${this.stamp()} ${summary}\n`);
  }

  private clear(): void {
    if (!this.live || this.drawn === 0) return;
    // To the start of the first status line, then erase to the end of the screen.
    this.out.write(`${ESC}${this.drawn}F${ESC}J`);
    this.drawn = 0;
  }

  private draw(): void {
    if (!this.live || !this.source) return;
    const width = Math.max(40, (this.out.columns || 100) - 1);
    const lines = this.source.lines(this.color);
    // Lines wider than the terminal would wrap and break the cursor arithmetic: cut them.
    this.out.write(lines.map((l) => truncate(l, width)).join('\n') + '\n');
    this.drawn = lines.length;
  }
}

/** Cuts a string with ANSI colour codes to `width` visible characters. */
function truncate(s: string, width: number): string {
  let visible = 0;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\u001b') {
      const end = s.indexOf('m', i);
      if (end > 0) {
        out += s.slice(i, end + 1);
        i = end;
        continue;
      }
    }
    if (visible >= width) continue;
    out += s[i];
    visible += 1;
  }
  return out;
}

/** A fixed-width bar of `fraction` (0..1). */
export function bar(fraction: number, width = 24): string {
  const f = Math.min(1, Math.max(0, fraction));
  const full = Math.round(f * width);
  return '█'.repeat(full) + '░'.repeat(width - full);
}
