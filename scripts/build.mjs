// Builds the CommonJS output with tsc, then a thin ESM wrapper over each entry point (one copy of
// every class, so `instanceof` holds whichever way the package is loaded).
//
//   node scripts/build.mjs             always builds (make build, npm's prepack)
//   node scripts/build.mjs --if-stale  builds unless dist/ was built from the same inputs (npm's
//                                      prepare, which npm runs right after prepack when packing)
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const hashFile = join(dist, '.build-hash');

/** The package's entry points: subpath → the CommonJS file tsc emits for it (under dist/cjs). */
const ENTRIES = [
  { subpath: '.', cjs: 'index.js', esm: 'index' },
  { subpath: './testing', cjs: 'testing/index.js', esm: 'testing' },
];

function inputsHash() {
  const files = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) files.push(p);
    }
  };
  walk(join(root, 'lib'));
  files.push(
    join(root, 'tsconfig.json'),
    join(root, 'tsconfig.build.json'),
    fileURLToPath(import.meta.url),
  );
  const h = createHash('sha256');
  for (const f of files.sort()) h.update(relative(root, f)).update('\0').update(readFileSync(f));
  return h.digest('hex');
}

const hash = inputsHash();
if (process.argv.includes('--if-stale') && existsSync(hashFile)) {
  if (readFileSync(hashFile, 'utf8').trim() === hash) {
    console.log('build: dist/ is up to date with lib/ (skipped)');
    process.exit(0);
  }
}

rmSync(dist, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')],
  { stdio: 'inherit' },
);
writeFileSync(join(dist, 'cjs/package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');
mkdirSync(join(dist, 'esm'), { recursive: true });
writeFileSync(join(dist, 'esm/package.json'), JSON.stringify({ type: 'module' }) + '\n');

const require = createRequire(import.meta.url);
const counts = [];
for (const entry of ENTRIES) {
  const names = Object.keys(require(join(dist, 'cjs', entry.cjs))).filter(
    (n) => n !== 'default' && n !== '__esModule',
  );
  const from = `../cjs/${entry.cjs}`;
  writeFileSync(
    join(dist, 'esm', `${entry.esm}.mjs`),
    `import lib from '${from}';\n\nexport const {\n${names.map((n) => `  ${n},`).join('\n')}\n} = lib;\n`,
  );
  writeFileSync(join(dist, 'esm', `${entry.esm}.d.mts`), `export * from '${from}';\n`);
  counts.push(`${entry.subpath} ${names.length}`);
}
const pruned = pruneDeclarations(
  ENTRIES.map((e) => join(dist, 'cjs', e.cjs.replace(/\.js$/, '.d.ts'))),
);
writeFileSync(hashFile, hash + '\n');
console.log(
  `built dist/cjs and dist/esm (exports: ${counts.join(', ')}; ${pruned} unreachable declaration files removed)`,
);

/**
 * Deletes the .d.ts files no entry point's declarations reach (the internals' types): the
 * published declarations are the public API and what it names, nothing else.
 */
function pruneDeclarations(entryFiles) {
  const reachable = new Set();
  const queue = [...entryFiles];
  while (queue.length > 0) {
    const file = queue.pop();
    if (reachable.has(file)) continue;
    reachable.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:from\s+|import\()['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const base = join(dirname(file), m[1].replace(/\.js$/, ''));
      const target = [`${base}.d.ts`, join(base, 'index.d.ts')].find((f) => existsSync(f));
      if (target === undefined) throw new Error(`${relative(root, file)}: cannot resolve ${m[1]}`);
      queue.push(target);
    }
  }
  let removed = 0;
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.d.ts') && !reachable.has(p)) {
        rmSync(p);
        rmSync(`${p}.map`, { force: true });
        removed += 1;
      }
    }
  };
  walk(join(dist, 'cjs'));
  return removed;
}
