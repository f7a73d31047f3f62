// npm's prepublishOnly: refuses to publish while package.json, the README or the CHANGELOG carry
// a placeholder repository owner (REPLACE-WITH-OWNER) instead of the real one
// (https://github.com/reactive-rdkafka/reactive-rdkafka).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const PLACEHOLDER = 'REPLACE-WITH-OWNER';
const carriers = ['package.json', 'README.md', 'CHANGELOG.md'].filter((f) =>
  readFileSync(join(root, f), 'utf8').includes(PLACEHOLDER),
);
if (carriers.length > 0) {
  console.error(
    `check-publishable: ${carriers.join(', ')} still name the placeholder repository ` +
      `https://github.com/${PLACEHOLDER}/reactive-rdkafka; put the real GitHub owner there before publishing.`,
  );
  process.exit(1);
}
