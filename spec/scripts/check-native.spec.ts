import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const script = join(__dirname, '../../scripts/check-native.mjs');
const run = (args: string[], features?: string) =>
  spawnSync(process.execPath, [script, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...(features === undefined ? {} : { RKC_NATIVE_FEATURES: features }) },
  });

describe('scripts/check-native.mjs', () => {
  it('fails naming the package of each missing feature', () => {
    const r = run([], 'gzip,ssl,lz4,sasl_scram');
    assert.equal(r.status, 1);
    assert.match(r.stderr, /built without zstd\./);
    assert.match(r.stderr, /libzstd-dev/);
    assert.doesNotMatch(r.stderr, /liblz4-dev/);
  });

  it('with --warn (the demo) only warns, says what stops working and goes on', () => {
    const r = run(['--warn=demo'], 'gzip,ssl');
    assert.equal(r.status, 0);
    assert.match(r.stderr, /warning: .*built without zstd, lz4, sasl_scram/);
    assert.match(r.stderr, /zstd-compressed topics cannot be read/);
    assert.match(r.stderr, /libzstd-dev liblz4-dev libssl-dev libsasl2-dev/);
    assert.match(r.stderr, /The demo does not need them: going on\./);
  });

  it('passes quietly on stderr when every feature is there', () => {
    const r = run([], 'gzip,zstd,lz4,ssl,sasl_scram');
    assert.equal(r.status, 0);
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /with gzip, zstd, lz4, ssl, sasl_scram/);
  });
});
