/**
 * Worker processes start from one JavaScript bundle per worker source (esbuild; the library is
 * bundled from lib/ as tsx would load it, packages stay external) instead of `node --import tsx`:
 * the chaos suites start hundreds of workers, and tsx's loader cost about 0.5 s of CPU per start on
 * a machine whose two cores the suites share.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { buildSync } from 'esbuild';

const built = new Map<string, string>();

/** The bundle of the worker at `source` (a .ts path), built once per test process. */
export function workerBundle(source: string): string {
  const cached = built.get(source);
  if (cached !== undefined) return cached;
  // Inside the repository, so that the bundle's require() of a package finds its node_modules.
  const dir = join(__dirname, '..', '.test_output', 'worker-bundles', String(process.pid));
  if (built.size === 0) {
    mkdirSync(dir, { recursive: true });
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  const name = relative(join(__dirname, '..'), source).replace(/[\\/]/g, '-');
  const outfile = join(dir, `${basename(name, '.ts')}.cjs`);
  buildSync({
    entryPoints: [source],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    packages: 'external',
    sourcemap: 'inline',
    logLevel: 'warning',
  });
  built.set(source, outfile);
  return outfile;
}

/** The argv of `node` for a worker: its bundle, with source maps for stack traces. */
export function workerArgs(source: string): string[] {
  return ['--enable-source-maps', workerBundle(source)];
}
