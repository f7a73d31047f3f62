#!/usr/bin/env bash
# Builds the companion binding (see README.md here): node-rdkafka's published source release, fetched
# from the npm registry, with patches/*.patch applied, its bundled librdkafka compiled and linked
# statically into the addon with every librdkafka symbol hidden (so a stock node-rdkafka loaded in
# the same process keeps its own librdkafka.so.1). Output: fast-binding/dist/node-rdkafka, the
# module index.js loads; `npm pack` in fast-binding/ then makes the installable tarball.
#
#   bash fast-binding/build.sh
#
# The result is cached under ~/.cache/reactive-rdkafka-fast-binding by node-rdkafka version,
# patches, this script, Node's ABI and the machine (a rebuild takes ~2 min on 2 cores, ~20 s when
# the repository's node-rdkafka of the same release has compiled the same librdkafka; a cached
# one, a second). Needs a C/C++ toolchain and the -dev packages librdkafka links: libssl-dev,
# libsasl2-dev, libzstd-dev, liblz4-dev, zlib1g-dev (`make install` at the root installs them).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
VERSION=$(node -p "require('$HERE/package.json').nodeRdkafka")
NODE_INCLUDE=$(node -p "require('path').resolve(process.execPath, '../../include/node')")
CXX=${CXX:-g++}
JOBS=$(nproc)

say() { printf 'fast-binding: %s\n' "$*"; }
die() { printf 'fast-binding: %s\n' "$*" >&2; exit 1; }

[[ -f $NODE_INCLUDE/node.h ]] || die "no Node headers at $NODE_INCLUDE"
KEY=$(
  {
    echo "$VERSION $(node -p 'process.versions.modules') $(uname -m) $CXX"
    cat "$HERE"/patches/*.patch "$HERE/build.sh"
  } | sha256sum | cut -c1-16
)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/reactive-rdkafka-fast-binding/$VERSION-$KEY
DEST=$HERE/dist/node-rdkafka

# One build at a time (make test's lanes may ask for it at once): the second finds the cache.
mkdir -p "$(dirname "$CACHE")"
exec 9>"$(dirname "$CACHE")/.lock"
flock 9
if [[ -f $CACHE/node-rdkafka/build/Release/node-librdkafka.node ]]; then
  rm -rf "$DEST" && mkdir -p "$HERE/dist" && cp -a "$CACHE/node-rdkafka" "$DEST"
  say "node-rdkafka $VERSION + patches from the cache ($CACHE)"
  exit 0
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
t0=$(date +%s)
say "fetching node-rdkafka $VERSION from the registry"
(cd "$WORK" && npm pack "node-rdkafka@$VERSION" --silent >/dev/null)
mkdir "$WORK/src-release"
tar xzf "$WORK/node-rdkafka-$VERSION.tgz" -C "$WORK/src-release" --strip-components=1
SRC=$WORK/src-release
for p in "$HERE"/patches/*.patch; do
  patch --quiet -d "$SRC" -p1 <"$p" || die "$(basename "$p") does not apply to node-rdkafka $VERSION"
done
# nan: the headers the addon compiles against, at the version node-rdkafka asks for.
(cd "$SRC" && npm install --ignore-scripts --no-audit --no-fund --silent --omit=dev >/dev/null)

RDK=$SRC/deps/librdkafka
rdk_version=$(sed -n 's/^#define RD_KAFKA_VERSION *0x\(..\)\(..\)\(..\).*/\1.\2.\3/p' \
  "$RDK/src/rdkafka.h" | awk -F. '{printf "%d.%d.%d", "0x"$1, "0x"$2, "0x"$3}')
# librdkafka's sources, to recognise an identical tree already compiled.
sources_digest() { (cd "$1" && find src src-cpp -name '*.[ch]' -o -name '*.cpp' | LC_ALL=C sort | xargs cat | sha256sum); }
# A node-rdkafka of the same release installed beside (the repository's node_modules) has compiled
# this very librdkafka already: its static libraries are reused when the sources are identical,
# else (or when built elsewhere) librdkafka is compiled here.
STOCK=${FAST_BINDING_REUSE_FROM:-$HERE/../node_modules/node-rdkafka}
reuse=
if [[ -f $STOCK/deps/librdkafka/src/librdkafka.a && -f $STOCK/deps/librdkafka/src-cpp/librdkafka++.a &&
  -f $STOCK/deps/librdkafka/Makefile.config ]] &&
  [[ $(node -p "require('$STOCK/package.json').version.replace(/^v/, '')") == "$VERSION" ]] &&
  [[ $(sources_digest "$STOCK/deps/librdkafka") == $(sources_digest "$RDK") ]]; then
  reuse=$STOCK/deps/librdkafka
fi
if [[ -n $reuse ]]; then
  say "librdkafka $rdk_version: the same sources are compiled in $reuse; linking its static libraries"
  cp "$reuse/src/librdkafka.a" "$RDK/src/" && cp "$reuse/src-cpp/librdkafka++.a" "$RDK/src-cpp/" &&
    cp "$reuse/Makefile.config" "$RDK/Makefile.config"
else
  say "compiling librdkafka $rdk_version"
  (
    cd "$RDK"
    ./configure --prefix="$WORK/prefix" --enable-static >"$WORK/configure.log" 2>&1 ||
      { tail -30 "$WORK/configure.log" >&2; exit 1; }
    make -j"$JOBS" libs >"$WORK/make.log" 2>&1 || { tail -30 "$WORK/make.log" >&2; exit 1; }
  ) || die "librdkafka did not build"
fi
# The system libraries librdkafka was configured with (ssl, sasl, zstd, lz4, zlib…).
LIBS=$(sed -n 's/^LIBS+=[[:space:]]*//p' "$RDK/Makefile.config" | tr '\n' ' ')
say "compiling the addon (node-rdkafka's sources + patches)"
mkdir -p "$SRC/build/Release/obj"
# The flags of node-rdkafka's own Release build (its binding.gyp), with librdkafka's headers.
FLAGS=(
  -DNODE_GYP_MODULE_NAME=node-librdkafka -DUSING_UV_SHARED=1 -DUSING_V8_SHARED=1
  -DV8_DEPRECATION_WARNINGS=1 -D_GLIBCXX_USE_CXX11_ABI=1 -D_FILE_OFFSET_BITS=64
  -D_LARGEFILE_SOURCE -D__STDC_FORMAT_MACROS -DOPENSSL_NO_PINSHARED -DOPENSSL_THREADS
  -DBUILDING_NODE_EXTENSION
  "-I$NODE_INCLUDE" "-I$SRC/node_modules/nan" "-I$SRC" "-I$RDK/src-cpp" "-I$RDK/src"
  -fPIC -pthread -w -m64 -O3 -fno-omit-frame-pointer -fno-exceptions -std=c++20
)
export CXX SRC
printf '%s\n' "$SRC"/src/*.cc |
  xargs -P "$JOBS" -I{} sh -c '"$CXX" "$@" -c {} -o "$SRC/build/Release/obj/$(basename {} .cc).o"' _ "${FLAGS[@]}"
# librdkafka in the addon itself, its symbols made local (--exclude-libs): nothing resolves to or
# from another librdkafka in the process.
# shellcheck disable=SC2086
"$CXX" -shared -pthread -rdynamic -m64 -o "$SRC/build/Release/node-librdkafka.node" \
  "$SRC"/build/Release/obj/*.o "$RDK/src-cpp/librdkafka++.a" "$RDK/src/librdkafka.a" \
  -Wl,--exclude-libs,ALL $LIBS
rm -rf "$SRC/build/Release/obj"
strip --strip-unneeded "$SRC/build/Release/node-librdkafka.node"

# Checks: it loads, converts batches, has the features the library needs, and needs no
# librdkafka.so from anywhere.
if ldd "$SRC/build/Release/node-librdkafka.node" | grep -q librdkafka; then
  die "the addon links a shared librdkafka: $(ldd "$SRC/build/Release/node-librdkafka.node" | grep librdkafka)"
fi
node -e "
  const k = require('$SRC');
  const c = new k.KafkaConsumer({ 'group.id': 'fast-binding-smoke', 'bootstrap.servers': '127.0.0.1:1' }, {});
  if (typeof c._client.consumeBatch !== 'function') throw new Error('consumeBatch missing');
  for (const f of ['zstd', 'lz4', 'ssl', 'sasl_scram'])
    if (!k.features.includes(f)) throw new Error('librdkafka without ' + f + ': ' + k.features);
" || die "the build does not load, or lacks a feature (install the -dev packages: make install does)"

# The module: node-rdkafka's package as published (its JS, typings, licence), with the addon.
mkdir -p "$WORK/out/build/Release"
cp -a "$SRC/package.json" "$SRC/librdkafka.js" "$SRC/lib" "$SRC/config.d.ts" "$SRC/errors.d.ts" \
  "$SRC/index.d.ts" "$SRC/LICENSE.txt" "$WORK/out/"
cp "$SRC/deps/librdkafka/LICENSE" "$WORK/out/LICENSE.librdkafka"
cp "$SRC/build/Release/node-librdkafka.node" "$WORK/out/build/Release/"
rm -rf "$CACHE" && mkdir -p "$(dirname "$CACHE")" && cp -a "$WORK/out" "$CACHE.tmp" &&
  mkdir -p "$CACHE" && mv "$CACHE.tmp" "$CACHE/node-rdkafka"
rm -rf "$DEST" && mkdir -p "$HERE/dist" && cp -a "$CACHE/node-rdkafka" "$DEST"
say "built node-rdkafka $VERSION + $(ls "$HERE"/patches | tr '\n' ' ')in $(($(date +%s) - t0)) s: $DEST"
