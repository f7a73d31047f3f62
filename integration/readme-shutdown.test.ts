import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildSync } from 'esbuild';
import {
  BROKERS,
  committedOffsets,
  createTopic,
  produce,
  uniqueName,
  withTimeout,
} from './helpers/kafka';

const ROOT = join(__dirname, '..');

/** The README's "Usage" snippet, as a user copies it: the one that shuts down on SIGTERM. */
function usageSnippet(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Usage'));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  assert.ok(match, 'the README has a Usage snippet');
  const code = match[1] as string;
  assert.match(code, /process\.on\('SIGTERM', \(\) => void consumer\.close\(\)\);/);
  return code;
}

/**
 * The README promises that its Usage snippet, on SIGTERM, closes the consumer and lets the process
 * exit by itself (nothing left holding the event loop: no timer, no native thread, no
 * `process.exit()` needed). Run it as written against the real broker — only the broker address,
 * topic and group changed — and check that it exits 0 after SIGTERM, with everything committed.
 */
describe('README: the Usage snippet exits on SIGTERM', function () {
  this.timeout(120_000);

  it('consumes, closes on SIGTERM, commits what it processed and the process exits by itself', async () => {
    const topic = uniqueName('readme-usage');
    const group = uniqueName('readme-usage-group');
    await createTopic(topic, 2);
    const records = Array.from({ length: 20 }, (_, i) => ({
      key: `k${i}`,
      value: JSON.stringify({ order: i }),
    }));
    await produce(topic, records);
    const code = usageSnippet()
      .replace("'localhost:9092'", JSON.stringify(BROKERS))
      .replace("'group.id': 'billing'", `'group.id': ${JSON.stringify(group)}`)
      .replace("topics: ['orders']", `topics: [${JSON.stringify(topic)}]`);
    assert.ok(code.includes(group) && code.includes(topic), 'the snippet took the test names');
    const dir = join(ROOT, 'integration', '.test_output', 'readme-usage', String(process.pid));
    mkdirSync(dir, { recursive: true });
    try {
      const source = join(dir, 'usage.ts');
      writeFileSync(source, code);
      const bundle = join(dir, 'usage.cjs');
      buildSync({
        entryPoints: [source],
        outfile: bundle,
        bundle: true,
        platform: 'node',
        format: 'cjs',
        target: 'node20',
        packages: 'external',
        alias: { 'reactive-rdkafka': join(ROOT, 'lib', 'index.ts') },
        logLevel: 'warning',
      });
      const child = spawn(process.execPath, [bundle], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      try {
        // It logs each rebalance event (`assigned 1 [...]`) and pino's JSON lines.
        const deadline = Date.now() + 60_000;
        while (!/^assigned /m.test(out)) {
          if (Date.now() > deadline) throw new Error(`no assignment within 60 s:\n${out}`);
          if (child.exitCode !== null) throw new Error(`exited early (${child.exitCode}):\n${out}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        const committed = async () => (await committedOffsets(group, topic, 2)).map((o) => o ?? 0);
        const deadlineAll = Date.now() + 60_000;
        while ((await committed()).reduce((a, b) => a + b, 0) < records.length) {
          if (Date.now() > deadlineAll) throw new Error(`not all committed within 60 s:\n${out}`);
          await new Promise((r) => setTimeout(r, 200));
        }
        const sentAt = Date.now();
        child.kill('SIGTERM');
        // close() is bounded by closeTimeoutMs (25 s); the process must then exit on its own.
        const exitCode = await withTimeout(
          exited,
          40_000,
          `the snippet to exit after SIGTERM:\n${out}`,
        );
        console.log(`      exited ${exitCode} ${Date.now() - sentAt} ms after SIGTERM`);
        assert.equal(exitCode, 0, out);
        assert.match(out, /"msg":"closed"/, 'close() ran to its end');
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
