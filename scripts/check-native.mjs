// Checks that node-rdkafka's librdkafka has the features the library's tests need (zstd, lz4, SSL,
// SASL/SCRAM) and names the Debian package to install for each one missing.
//
//   node scripts/check-native.mjs            fails (exit 1) when a feature is missing
//   node scripts/check-native.mjs --rebuild  first rebuilds node-rdkafka once if features are
//                                            missing (it was compiled before the -dev packages)
//   node scripts/check-native.mjs --warn=X   only warns, saying the X does not need them (install,
//                                            demo: neither uses these codecs or security)
// RKC_NATIVE_FEATURES=gzip,ssl pretends the build has only these features (to test the messages).
import { execFileSync } from 'node:child_process';

const REQUIRED = {
  zstd: 'libzstd-dev',
  lz4: 'liblz4-dev',
  ssl: 'libssl-dev',
  sasl_scram: 'libssl-dev, libsasl2-dev',
};
/** What stops working without each feature. */
const CONSEQUENCE = {
  zstd: 'zstd-compressed topics cannot be read',
  lz4: 'lz4-compressed topics cannot be read',
  ssl: 'SSL listeners cannot be reached',
  sasl_scram: 'SASL/SCRAM logins fail',
};
const warnFor = process.argv.find((a) => a.startsWith('--warn'))?.split('=')[1] ?? undefined;
const warnOnly = process.argv.some((a) => a.startsWith('--warn'));

function nativeFeatures() {
  if (process.env.RKC_NATIVE_FEATURES !== undefined) {
    return { version: 'override', features: process.env.RKC_NATIVE_FEATURES.split(',') };
  }
  const out = execFileSync(
    process.execPath,
    [
      '-e',
      "const k = require('node-rdkafka'); process.stdout.write(JSON.stringify({ version: k.librdkafkaVersion, features: k.features }))",
    ],
    { encoding: 'utf8' },
  );
  return JSON.parse(out);
}
const missingOf = ({ features }) => Object.keys(REQUIRED).filter((f) => !features.includes(f));

let native = nativeFeatures();
let missing = missingOf(native);
if (missing.length > 0 && process.argv.includes('--rebuild')) {
  console.log(
    `check-native: librdkafka lacks ${missing.join(', ')}; rebuilding node-rdkafka (about 90 s)`,
  );
  try {
    execFileSync('npm', ['rebuild', 'node-rdkafka'], { stdio: 'inherit' });
  } catch (err) {
    if (!warnOnly) throw err;
    console.error(`check-native: npm rebuild node-rdkafka failed (${err.message})`);
  }
  native = nativeFeatures();
  missing = missingOf(native);
}
if (missing.length > 0) {
  const pkgs = [...new Set(missing.flatMap((f) => REQUIRED[f].split(', ')))];
  const what = `node-rdkafka's librdkafka ${native.version} was built without ${missing.join(', ')}`;
  const fix = `install the Debian packages ${pkgs.join(' ')} (or your system's equivalents), then run: npm rebuild node-rdkafka`;
  if (warnOnly) {
    console.error(
      `check-native: warning: ${what}: ${missing.map((f) => CONSEQUENCE[f]).join(', ')} ` +
        `(the integration and chaos tests need them). To get them, ${fix}.` +
        (warnFor ? ` The ${warnFor} does not need them: going on.` : ' Going on.'),
    );
    process.exit(0);
  }
  console.error(`check-native: ${what}.\n  To fix: ${fix}`);
  process.exit(1);
}
console.log(`check-native: librdkafka ${native.version} with ${native.features.join(', ')}`);
