#!/usr/bin/env bash
# Packs the library, installs the tarball into a throwaway project and checks that it loads with
# `import` (ESM) and `require` (CJS), and that its types check from both module systems.
# The dependencies are linked from this repo's node_modules (node-rdkafka takes 90 s to compile).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

cd "$ROOT"
TARBALL="$(npm pack --silent --pack-destination "$WORK" | tail -1)"
echo "test-package: packed $TARBALL ($(du -h "$WORK/$TARBALL" | cut -f1))"
tar -tzf "$WORK/$TARBALL" | sed 's/^/  /' > "$WORK/contents.txt"
if grep -vE '^  package/(dist/|README\.md$|LICENSE$|package\.json$)' "$WORK/contents.txt"; then
  echo "test-package: unexpected files in the tarball (above)" >&2
  exit 1
fi

APP="$WORK/app"
mkdir -p "$APP/node_modules/reactive-rdkafka" "$APP/node_modules/@types"
tar -xzf "$WORK/$TARBALL" -C "$APP/node_modules/reactive-rdkafka" --strip-components=1
for dep in node-rdkafka pino rxjs typescript bindings file-uri-to-path nan; do
  if [ -e "$ROOT/node_modules/$dep" ]; then ln -s "$ROOT/node_modules/$dep" "$APP/node_modules/$dep"; fi
done
# pino's own dependencies
for dep in $(node -e "console.log(Object.keys(require('$ROOT/node_modules/pino/package.json').dependencies).join(' '))"); do
  if [ ! -e "$APP/node_modules/$dep" ]; then
    mkdir -p "$(dirname "$APP/node_modules/$dep")"
    ln -s "$ROOT/node_modules/$dep" "$APP/node_modules/$dep"
  fi
done
ln -s "$ROOT/node_modules/@types/node" "$APP/node_modules/@types/node"
cat > "$APP/package.json" <<'JSON'
{ "name": "app", "private": true, "version": "1.0.0" }
JSON

cat > "$APP/esm.mjs" <<'JS'
import { ConfigError, ErrorCode, resolveSettings } from 'reactive-rdkafka';
import * as ns from 'reactive-rdkafka';
if (ErrorCode.Config !== 'ERR_RKC_CONFIG') throw new Error('ErrorCode missing from ESM entry');
try { resolveSettings({ config: {}, topics: ['t'] }); throw new Error('no error'); }
catch (e) { if (!(e instanceof ConfigError) || e.key !== 'bootstrap.servers') throw e; }
console.log(`esm: ok (${Object.keys(ns).length} exports)`);
JS
cat > "$APP/cjs.cjs" <<'JS'
const lib = require('reactive-rdkafka');
const esmPath = require.resolve('reactive-rdkafka');
if (!esmPath.includes('/dist/cjs/')) throw new Error('require resolved ' + esmPath);
if (typeof lib.resolveSettings !== 'function') throw new Error('resolveSettings missing from CJS entry');
console.log(`cjs: ok (${Object.keys(lib).length} exports)`);
JS
cat > "$APP/both.mjs" <<'JS'
// One copy of every class whichever way it is loaded: instanceof holds across ESM and CJS.
import { createRequire } from 'node:module';
import { ConfigError } from 'reactive-rdkafka';
const cjs = createRequire(import.meta.url)('reactive-rdkafka');
if (cjs.ConfigError !== ConfigError) throw new Error('ESM and CJS entries load different classes');
console.log('dual: ok');
JS
(cd "$APP" && node esm.mjs && node cjs.cjs && node both.mjs)

# Type-check user code against the packed types, as an ES module and as CommonJS.
mkdir -p "$APP/src"
cat > "$APP/src/use.mts" <<'TS'
import { resolveSettings, ConfigError, type ReactiveConsumerOptions, type ConsumerSettings } from 'reactive-rdkafka';
const options: ReactiveConsumerOptions = {
  config: { 'bootstrap.servers': '127.0.0.1:9092', 'group.id': 'g' },
  topics: ['orders'],
};
export const settings: ConsumerSettings = resolveSettings(options);
export const isConfigError = (e: unknown): e is ConfigError => e instanceof ConfigError;
TS
cat > "$APP/src/use.cts" <<'TS'
import lib = require('reactive-rdkafka');
export const make = (o: lib.ReactiveConsumerOptions): lib.ConsumerSettings => lib.resolveSettings(o);
TS
if [ -d "$ROOT/examples" ]; then cp -r "$ROOT/examples" "$APP/src/examples"; fi
cat > "$APP/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "module": "nodenext", "moduleResolution": "nodenext", "target": "ES2022", "strict": true,
    "noEmit": true, "skipLibCheck": false, "types": ["node"]
  },
  "include": ["src/**/*"]
}
JSON
(cd "$APP" && node "$ROOT/node_modules/typescript/bin/tsc" -p tsconfig.json)
echo "types: ok"
echo "test-package: 4 passed, 0 failed"
