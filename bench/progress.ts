/**
 * The progress line: rewritten in place on a terminal, otherwise printed when the step changes
 * and at most every 5 s within a step (so CI logs stay short).
 */
import { formatDuration } from './stats';

export class Progress {
  private step = 0;
  private stepText = '';
  private lastPrinted = 0;
  private readonly startedAt = Date.now();
  private readonly tty = Boolean(process.stdout.isTTY);

  constructor(private readonly totalSteps: number) {}

  /** Starts the next step. */
  next(text: string): void {
    this.step += 1;
    this.stepText = text;
    this.print('', true);
  }

  /** Updates the detail of the current step. */
  detail(text: string): void {
    this.print(text, false);
  }

  /** Prints a line above the progress line. */
  log(text: string): void {
    if (this.tty) process.stdout.write('\r\x1b[K');
    console.log(text);
  }

  done(): void {
    if (this.tty) process.stdout.write('\r\x1b[K');
  }

  private print(detail: string, force: boolean): void {
    const elapsed = formatDuration(Date.now() - this.startedAt);
    const line = `[bench ${this.step}/${this.totalSteps} ${elapsed}] ${this.stepText}${detail ? `: ${detail}` : ''}`;
    if (this.tty) {
      const width = process.stdout.columns ?? 120;
      process.stdout.write(`\r\x1b[K${line.slice(0, width - 1)}`);
      return;
    }
    const now = Date.now();
    if (force || now - this.lastPrinted >= 5000) {
      this.lastPrinted = now;
      console.log(line);
    }
  }
}
