/**
 * `make test-bench`: after `make bench-quick`, the report it wrote has a figure for every installed
 * contender and every section. Checks that the bench runs and reports, never how fast anything is.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchResults } from './results';
import { summarizeJoin, summarizeRevoke, summarizeThroughput } from './results';
import { CHART_FILES } from './report';

const DIR = process.env.BENCH_RESULTS_DIR ?? join(__dirname, '.results');

describe('the bench-quick report', () => {
  let results: BenchResults;
  let markdown: string;

  before(() => {
    const file = join(DIR, 'results.json');
    assert.ok(existsSync(file), `${file} is missing: run \`make bench-quick\` first`);
    results = JSON.parse(readFileSync(file, 'utf8')) as BenchResults;
    markdown = readFileSync(join(DIR, 'benchmarks.md'), 'utf8');
  });

  it('measured every installed peer and said why any other is missing', () => {
    for (const peer of results.peers) {
      if (!peer.installed) assert.match(peer.reason, /\S/, `${peer.name} has no reason`);
      else assert.ok(results.contenders.some((c) => c.pkg === peer.name && c.installed));
    }
    assert.ok(
      results.peers.some((p) => p.name === 'kafkajs' && p.installed),
      'kafkajs installed',
    );
  });

  it('has a positive msg/s, MB/s, CPU and RSS figure for every installed contender', () => {
    for (const ds of results.dataSets) {
      const rows = summarizeThroughput(results, ds.name);
      assert.equal(rows.length, results.contenders.filter((c) => c.installed).length);
      for (const row of rows) {
        const what = `${row.contender.id} on ${ds.name}`;
        assert.ok(row.msgPerSec > 0, `${what}: msg/s ${row.msgPerSec}`);
        assert.ok(row.mbPerSec > 0, `${what}: MB/s ${row.mbPerSec}`);
        assert.ok(row.cpuMs > 0, `${what}: CPU ${row.cpuMs}`);
        assert.ok(row.peakRssBytes > 0, `${what}: RSS ${row.peakRssBytes}`);
        assert.ok(Number.isFinite(row.vsRaw), `${what}: ratio to raw`);
      }
    }
  });

  it('prints a table row with a number for every installed contender', () => {
    const tableRows = markdown.split('\n').filter((l) => l.split('|').length >= 12);
    for (const c of results.contenders.filter((x) => x.installed)) {
      const rows = tableRows.filter(
        (l) => l.startsWith(`| ${c.label} |`) || l.startsWith(`| **${c.label}** |`),
      );
      assert.equal(rows.length, results.dataSets.length, `rows for ${c.label}`);
      for (const row of rows) assert.match(row.split('|')[2]!, /\d/, `no msg/s: ${row}`);
    }
  });

  it('measured revoke → revoked durations', () => {
    const rows = summarizeRevoke(results);
    assert.ok(rows.length > 0);
    for (const r of rows) {
      assert.equal(r.error, undefined, `${r.protocol} ${r.variant}: ${r.error}`);
      assert.ok(r.partitions > 0 && r.p50 >= 0 && r.p99 >= r.p50, `${r.protocol} ${r.variant}`);
    }
  });

  it('measured the join stall, duplicates and losses for each client', () => {
    const rows = summarizeJoin(results);
    assert.ok(rows.some((r) => r.client === 'reactive-rdkafka'));
    assert.ok(rows.some((r) => r.client === 'kafkajs'));
    for (const r of rows) {
      assert.deepEqual(r.errors, [], `${r.client} ${r.protocol}`);
      assert.ok(r.stallMs.length > 0 && r.stallMs.every((s) => s >= 0));
      assert.ok(r.produced > 0, `${r.client} ${r.protocol}: no records`);
      assert.ok(
        r.keptPartitionPauseMs.length + r.movedPartitionPauseMs.length > 0,
        `${r.client} ${r.protocol}: partitions neither kept nor moved`,
      );
      assert.ok(r.newMemberAssignedMs.length > 0, `${r.client} ${r.protocol}: 7th never assigned`);
      assert.ok(r.duplicates >= 0 && r.losses >= 0);
    }
  });

  it('measured the transactional and the plain topic-to-topic transform', () => {
    const runs = results.transform?.runs ?? [];
    for (const mode of ['plain', 'transactional']) {
      const r = runs.find((x) => x.mode === mode);
      assert.ok(r?.result, `${mode}: ${r?.error ?? 'not run'}`);
      assert.ok(r.result.msgPerSec > 0 && r.result.messages === results.transform?.messages);
    }
    assert.ok((runs.find((x) => x.mode === 'transactional')?.result?.transactions ?? 0) > 0);
  });

  it('sampled RSS under backlog and drew both charts', () => {
    const mem = results.memory?.result;
    assert.ok(mem, `memory: ${results.memory?.error}`);
    assert.ok(mem.samples.length > 2 && mem.peakRss > 0);
    for (const file of Object.values(CHART_FILES)) {
      assert.match(readFileSync(join(DIR, file), 'utf8'), /^<svg /);
    }
  });
});
