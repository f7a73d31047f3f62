#!/usr/bin/env bash
# Packs the library the way a publish or a git install would, from a clean clone (only what git
# tracks: no dist/, no stray files), then checks the tarball:
#   1. its files: the entry points of package.json are in it, nothing else but README, CHANGELOG,
#      LICENSE and package.json; README and CHANGELOG links work off the repository (npm page);
#   2. publint (package.json against the files) and arethetypeswrong (types resolution of `.` and
#      `./testing` for ESM and CJS under node16 and bundler);
#   3. installed into a throwaway project: `import` (ESM), `require` (CJS), one class whichever way,
#      `reactive-rdkafka/testing` starting an embedded cluster, and user code type-checked against
#      the packed types under nodenext and bundler resolution (with examples/ and every TypeScript
#      snippet of README.md and docs/: scripts/extract-snippets.mjs).
# With uncommitted changes to tracked files, the clone gets them too (git stash create: the commit
# `git commit -a` would make), so the check runs before committing; untracked files are never
# packed. TEST_PACKAGE_REF=HEAD packs HEAD as it is.
# The clone and the throwaway project link this repo's node_modules (node-rdkafka takes 90 s to
# compile); nothing is written into this repo.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
passed=0
ok() {
  echo "  ok: $1"
  passed=$((passed + 1))
}

# ---- a clean clone ------------------------------------------------------------------------------
REF="${TEST_PACKAGE_REF:-}"
if [ -z "$REF" ]; then
  REF="$(git -C "$ROOT" stash create)"
  if [ -n "$REF" ]; then
    echo "test-package: packing HEAD plus the uncommitted changes to tracked files ($(git -C "$ROOT" diff HEAD --name-only | wc -l) files)"
  else
    REF=HEAD
  fi
fi
REF="$(git -C "$ROOT" rev-parse "$REF")"
untracked="$(git -C "$ROOT" ls-files --others --exclude-standard)"
if [ -n "$untracked" ]; then
  echo "test-package: untracked files are not packed (git add them if they belong): $(echo "$untracked" | tr '\n' ' ')" >&2
fi
CLONE="$WORK/clone"
git clone --quiet --no-checkout "$ROOT" "$CLONE"
git -C "$CLONE" -c advice.detachedHead=false checkout --quiet "$REF"
ln -s "$ROOT/node_modules" "$CLONE/node_modules"
if [ -e "$CLONE/dist" ]; then
  echo "test-package: dist/ is tracked by git" >&2
  exit 1
fi
echo "test-package: clone of $(git -C "$CLONE" log -1 --format='%h %s' | cut -c1-80)"

# ---- pack (npm runs prepack: the build) ---------------------------------------------------------
TARBALL="$(cd "$CLONE" && npm pack --silent --pack-destination "$WORK" 2>"$WORK/pack.log" | tail -1)" || {
  cat "$WORK/pack.log" >&2
  exit 1
}
TGZ="$WORK/$TARBALL"
tar -tzf "$TGZ" | sort > "$WORK/contents.txt"
echo "test-package: packed $TARBALL ($(du -h "$TGZ" | cut -f1), $(wc -l < "$WORK/contents.txt") files:" \
  "$(grep -c '\.js$' "$WORK/contents.txt") .js/.mjs, $(grep -cE '\.d\.m?ts$' "$WORK/contents.txt") .d.ts/.d.mts)"

# 1. files
if grep -vE '^package/(dist/|README\.md$|CHANGELOG\.md$|LICENSE$|package\.json$)' "$WORK/contents.txt"; then
  echo "test-package: unexpected files in the tarball (above)" >&2
  exit 1
fi
mkdir -p "$WORK/pkg"
tar -xzf "$TGZ" -C "$WORK/pkg" --strip-components=1
node - "$WORK/pkg" <<'JS'
// Every file package.json points at (main, types, each condition of exports) is in the tarball.
const { existsSync, readFileSync } = require('node:fs');
const { join } = require('node:path');
const dir = process.argv[2];
const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
const targets = [pkg.main, pkg.types];
const walk = (v) => (typeof v === 'string' ? targets.push(v) : Object.values(v).forEach(walk));
walk(pkg.exports);
const missing = targets.filter((t) => !existsSync(join(dir, t)));
if (missing.length > 0) {
  console.error(`test-package: the tarball lacks entry points: ${missing.join(', ')}`);
  process.exit(1);
}
for (const f of ['README.md', 'CHANGELOG.md', 'LICENSE']) {
  if (!existsSync(join(dir, f))) throw new Error(`test-package: the tarball lacks ${f}`);
}
// lib/ is not shipped: source maps must carry their sources, declaration maps would point nowhere.
const { readdirSync } = require('node:fs');
const files = readdirSync(join(dir, 'dist'), { recursive: true }).map(String);
const bad = files.filter(
  (f) =>
    f.endsWith('.d.ts.map') ||
    (f.endsWith('.js.map') && !JSON.parse(readFileSync(join(dir, 'dist', f), 'utf8')).sourcesContent),
);
if (bad.length > 0) {
  console.error(`test-package: maps pointing at sources the tarball lacks: ${bad.join(', ')}`);
  process.exit(1);
}
JS
ok "tarball holds the entry points (the $(node -e "const p=require('$WORK/pkg/package.json');let n=0;const w=v=>typeof v==='string'?n++:Object.values(v).forEach(w);w(p.exports);console.log(n)") files of exports), self-contained source maps, nothing unexpected"
node "$ROOT/scripts/check-links.mjs" "$WORK/pkg" "$CLONE"
ok "README/CHANGELOG links are absolute and point at files of the repository"

# 2. publint, arethetypeswrong
"$ROOT/node_modules/.bin/publint" run --strict "$TGZ" | sed 's/^/  publint: /'
ok "publint --strict"
"$ROOT/node_modules/.bin/attw" "$TGZ" --profile node16 --format table-flipped --no-emoji --no-color | sed 's/^/  attw: /'
ok "attw --profile node16 (node16 CJS, node16 ESM, bundler)"

# 3. installed into a throwaway project
APP="$WORK/app"
mkdir -p "$APP/node_modules/@types"
cp -r "$WORK/pkg" "$APP/node_modules/reactive-rdkafka"
# No pino: it is an optional peer dependency, and the package must load and run without it.
for dep in node-rdkafka rxjs typescript bindings file-uri-to-path nan; do
  if [ -e "$ROOT/node_modules/$dep" ]; then ln -s "$ROOT/node_modules/$dep" "$APP/node_modules/$dep"; fi
done
ln -s "$ROOT/node_modules/@types/node" "$APP/node_modules/@types/node"
ln -s "$ROOT/node_modules/@types/mocha" "$APP/node_modules/@types/mocha"
cat > "$APP/package.json" <<'JSON'
{ "name": "app", "private": true, "version": "1.0.0" }
JSON

cat > "$APP/esm.mjs" <<'JS'
import { ConfigError, ErrorCode, ReactiveConsumer } from 'reactive-rdkafka';
import * as ns from 'reactive-rdkafka';
if (ErrorCode.Config !== 'ERR_RKC_CONFIG') throw new Error('ErrorCode missing from ESM entry');
try { new ReactiveConsumer({ config: {}, topics: ['t'] }); throw new Error('no error'); }
catch (e) { if (!(e instanceof ConfigError) || e.key !== 'bootstrap.servers') throw e; }
console.log(`  esm: ${Object.keys(ns).length} exports`);
JS
cat > "$APP/cjs.cjs" <<'JS'
const lib = require('reactive-rdkafka');
const path = require.resolve('reactive-rdkafka');
if (!path.includes('/dist/cjs/')) throw new Error('require resolved ' + path);
if (typeof lib.ReactiveConsumer !== 'function') throw new Error('ReactiveConsumer missing from CJS entry');
for (const internal of ['resolveSettings', 'DEFAULTS', 'resolveProcessOptions', 'resolveTransactionalOptions']) {
  if (internal in lib) throw new Error(`${internal} is internal but exported`);
}
const testing = require('reactive-rdkafka/testing');
if (typeof testing.startTestCluster !== 'function') throw new Error('startTestCluster missing from CJS testing entry');
console.log(`  cjs: ${Object.keys(lib).length} exports, testing ${Object.keys(testing).length}`);
JS
cat > "$APP/both.mjs" <<'JS'
// One copy of every class whichever way it is loaded: instanceof holds across ESM and CJS.
import { createRequire } from 'node:module';
import { ConfigError } from 'reactive-rdkafka';
import { TestCluster } from 'reactive-rdkafka/testing';
const require = createRequire(import.meta.url);
if (require('reactive-rdkafka').ConfigError !== ConfigError) throw new Error('ESM and CJS entries load different classes');
if (require('reactive-rdkafka/testing').TestCluster !== TestCluster) throw new Error('ESM and CJS testing entries differ');
console.log('  dual: one copy of each class');
JS
cat > "$APP/testing.mjs" <<'JS'
// The testing kit from the tarball: an embedded cluster, a topic, records, offsets.
import { startTestCluster } from 'reactive-rdkafka/testing';
const cluster = await startTestCluster();
try {
  const topic = await cluster.createTopic();
  const landed = await cluster.produce(topic.name, ['a', 'b', 'c']);
  const ends = await cluster.endOffsets(topic.name);
  const total = Object.values(ends).reduce((a, b) => a + b, 0);
  if (landed.length !== 3 || total !== 3) throw new Error(`produced 3, end offsets ${JSON.stringify(ends)}`);
  console.log(`  testing: embedded cluster at ${cluster.bootstrapServers}, ${topic.partitions} partitions, 3 records`);
} finally {
  await cluster.close();
}
JS
(cd "$APP" && node esm.mjs && node cjs.cjs && node both.mjs && node testing.mjs)
ok "import, require, one class either way, reactive-rdkafka/testing runs (without pino installed)"

# The examples log through pino (a user's choice): install it for the type checks below.
for dep in pino $(node -e "console.log(Object.keys(require('$ROOT/node_modules/pino/package.json').dependencies).join(' '))"); do
  if [ ! -e "$APP/node_modules/$dep" ]; then
    mkdir -p "$(dirname "$APP/node_modules/$dep")"
    ln -s "$ROOT/node_modules/$dep" "$APP/node_modules/$dep"
  fi
done

# Type-check user code against the packed types, as an ES module and as CommonJS, under nodenext
# and under bundler resolution.
mkdir -p "$APP/src"
cat > "$APP/src/use.mts" <<'TS'
import { ReactiveConsumer, ConfigError, type ReactiveConsumerOptions, type ConsumerSettings } from 'reactive-rdkafka';
import { startTestCluster, type TestCluster } from 'reactive-rdkafka/testing';
const options: ReactiveConsumerOptions = {
  config: { 'bootstrap.servers': '127.0.0.1:9092', 'group.id': 'g' },
  topics: ['orders'],
};
export const settings: ConsumerSettings = new ReactiveConsumer(options).settings;
export const isConfigError = (e: unknown): e is ConfigError => e instanceof ConfigError;
export const start: () => Promise<TestCluster> = () => startTestCluster();
TS
cat > "$APP/src/use.cts" <<'TS'
import lib = require('reactive-rdkafka');
import testing = require('reactive-rdkafka/testing');
export const make = (o: lib.ReactiveConsumerOptions): lib.ConsumerSettings => new lib.ReactiveConsumer(o).settings;
export const start = (): Promise<testing.TestCluster> => testing.startTestCluster();
TS
cat > "$APP/src/internal.mts" <<'TS'
// What is internal stays out of the published types.
import { ReactiveConsumer } from 'reactive-rdkafka';
import type * as lib from 'reactive-rdkafka';
// @ts-expect-error the consumer's test seams are not public
export type Seams = lib.ReactiveConsumerInternals;
// @ts-expect-error nor is the constructor overload that takes them
export const withSeams = (o: lib.ReactiveConsumerOptions) => new ReactiveConsumer(o, {});
TS
if grep -rl '@internal' "$WORK/pkg/dist" --include='*.d.ts' --include='*.d.mts'; then
  echo "test-package: declarations marked @internal were published (above)" >&2
  exit 1
fi
cp -r "$ROOT/examples" "$APP/src/examples"
# Every TypeScript snippet of README.md and docs/ (as committed), one module each: a snippet that
# does not compile as written fails here. The packages the snippets import besides the library.
node "$ROOT/scripts/extract-snippets.mjs" "$CLONE" "$APP/src/snippets" | sed 's/^/  snippets: /'
ln -s "$ROOT/node_modules/@opentelemetry" "$APP/node_modules/@opentelemetry"
for dep in prom-client $(node -e "console.log(Object.keys(require('$ROOT/node_modules/prom-client/package.json').dependencies ?? {}).join(' '))"); do
  if [ ! -e "$APP/node_modules/$dep" ]; then
    mkdir -p "$(dirname "$APP/node_modules/$dep")"
    ln -s "$ROOT/node_modules/$dep" "$APP/node_modules/$dep"
  fi
done
for resolution in nodenext bundler; do
  module=$([ "$resolution" = bundler ] && echo esnext || echo nodenext)
  cat > "$APP/tsconfig.$resolution.json" <<JSON
{
  "compilerOptions": {
    "module": "$module", "moduleResolution": "$resolution", "target": "ES2022", "strict": true,
    "lib": ["ES2023", "esnext.disposable"], "noEmit": true, "skipLibCheck": false, "types": ["node", "mocha"]
  },
  "include": ["src/**/*"], "exclude": [$([ "$resolution" = bundler ] && echo "\"src/**/*.cts\"")]
}
JSON
  (cd "$APP" && node "$ROOT/node_modules/typescript/bin/tsc" -p "tsconfig.$resolution.json")
  ok "types check under $resolution (skipLibCheck off, examples/ and the docs' snippets included)"
done
echo "test-package: $passed passed, 0 failed"
