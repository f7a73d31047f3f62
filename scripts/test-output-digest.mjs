#!/usr/bin/env node
// After a failed integration run: a short digest of the evidence each failed test kept
// (integration/.test_output/<test>/<member>.log, pino JSON lines), printed last so that a CI log
// cut to its tail still says what the consumers did. Per failed test: its folder, then per member
// log the lifecycle (connected, rebalances, closing, closed) and its last warnings and errors.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = process.argv[2] ?? 'integration/.test_output';
const MAX_LINES = Number(process.env.DIGEST_MAX_LINES ?? 14);
const LIFECYCLE =
  /^(connected|connecting|closing|closed|assigned|revoking|committed|drained|the pipeline was unsubscribed)/;

const out = [];
const dirs = existsSync(root)
  ? readdirSync(root, { withFileTypes: true }).filter((d) => d.isDirectory())
  : [];
for (const dir of dirs) {
  out.push(`kept: ${dir.name}`);
  for (const file of readdirSync(join(root, dir.name)).filter((f) => f.endsWith('.log'))) {
    const entries = [];
    for (const line of readFileSync(join(root, dir.name, file), 'utf8').split('\n')) {
      if (!line) continue;
      try {
        entries.push(JSON.parse(line));
      } catch {
        // not a JSON line: skip it
      }
    }
    if (entries.length === 0) {
      out.push(`  ${file}: empty`);
      continue;
    }
    const t0 = entries[0].time ?? 0;
    const story = entries
      .filter((e) => (e.level ?? 0) >= 40 || LIFECYCLE.test(e.msg ?? ''))
      .map((e) => {
        const extra = e.err?.message ? ` (${e.err.message})` : '';
        return `+${(e.time ?? t0) - t0}ms ${e.level >= 50 ? 'ERROR' : e.level >= 40 ? 'WARN' : ''} ${e.msg}${extra}`
          .replace(/\s+/g, ' ')
          .slice(0, 150);
      });
    out.push(`  ${file}: ${entries.length} lines; ${story.length} notable, the last:`);
    for (const s of story.slice(-5)) out.push(`    ${s}`);
  }
}
if (out.length === 0) out.push('no test output kept');
console.log('--- evidence kept by the failed tests (digest) ---');
console.log(out.slice(-MAX_LINES).join('\n'));
