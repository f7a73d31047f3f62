#!/usr/bin/env node
/**
 * Extracts every TypeScript snippet (```ts and ```typescript fences) of README.md and docs/*.md
 * into OUT/<doc>-<n>.mts, one ES module each, so that scripts/test-package.sh type-checks them
 * against the packed library: a snippet that does not compile as written fails `make test`.
 * A snippet may declare what it assumes (`declare const consumer: ReactiveConsumer;`): users see
 * the assumption, and the check holds the rest to it. A fence written ```ts snippet-skip (shown
 * as TypeScript) is not checked: for fragments that cannot stand alone (a line of a config).
 *
 *   node scripts/extract-snippets.mjs ROOT OUT   → prints how many snippets it wrote
 */
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const [root, out] = process.argv.slice(2);
if (!root || !out) throw new Error('usage: extract-snippets.mjs ROOT OUT');
mkdirSync(out, { recursive: true });
const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
let written = 0;
let skipped = 0;
for (const doc of docs) {
  const lines = readFileSync(join(root, doc), 'utf8').split('\n');
  let n = 0;
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*```(ts|typescript)(\s+snippet-skip)?\s*$/.exec(lines[i]);
    if (!open) continue;
    const body = [];
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j])) body.push(lines[j++]);
    i = j;
    n += 1;
    if (open[2]) {
      skipped += 1;
      continue;
    }
    const name = `${basename(doc, '.md').toLowerCase()}-${n}.mts`;
    // Where it came from, for the compiler's messages; `export {}` makes each one a module.
    writeFileSync(
      join(out, name),
      `// ${doc}, snippet ${n} (line ${i - body.length})\n${body.join('\n')}\nexport {};\n`,
    );
    written += 1;
  }
}
console.log(`${written} snippets extracted (${skipped} marked snippet-skip)`);
