import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import {
  BROKERS,
  createTopic,
  deleteTopic,
  partitionCount,
  produce,
  uniqueName,
  waitFor,
} from './helpers/kafka';
import type { Member } from './helpers/member';
import { startMember, tp } from './helpers/member';
import { useTestOutput } from './helpers/output';

/**
 * Several topics and regex subscriptions against the real broker: new matching topics are picked
 * up, a deleted topic's partition streams end while the others go on, and partitions added to a
 * topic get streams of their own — under the classic protocol (librdkafka matches the regex, at
 * each metadata refresh) and KIP-848 (the broker matches it, RE2J, whole name).
 */
interface Protocol {
  name: string;
  config: Record<string, unknown>;
}

const PROTOCOLS: Protocol[] = [
  {
    name: 'classic cooperative-sticky',
    config: {
      'partition.assignment.strategy': 'cooperative-sticky',
      'session.timeout.ms': 6000,
      'heartbeat.interval.ms': 500,
      // librdkafka sees new topics and partitions at its metadata refresh (default 5 minutes).
      'topic.metadata.refresh.interval.ms': 1000,
    },
  },
  {
    name: 'KIP-848 (group.protocol=consumer)',
    config: { 'group.protocol': 'consumer', 'topic.metadata.refresh.interval.ms': 1000 },
  },
];

const EAGER: Protocol = {
  name: 'classic eager (range)',
  config: { ...PROTOCOLS[0]!.config, 'partition.assignment.strategy': 'range' },
};

const records = (prefix: string, n: number, partition?: number) =>
  Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: `${prefix}-${i}`, partition }));

async function growTopic(topic: string, total: number): Promise<void> {
  const admin = Kafka.AdminClient.create({ 'bootstrap.servers': BROKERS });
  try {
    await new Promise<void>((resolve, reject) =>
      admin.createPartitions(topic, total, 15_000, (err) => (err ? reject(err) : resolve())),
    );
  } finally {
    admin.disconnect();
  }
  await waitFor(async () => (await partitionCount(topic)) === total, {
    timeoutMs: 15_000,
    what: `${topic} to have ${total} partitions`,
  });
}

function assertNoDuplicates(member: Member): void {
  const seen = new Set<string>();
  for (const r of member.records) {
    const key = `${tp(r.topic, r.partition)}@${r.offset}`;
    assert.ok(!seen.has(key), `processed twice: ${key}`);
    seen.add(key);
  }
}

describe('several topics and regex subscriptions (real broker)', function () {
  this.timeout(180_000);
  const output = useTestOutput();
  let members: Member[] = [];
  afterEach(async () => {
    await Promise.all(members.map((m) => m.close()));
    members = [];
  });

  const member = (name: string, topics: string[], protocol: Protocol): Member => {
    const m = startMember(
      name,
      { topics, config: { 'group.id': uniqueName('subs-group'), ...protocol.config } },
      output.logger(name),
    );
    members.push(m);
    return m;
  };

  for (const protocol of PROTOCOLS) {
    it(`${protocol.name}: consumes a topic list plus a regex, and picks up a topic created later that matches`, async () => {
      const base = uniqueName('subs');
      const plain = `${base}.plain`;
      const first = `${base}.rx.first`;
      const later = `${base}.rx.later`;
      const other = `${base}.other`;
      await Promise.all([createTopic(plain, 2), createTopic(first, 2), createTopic(other, 1)]);
      await Promise.all([
        produce(plain, records('plain', 10)),
        produce(first, records('first', 10)),
        produce(other, records('other', 10)),
      ]);
      // `.*` at the end: KIP-848 brokers match the whole topic name.
      const m = member('m', [plain, `^${base.replace(/[-.]/g, '\\$&')}\\.rx\\..*`], protocol);
      await waitFor(() => m.records.length === 20, {
        timeoutMs: 60_000,
        what: 'the records of the listed topic and the matching one',
      });

      const createdAt = Date.now();
      await createTopic(later, 2);
      await produce(later, records('later', 10));
      await waitFor(() => m.records.filter((r) => r.topic === later).length === 10, {
        timeoutMs: 90_000,
        what: 'the records of the topic created later',
      });
      console.log(`      new topic picked up after ${Date.now() - createdAt} ms`);
      assert.ok(m.owned().has(tp(later, 0)) && m.owned().has(tp(later, 1)));
      assert.equal(m.records.filter((r) => r.topic === other).length, 0, 'non-matching topic');
      assertNoDuplicates(m);
      assert.equal(m.error(), undefined);
    });
  }

  for (const protocol of [EAGER, ...PROTOCOLS]) {
    it(`${protocol.name}: ends the partition streams of a deleted topic and keeps consuming the others`, async () => {
      const base = uniqueName('subs-del');
      const kept = `${base}.kept`;
      const doomed = `${base}.doomed`;
      await Promise.all([createTopic(kept, 2), createTopic(doomed, 2)]);
      await Promise.all([
        produce(kept, records('kept', 10)),
        produce(doomed, records('doomed', 10)),
      ]);
      const m = member('m', [kept, doomed], protocol);
      await waitFor(() => m.records.length === 20, { timeoutMs: 60_000, what: 'all 20 records' });

      await deleteTopic(doomed);
      await waitFor(() => ![...m.owned()].some((k) => k.startsWith(`${doomed}:`)), {
        timeoutMs: 60_000,
        what: 'the deleted topic’s partitions to be revoked',
      });
      const ended = m.rebalances.filter(
        (e) =>
          (e.type === 'revoked' || e.type === 'lost') &&
          e.partitions.some((p) => p.topic === doomed),
      );
      assert.ok(ended.length > 0, 'a revoked (or lost) event for the deleted topic');
      const finalCommit = m.rebalances
        .filter((e) => e.type === 'committed')
        .flatMap((e) => (e.type === 'committed' ? e.results : []))
        .filter((r) => r.topic === doomed);
      console.log(
        `      deleted topic: ${ended.map((e) => e.type).join(', ')}; its final commit: ${finalCommit.map((r) => (r.status === 'failed' ? `failed (${r.reason})` : r.status)).join(', ') || 'none'}`,
      );
      await produce(kept, records('kept-after', 10));
      await waitFor(() => m.records.filter((r) => r.value.startsWith('kept-after')).length === 10, {
        timeoutMs: 60_000,
        what: 'the kept topic to go on',
      });
      assert.ok(m.owned().has(tp(kept, 0)) && m.owned().has(tp(kept, 1)), [...m.owned()].join());
      await m.close();
      assert.equal(m.error(), undefined);
      assertNoDuplicates(m);
      // The live topic's commits are confirmed, even when revoked together with the deleted one.
      for (const e of m.rebalances) {
        if (e.type !== 'committed') continue;
        for (const r of e.results) {
          if (r.topic === kept) assert.notEqual(r.status, 'failed', JSON.stringify(r));
        }
      }
    });
  }

  for (const protocol of PROTOCOLS) {
    it(`${protocol.name}: starts streams for partitions added to a topic`, async () => {
      const topic = uniqueName('subs-grow');
      await createTopic(topic, 2);
      await produce(topic, records('before', 10));
      const m = member('m', [topic], protocol);
      await waitFor(() => m.records.length === 10, { timeoutMs: 60_000, what: '10 records' });

      await growTopic(topic, 4);
      await produce(topic, records('new-2', 5, 2));
      await produce(topic, records('new-3', 5, 3));
      await waitFor(() => m.records.length === 20, {
        timeoutMs: 90_000,
        what: 'the records of the added partitions',
      });
      assert.deepEqual(
        [...m.owned()].sort(),
        [0, 1, 2, 3].map((p) => tp(topic, p)),
      );
      assert.deepEqual(
        [
          ...new Set(m.records.filter((r) => r.value.startsWith('new-')).map((r) => r.partition)),
        ].sort(),
        [2, 3],
      );
      assertNoDuplicates(m);
      await m.close();
      assert.equal(m.error(), undefined);
    });
  }

  it('KIP-848: the broker matches the whole topic name; under classic librdkafka a prefix is enough', async () => {
    const base = uniqueName('subs-re');
    const topic = `${base}.orders`;
    await createTopic(topic, 1);
    await produce(topic, records('r', 3));
    const prefix = `^${base.replace(/[-.]/g, '\\$&')}\\.ord`;
    // Started together, each in its own group: the same prefix pattern under both protocols, and
    // the whole-name pattern under KIP-848 as the control.
    const classic = member('classic-prefix', [prefix], PROTOCOLS[0]!);
    const kip848 = member('kip848-prefix', [prefix], PROTOCOLS[1]!);
    const control = member('kip848-whole-name', [`${prefix}.*`], PROTOCOLS[1]!);
    await waitFor(() => classic.records.length === 3 && control.records.length === 3, {
      timeoutMs: 60_000,
      what: 'the classic member and the KIP-848 control to read the topic',
    });
    assert.equal(kip848.owned().size, 0, [...kip848.owned()].join());
    assert.equal(kip848.records.length, 0, 'a KIP-848 regex must match the whole name');
  });
});
