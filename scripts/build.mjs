// Builds the CommonJS output with tsc, then a thin ESM wrapper over it (one copy of every class,
// so `instanceof` holds whichever way the package is loaded).
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')],
  {
    stdio: 'inherit',
  },
);
writeFileSync(join(dist, 'cjs/package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');

const require = createRequire(import.meta.url);
const names = Object.keys(require(join(dist, 'cjs/index.js'))).filter(
  (n) => n !== 'default' && n !== '__esModule',
);
mkdirSync(join(dist, 'esm'), { recursive: true });
writeFileSync(
  join(dist, 'esm/index.mjs'),
  `import lib from '../cjs/index.js';\n\nexport const {\n${names.map((n) => `  ${n},`).join('\n')}\n} = lib;\n`,
);
writeFileSync(join(dist, 'esm/index.d.mts'), `export * from '../cjs/index.js';\n`);
writeFileSync(join(dist, 'esm/package.json'), JSON.stringify({ type: 'module' }) + '\n');
console.log(`built dist/cjs and dist/esm (${names.length} exports)`);
