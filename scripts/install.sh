#!/usr/bin/env bash
# Installs the project: system build packages, npm dependencies (compiling node-rdkafka), and a
# check that librdkafka got zstd, lz4, SSL and SASL/SCRAM. A missing feature only warns here (the
# demo, the unit and packaging tests do not need them); `make check-native`, which the integration,
# chaos and bench targets run first, fails on it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-native.sh

# node-gyp downloads Node's headers unless told where they are; with no internet that fails.
# Use the headers that ship with the running Node when they are there.
if [ -z "${npm_config_nodedir:-}" ]; then
  prefix="$(node -p "require('path').resolve(process.execPath, '..', '..')")"
  if [ -f "$prefix/include/node/node_version.h" ]; then
    export npm_config_nodedir="$prefix"
    echo "install: using Node headers from $prefix/include/node"
  fi
fi

npm ci --no-audit --no-fund
node scripts/check-native.mjs --rebuild --warn=install
