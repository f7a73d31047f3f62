#!/usr/bin/env bash
# Installs the packed companion binding into an empty project, as a user would, and loads it:
# node-rdkafka's API, batch conversion on, the features the library needs, and a stock
# node-rdkafka in the same process.
#
#   bash fast-binding/check-tarball.sh reactive-rdkafka-fast-binding-<version>.tgz
set -euo pipefail
TARBALL=$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
npm init -y >/dev/null
npm install --no-audit --no-fund --silent "$TARBALL"
NODE_PATH=$ROOT/node_modules node -e "
  const fast = require('reactive-rdkafka-fast-binding');
  const stock = require('node-rdkafka');
  const c = new fast.KafkaConsumer({ 'group.id': 'g', 'bootstrap.servers': '127.0.0.1:1' }, {});
  if (typeof c._client.consumeBatch !== 'function') throw new Error('no batch conversion');
  if (fast.batchConversion !== true) throw new Error('batchConversion is not true');
  if (fast.KafkaConsumer.batchBufferBounds !== true) throw new Error('no bounded shared buffers');
  for (const f of ['zstd', 'lz4', 'ssl', 'sasl_scram'])
    if (!fast.features.includes(f)) throw new Error('no ' + f);
  new stock.KafkaConsumer({ 'group.id': 'g', 'bootstrap.servers': '127.0.0.1:1' }, {});
  console.log('fast-binding: ' + require('path').basename('$TARBALL') + ' installs and loads: ' +
    fast.name + ' ' + fast.version + ', librdkafka ' + fast.librdkafkaVersion + ' beside node-rdkafka\'s ' + stock.librdkafkaVersion);
"
