// Checks the links of the README and CHANGELOG a tarball ships, as the npm page shows them: each
// must be absolute (npm does not serve the repository's other files) or an in-page anchor, and a
// link into this repository's files (…/blob/<ref>/<path>, …/tree/<ref>/<path>) must name a path
// that exists in the checkout.
//   node scripts/check-links.mjs <unpacked package dir> <checkout>
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const [pkgDir, checkout] = process.argv.slice(2);
if (!pkgDir || !checkout) {
  console.error('usage: check-links.mjs <package dir> <checkout>');
  process.exit(2);
}
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
const repo = String(pkg.repository?.url ?? pkg.repository ?? '')
  .replace(/^git\+/, '')
  .replace(/\.git$/, '');
if (!/^https:\/\/github\.com\/[^/]+\/[^/]+$/.test(repo)) {
  console.error(`check-links: package.json repository is not a GitHub URL: ${repo}`);
  process.exit(1);
}

const problems = [];
let checked = 0;
for (const file of ['README.md', 'CHANGELOG.md']) {
  const text = readFileSync(join(pkgDir, file), 'utf8').replace(/```[\s\S]*?```/g, '');
  const links = [
    ...[...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]),
    ...[...text.matchAll(/^\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]),
  ];
  for (const url of links) {
    checked += 1;
    if (url.startsWith('#')) continue;
    if (!/^https?:\/\//.test(url)) {
      problems.push(
        `${file}: relative link ${url} (broken on the npm page; use ${repo}/blob/main/…)`,
      );
      continue;
    }
    if (!url.startsWith(repo + '/')) continue;
    const m = /^\/(?:blob|tree)\/[^/]+\/([^#?]+)/.exec(url.slice(repo.length));
    if (m && !existsSync(join(checkout, decodeURIComponent(m[1])))) {
      problems.push(`${file}: ${url} names ${m[1]}, which the repository does not have`);
    }
  }
}
if (problems.length > 0) {
  console.error(`check-links: ${problems.length} broken link(s):\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`  links: ${checked} links checked against ${repo}`);
