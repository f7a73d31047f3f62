/**
 * Per-test artefact folders under integration/.test_output/<test-name>/ (or under TEST_OUTPUT_DIR:
 * each make target gives its suite its own, so that suites running at once never remove each
 * other's evidence), removed when the test passed and kept as evidence when it failed.
 */
import { mkdirSync, rmSync, createWriteStream } from 'node:fs';
import type { WriteStream } from 'node:fs';
import { join, resolve } from 'node:path';
import pino from 'pino';
import type { Logger } from 'pino';

export const OUTPUT_ROOT =
  process.env.TEST_OUTPUT_DIR === undefined || process.env.TEST_OUTPUT_DIR === ''
    ? join(__dirname, '..', '.test_output')
    : resolve(process.env.TEST_OUTPUT_DIR);

export interface TestOutput {
  /** The current test's folder (created on first use). */
  dir(): string;
  /** A pino logger writing JSON lines to `<dir>/<name>.log`. */
  logger(name: string): Logger;
}

const slug = (title: string): string =>
  title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 100);

/** Registers hooks in the enclosing `describe` and returns accessors for the current test. */
export function useTestOutput(): TestOutput {
  let current: string | undefined;
  let streams: WriteStream[] = [];
  beforeEach(function () {
    current = join(OUTPUT_ROOT, slug(this.currentTest?.fullTitle() ?? 'unknown'));
    rmSync(current, { recursive: true, force: true });
  });
  afterEach(async function () {
    await Promise.all(streams.map((s) => new Promise((r) => s.end(r))));
    streams = [];
    if (current && this.currentTest?.state === 'passed')
      rmSync(current, { recursive: true, force: true });
    else if (current) console.log(`    artefacts kept in ${current}`);
  });
  const dir = (): string => {
    if (!current) throw new Error('useTestOutput: no current test');
    mkdirSync(current, { recursive: true });
    return current;
  };
  return {
    dir,
    logger(name) {
      const stream = createWriteStream(join(dir(), `${name}.log`), { flags: 'a' });
      streams.push(stream);
      return pino({ level: process.env.LOG_LEVEL ?? 'debug', base: { name } }, stream);
    },
  };
}
