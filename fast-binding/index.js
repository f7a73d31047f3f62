'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- CommonJS, as node-rdkafka is */
// node-rdkafka's API, from the build in dist/ (build.sh): the same module, plus what
// reactive-rdkafka's `binding` option reads to name it (name, version, batchConversion) and
// librdkafka's error descriptions (err2str).
const kafka = require('./dist/node-rdkafka');
const native = require('./dist/node-rdkafka/librdkafka');
const pkg = require('./package.json');

Object.defineProperties(kafka, {
  name: { value: pkg.name, enumerable: true },
  version: { value: `${pkg.version} (node-rdkafka ${pkg.nodeRdkafka})`, enumerable: true },
  batchConversion: { value: true, enumerable: true },
  err2str: { value: native.err2str, enumerable: true },
});
module.exports = kafka;
