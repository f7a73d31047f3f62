// Fails when a source file under lib/ grows past MAX_LINES: a file that long holds more than one
// job (docs/internals.md maps each file to its one job). Run by `make lint`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const MAX_LINES = 400;

function* files(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else if (path.endsWith('.ts')) yield path;
  }
}

const tooLong = [];
for (const path of files('lib')) {
  const lines = readFileSync(path, 'utf8').split('\n').length - 1;
  if (lines > MAX_LINES) tooLong.push(`${path}: ${lines} lines`);
}
if (tooLong.length > 0) {
  console.error(`Files under lib/ longer than ${MAX_LINES} lines (split them by job):`);
  for (const line of tooLong) console.error(`  ${line}`);
  process.exit(1);
}
console.log(`check-file-sizes: every file under lib/ has at most ${MAX_LINES} lines`);
