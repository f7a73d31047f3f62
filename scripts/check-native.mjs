// Fails with the Debian package to install when node-rdkafka's librdkafka lacks a needed feature.
// With --rebuild, first rebuilds node-rdkafka once if features are missing (it was compiled before
// the -dev packages were installed).
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const REQUIRED = {
  zstd: 'libzstd-dev',
  lz4: 'liblz4-dev',
  ssl: 'libssl-dev',
  sasl_scram: 'libssl-dev, libsasl2-dev',
};

function missingFeatures() {
  const out = execFileSync(
    process.execPath,
    ['-e', "process.stdout.write(JSON.stringify(require('node-rdkafka').features))"],
    {
      encoding: 'utf8',
    },
  );
  const have = new Set(JSON.parse(out));
  return Object.keys(REQUIRED).filter((f) => !have.has(f));
}

let missing = missingFeatures();
if (missing.length > 0 && process.argv.includes('--rebuild')) {
  console.log(
    `check-native: librdkafka lacks ${missing.join(', ')}; rebuilding node-rdkafka (about 90 s)`,
  );
  execFileSync('npm', ['rebuild', 'node-rdkafka'], { stdio: 'inherit' });
  missing = missingFeatures();
}
if (missing.length > 0) {
  const pkgs = [...new Set(missing.flatMap((f) => REQUIRED[f].split(', ')))];
  console.error(
    `check-native: node-rdkafka's librdkafka was built without ${missing.join(', ')}.\n` +
      `  Install the Debian packages ${pkgs.join(' ')} (or your system's equivalents), then run: npm rebuild node-rdkafka`,
  );
  process.exit(1);
}
const { librdkafkaVersion, features } = require('node-rdkafka');
console.log(`check-native: librdkafka ${librdkafkaVersion} with ${features.join(', ')}`);
