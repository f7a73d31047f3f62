import { writeFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import { lastValueFrom, toArray } from 'rxjs';
import { ReactiveConsumer } from './helpers/binding';
import type { KafkaMessage, RebalanceEvent, ReactiveConsumerOptions } from '../lib';
import {
  BROKERS,
  committedOffsets,
  createTopic,
  highWatermarks,
  produce,
  readAll,
  uniqueName,
  waitFor,
} from './helpers/kafka';
import { useTestOutput } from './helpers/output';
import { seededRandom } from './helpers/random';

interface Protocol {
  name: string;
  config: Record<string, unknown>;
  expect: 'EAGER' | 'COOPERATIVE';
}

const PROTOCOLS: Protocol[] = [
  {
    name: 'classic eager (range)',
    config: {
      'partition.assignment.strategy': 'range',
      'session.timeout.ms': 6000,
      'heartbeat.interval.ms': 500,
    },
    expect: 'EAGER',
  },
  {
    name: 'classic cooperative-sticky',
    config: {
      'partition.assignment.strategy': 'cooperative-sticky',
      'session.timeout.ms': 6000,
      'heartbeat.interval.ms': 500,
    },
    expect: 'COOPERATIVE',
  },
  {
    name: 'KIP-848 (group.protocol=consumer)',
    config: { 'group.protocol': 'consumer' },
    expect: 'COOPERATIVE',
  },
];

interface Record_ {
  consumer: string;
  partition: number;
  offset: number;
  key: string;
  at: number;
}

describe('rebalance with work in flight (real broker)', function () {
  this.timeout(180_000);
  const output = useTestOutput();

  for (const protocol of PROTOCOLS) {
    it(`hands partitions over with zero loss and zero duplicates: ${protocol.name}`, async () => {
      const seed = Number(process.env.TEST_SEED ?? Date.now() % 1_000_000);
      console.log(`      seed=${seed}`);
      const random = seededRandom(seed);
      const topic = uniqueName('rebalance');
      const groupId = uniqueName('rebalance-group');
      const partitions = 6;
      const total = 900;
      await createTopic(topic, partitions);
      await produce(
        topic,
        Array.from({ length: total }, (_, i) => ({ key: `key-${i}`, value: `value-${i}` })),
      );

      const records: Record_[] = [];
      const events = new Map<string, RebalanceEvent[]>();
      // After its first 100 records, a's handlers wait for a's first revoke (at most 60 s): the
      // revoke then surely finds handlers in flight and partitions with work left to hand over,
      // however long b's join takes on a slow machine.
      let aRevoking!: () => void;
      const aRevoked = new Promise<void>((resolve) => (aRevoking = resolve));
      const make = (name: string): ReactiveConsumer => {
        const options: ReactiveConsumerOptions = {
          config: {
            'bootstrap.servers': BROKERS,
            'group.id': groupId,
            'client.id': name,
            'max.poll.interval.ms': 30_000,
            ...protocol.config,
          },
          topicConfig: { 'auto.offset.reset': 'earliest' },
          topics: [topic],
          logger: output.logger(name),
          commitIntervalMs: 500,
        };
        const consumer = new ReactiveConsumer(options);
        events.set(name, []);
        consumer.rebalances$.subscribe((e) => {
          events.get(name)!.push(e);
          if (name === 'a' && e.type === 'revoking') aRevoking();
        });
        return consumer;
      };
      const handler = (name: string) => async (m: KafkaMessage) => {
        if (name === 'a' && records.length >= 100) {
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([aRevoked, new Promise((r) => (timer = setTimeout(r, 60_000)))]);
          clearTimeout(timer);
        }
        // Mostly short, with a heavy tail, so revokes find work in flight.
        const r = random();
        await new Promise((res) => setTimeout(res, r < 0.9 ? 5 + r * 20 : 100 + r * 200));
        records.push({
          consumer: name,
          partition: m.partition,
          offset: m.offset,
          key: m.key!.toString(),
          at: Date.now(),
        });
      };

      const a = make('a');
      const doneA = lastValueFrom(
        a.process(handler('a'), { concurrency: 8, partitionConcurrency: 2 }).pipe(toArray()),
      );
      await waitFor(() => records.length >= 100, {
        timeoutMs: 60_000,
        what: 'consumer a to process 100 messages',
      });

      const b = make('b');
      const doneB = lastValueFrom(
        b.process(handler('b'), { concurrency: 8, partitionConcurrency: 2 }).pipe(toArray()),
      );
      await waitFor(() => events.get('a')!.some((e) => e.type === 'revoked' || e.type === 'lost'), {
        timeoutMs: 60_000,
        what: 'a revoke on consumer a',
      });
      await waitFor(() => new Set(records.map((r) => `${r.partition}@${r.offset}`)).size >= total, {
        timeoutMs: 120_000,
        what: `all ${total} messages processed`,
      });
      // Incremental protocols: after each incremental assign/unassign the library woke the broker
      // threads librdkafka's resume leaves asleep — a metadata request, then ListOffsets to the
      // leaders the real metadata names (at least one). Eager never needs it.
      const wakes = a.metrics().rebalances.fetchWakes;
      if (protocol.expect === 'COOPERATIVE') {
        assert.ok(wakes.afterRebalance >= 1, `a woke its fetchers: ${JSON.stringify(wakes)}`);
        assert.ok(wakes.requests >= 2, `metadata and a ListOffsets: ${JSON.stringify(wakes)}`);
      } else {
        assert.equal(wakes.afterRebalance, 0, `eager: ${JSON.stringify(wakes)}`);
      }
      await Promise.all([a.close(), b.close()]);
      await Promise.all([doneA, doneB]);

      const allEvents = [...events.values()].flat();
      // The protocol really used.
      for (const e of allEvents) assert.equal(e.protocol, protocol.expect, `${e.type} protocol`);
      const aEvents = events.get('a')!;
      const drained = aEvents.filter((e) => e.type === 'drained');
      assert.ok(
        drained.some((e) => e.type === 'drained' && e.inFlight > 0),
        `a revoke found handlers in flight: ${JSON.stringify(drained.map((d) => d.type === 'drained' && d.inFlight))}`,
      );
      // Phase order per generation.
      for (const [name, list] of events) {
        const byGen = new Map<number, string[]>();
        for (const e of list)
          if (e.type !== 'assigned')
            byGen.set(e.generation, [...(byGen.get(e.generation) ?? []), e.type]);
        for (const [gen, types] of byGen) {
          assert.ok(
            JSON.stringify(types) ===
              JSON.stringify(['revoking', 'drained', 'committed', 'revoked']),
            `${name} generation ${gen}: ${types.join(' → ')}`,
          );
        }
        for (const e of list) {
          if (e.type === 'committed') {
            for (const r of e.results)
              assert.ok(
                r.status === 'committed' || r.status === 'unchanged',
                `${name}: ${JSON.stringify(r)}`,
              );
          }
        }
      }

      // Zero duplicates, zero loss, against what Kafka holds.
      const seen = new Map<string, number>();
      for (const r of records)
        seen.set(`${r.partition}@${r.offset}`, (seen.get(`${r.partition}@${r.offset}`) ?? 0) + 1);
      const dups = [...seen].filter(([, n]) => n > 1);
      assert.deepEqual(dups, [], 'duplicates');
      const inKafka = await readAll(topic, partitions);
      assert.equal(inKafka.length, total);
      const missing = inKafka.filter((m) => !seen.has(`${m.partition}@${m.offset}`));
      assert.deepEqual(
        missing.map((m) => `${m.partition}@${m.offset}`),
        [],
        'lost',
      );
      for (const m of inKafka) {
        const r = records.find((x) => x.partition === m.partition && x.offset === m.offset)!;
        assert.equal(r.key, m.key!.toString());
      }

      // Every moved partition: the old owner's final commit is the new owner's first offset.
      const firstOf = (consumer: string, partition: number, after: number) =>
        records
          .filter((r) => r.consumer === consumer && r.partition === partition && r.at >= after)
          .reduce((min, r) => Math.min(min, r.offset), Infinity);
      let moved = 0;
      for (const e of aEvents) {
        if (e.type !== 'committed') continue;
        for (const r of e.results) {
          if (r.status !== 'committed') continue;
          const next = firstOf('b', r.partition, 0);
          if (next === Infinity) continue; // b never got it (handed back to a later)
          if (next < r.offset)
            assert.fail(
              `partition ${r.partition}: b started at ${next} below a's commit ${r.offset}`,
            );
          const aAfter = records.filter(
            (x) => x.consumer === 'a' && x.partition === r.partition && x.offset >= r.offset,
          );
          if (aAfter.length === 0) {
            assert.equal(next, r.offset, `partition ${r.partition}: b starts where a committed`);
            moved += 1;
          }
        }
      }
      assert.ok(moved > 0, 'at least one partition moved from a to b');

      const ends = await highWatermarks(topic, partitions);
      assert.deepEqual(
        await committedOffsets(groupId, topic, partitions),
        ends,
        'final commits = end offsets',
      );
      writeSummary(output.dir(), {
        protocol: protocol.name,
        seed,
        records: records.length,
        events: allEvents.length,
        moved,
      });
    });
  }

  it('commits the start position of a partition that processed nothing (auto.offset.reset=latest)', async () => {
    const topic = uniqueName('latest');
    const groupId = uniqueName('latest-group');
    await createTopic(topic, 2);
    await produce(topic, [{ key: 'old', value: 'before anyone joined' }]);
    const make = (name: string) =>
      new ReactiveConsumer({
        config: { 'bootstrap.servers': BROKERS, 'group.id': groupId, 'group.protocol': 'consumer' },
        topicConfig: { 'auto.offset.reset': 'latest' },
        topics: [topic],
        logger: output.logger(name),
      });
    const a = make('a');
    const seenA: KafkaMessage[] = [];
    const events: RebalanceEvent[] = [];
    a.rebalances$.subscribe((e) => events.push(e));
    const doneA = lastValueFrom(a.process((m) => void seenA.push(m)).pipe(toArray()));
    await waitFor(() => events.some((e) => e.type === 'assigned' && e.partitions.length === 2), {
      timeoutMs: 30_000,
      what: 'a assigned',
    });
    // Let the offset reset happen (fetch starts at the end).
    await waitFor(
      () => a.positions().length === 2 && a.positions().every((p) => p.offset !== undefined),
      { timeoutMs: 15_000, what: 'fetch positions' },
    );
    await a.close();
    await doneA;
    assert.equal(seenA.length, 0);
    const committed = await committedOffsets(groupId, topic, 2);
    assert.deepEqual(
      committed,
      await highWatermarks(topic, 2),
      'the start positions were committed',
    );

    // Records produced while nobody owns the partitions are not skipped by the next owner.
    await produce(
      topic,
      Array.from({ length: 20 }, (_, i) => ({ key: `gap-${i}`, value: 'in between' })),
    );
    const b = make('b');
    const seenB: KafkaMessage[] = [];
    const doneB = lastValueFrom(b.process((m) => void seenB.push(m)).pipe(toArray()));
    await waitFor(() => seenB.length >= 20, {
      timeoutMs: 30_000,
      what: 'b to read the 20 records',
    });
    await b.close();
    await doneB;
    assert.deepEqual(
      seenB.map((m) => m.key!.toString()).sort(),
      Array.from({ length: 20 }, (_, i) => `gap-${i}`).sort(),
    );
  });
});

function writeSummary(dir: string, summary: Record<string, unknown>): void {
  writeFileSync(`${dir}/summary.json`, JSON.stringify(summary, null, 2));
}
