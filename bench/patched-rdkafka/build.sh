#!/usr/bin/env bash
# Builds a copy of the installed node-rdkafka with consume-batch.patch applied (a leaner consume(n)
# conversion, see the patch and docs/benchmarks.md) into OUT/node-rdkafka, for the bench contender
# "node-rdkafka consume(n) (patched conversion)". Called by `make bench` only; the library and every
# other target keep running on the released node-rdkafka in node_modules.
#
#   bash bench/patched-rdkafka/build.sh OUT
#
# librdkafka is not rebuilt: the copy links against the librdkafka.so.1 that node-rdkafka's install
# already built (node_modules/node-rdkafka/build/deps), copied next to it; only the binding's own
# C++ sources are compiled (~30 s on 2 cores).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
OUT=${1:?usage: build.sh OUT}
SRC=$ROOT/node_modules/node-rdkafka
NAN=$ROOT/node_modules/nan
NODE_INCLUDE=$(node -p "require('path').resolve(process.execPath, '../../include/node')")
CXX=${CXX:-g++}

say() { printf 'patched-rdkafka: %s\n' "$*"; }
die() { printf 'patched-rdkafka: %s\n' "$*" >&2; exit 1; }

[[ -d $SRC/src && -f $SRC/build/deps/librdkafka.so.1 && -f $SRC/build/deps/librdkafka++.so.1 ]] ||
  die "node_modules/node-rdkafka has no sources or no built librdkafka (run make install)"
[[ -f $NODE_INCLUDE/node.h ]] || die "no Node headers at $NODE_INCLUDE"
[[ -f $NAN/nan.h ]] || die "no nan headers at $NAN"
version=$(node -p "require('$SRC/package.json').version")

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
DEST=$OUT/node-rdkafka
WORK=$OUT/node-rdkafka.tmp
rm -rf "$WORK"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/build/Release/obj" "$WORK/build/deps"
cp -a "$SRC/package.json" "$SRC/librdkafka.js" "$SRC/lib" "$SRC/src" "$WORK/"
cp -a "$SRC/build/deps/librdkafka.so.1" "$SRC/build/deps/librdkafka++.so.1" "$WORK/build/deps/"
patch --quiet -d "$WORK" -p1 <"$HERE/consume-batch.patch" ||
  die "consume-batch.patch does not apply to node-rdkafka $version"

# The flags of node-rdkafka's own Release build (build/node-librdkafka.target.mk).
FLAGS=(
  -DNODE_GYP_MODULE_NAME=node-librdkafka -DUSING_UV_SHARED=1 -DUSING_V8_SHARED=1
  -DV8_DEPRECATION_WARNINGS=1 -D_GLIBCXX_USE_CXX11_ABI=1 -D_FILE_OFFSET_BITS=64
  -D_LARGEFILE_SOURCE -D__STDC_FORMAT_MACROS -DOPENSSL_NO_PINSHARED -DOPENSSL_THREADS
  -DBUILDING_NODE_EXTENSION
  "-I$NODE_INCLUDE" "-I$NAN" "-I$WORK" "-I$SRC/build/deps/include/librdkafka"
  -fPIC -pthread -w -m64 -O3
  -fno-omit-frame-pointer -fno-exceptions -std=c++20
)
say "compiling node-rdkafka $version + consume-batch.patch"
t0=$(date +%s)
export CXX WORK
printf '%s\n' "$WORK"/src/*.cc |
  xargs -P "$(nproc)" -I{} sh -c '"$CXX" "$@" -c {} -o "$WORK/build/Release/obj/$(basename {} .cc).o"' _ "${FLAGS[@]}"
"$CXX" -shared -pthread -rdynamic -m64 -o "$WORK/build/Release/node-librdkafka.node" \
  "$WORK"/build/Release/obj/*.o "$WORK/build/deps/librdkafka.so.1" "$WORK/build/deps/librdkafka++.so.1" \
  "-Wl,-rpath=\$ORIGIN/../deps"
rm -rf "$WORK/build/Release/obj"

# Smoke check: it loads and has the new native method.
node -e "
  const k = require('$WORK');
  if (typeof k.KafkaConsumer !== 'function') throw new Error('no KafkaConsumer');
  const c = new k.KafkaConsumer({ 'group.id': 'patched-smoke', 'bootstrap.servers': '127.0.0.1:1' }, {});
  if (typeof c._client.consumeBatch !== 'function') throw new Error('consumeBatch missing');
" || die "the patched build does not load"

rm -rf "$DEST"
mv "$WORK" "$DEST"
say "built $DEST in $(($(date +%s) - t0)) s"
