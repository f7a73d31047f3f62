import assert from 'node:assert/strict';
import { ErrorCode, hasErrorCode } from '../lib';
import type { RebalanceEvent } from '../lib';
import { createTopic, produce, uniqueName, waitFor } from './helpers/kafka';
import type { Member } from './helpers/member';
import { startMember, tp } from './helpers/member';
import { useTestOutput } from './helpers/output';

/**
 * Static membership (`group.instance.id`, KIP-345) against the real broker: a static member that
 * restarts within its session timeout gets its partitions back without a rebalance (the dynamic
 * member next to it sees nothing), its close() says the partitions were not handed over, and under
 * KIP-848 a second consumer with the same instance id is refused with a typed error.
 */
interface Protocol {
  name: string;
  /** For the dynamic member and, with `staticConfig`, for the static one. */
  config: Record<string, unknown>;
  /** Extra settings of the static member. */
  staticConfig: Record<string, unknown>;
}

const PROTOCOLS: Protocol[] = [
  {
    name: 'classic cooperative-sticky',
    config: {
      'partition.assignment.strategy': 'cooperative-sticky',
      'session.timeout.ms': 6000,
      'heartbeat.interval.ms': 500,
    },
    // Long enough for a restart on a slow machine; the broker holds the assignment meanwhile.
    staticConfig: { 'session.timeout.ms': 20_000 },
  },
  {
    // The broker owns the session timeout (6 s on the test broker, integration/kafka/kafka.sh).
    name: 'KIP-848 (group.protocol=consumer)',
    config: { 'group.protocol': 'consumer' },
    staticConfig: {},
  },
];

const types = (events: readonly RebalanceEvent[]): string =>
  events.map((e) => `${e.type}(${e.partitions.length})`).join(' ');

describe('static membership (real broker)', function () {
  this.timeout(120_000);
  const output = useTestOutput();
  let members: Member[] = [];
  afterEach(async () => {
    await Promise.all(members.map((m) => m.close()));
    members = [];
  });

  for (const protocol of PROTOCOLS) {
    it(`${protocol.name}: a static member restarting within its session timeout keeps its partitions without a rebalance`, async () => {
      const topic = uniqueName('static');
      const groupId = uniqueName('static-group');
      const instanceId = uniqueName('instance');
      const partitions = 4;
      await createTopic(topic, partitions);
      const member = (name: string, instance?: string): Member => {
        const m = startMember(
          name,
          {
            topics: [topic],
            config: {
              'group.id': groupId,
              ...protocol.config,
              ...(instance === undefined
                ? {}
                : { 'group.instance.id': instance, ...protocol.staticConfig }),
            },
          },
          output.logger(name),
        );
        members.push(m);
        return m;
      };

      const dynamic = member('dynamic');
      await waitFor(() => dynamic.owned().size === partitions, {
        timeoutMs: 60_000,
        what: 'the dynamic member to own every partition',
      });
      const first = member('static-1', instanceId);
      await waitFor(
        () => first.owned().size > 0 && dynamic.owned().size + first.owned().size === partitions,
        {
          timeoutMs: 60_000,
          what: 'the static member to get its share',
        },
      );
      const staticPartitions = [...first.owned()].sort();
      await produce(
        topic,
        Array.from({ length: 40 }, (_, i) => ({
          key: `k${i}`,
          value: `before-${i}`,
          partition: i % partitions,
        })),
      );
      await waitFor(() => dynamic.records.length + first.records.length === 40, {
        timeoutMs: 30_000,
        what: 'the first 40 records processed',
      });
      const dynamicBefore = dynamic.rebalances.length;

      const restartBegan = Date.now();
      await first.close();
      members = members.filter((m) => m !== first);
      // close() released the partitions locally but did not hand them over.
      const revoked = first.rebalances.filter((e) => e.type === 'revoked');
      assert.equal(revoked.length, 1, types(first.rebalances));
      assert.equal(
        revoked[0]?.type === 'revoked' && revoked[0].handedOver,
        false,
        'the revoked event of a static member closing says the partitions were not handed over',
      );

      const second = member('static-2', instanceId);
      await waitFor(() => second.owned().size > 0, {
        timeoutMs: 30_000,
        what: 'the restarted static member to get its partitions back',
      });
      // A restart slower than the session timeout rebalances the group: say how long it took.
      const restartMs = Date.now() - restartBegan;
      console.log(`      the static member was back with its partitions after ${restartMs} ms`);
      assert.deepEqual([...second.owned()].sort(), staticPartitions, 'the same partitions');
      await produce(
        topic,
        Array.from({ length: 40 }, (_, i) => ({
          key: `k${i}`,
          value: `after-${i}`,
          partition: i % partitions,
        })),
      );
      await waitFor(
        () =>
          [...dynamic.records, ...second.records].filter((r) => r.value.startsWith('after-'))
            .length === 40,
        { timeoutMs: 30_000, what: 'the next 40 records processed' },
      );
      // Each side processed only its own partitions, and nothing twice.
      for (const r of second.records)
        assert.ok(staticPartitions.includes(tp(r.topic, r.partition)));
      assert.equal(
        second.records.length,
        20,
        'the restarted member resumed at the committed offsets',
      );
      assert.equal(
        types(dynamic.rebalances.slice(dynamicBefore)),
        '',
        `the dynamic member saw no rebalance while the static member restarted (in ${restartMs} ms)`,
      );
      assert.equal(dynamic.error(), undefined);
      assert.equal(second.error(), undefined);
    });
  }

  it('KIP-848: a second consumer with the same group.instance.id ends with a typed error', async () => {
    const topic = uniqueName('static-dup');
    const groupId = uniqueName('static-dup-group');
    const instanceId = uniqueName('instance');
    await createTopic(topic, 2);
    const config = {
      'group.id': groupId,
      'group.protocol': 'consumer',
      'group.instance.id': instanceId,
    };
    const first = startMember('first', { topics: [topic], config }, output.logger('first'));
    members.push(first);
    await waitFor(() => first.owned().size === 2, {
      timeoutMs: 60_000,
      what: 'first member assigned',
    });

    const duplicate = startMember(
      'duplicate',
      { topics: [topic], config },
      output.logger('duplicate'),
    );
    members.push(duplicate);
    await waitFor(() => duplicate.ended(), { timeoutMs: 60_000, what: 'the duplicate to end' });
    const err = duplicate.error();
    assert.ok(hasErrorCode(err, ErrorCode.FencedInstance), `typed error, got ${String(err)}`);
    assert.equal((err as { groupInstanceId?: string }).groupInstanceId, instanceId);
    assert.equal(duplicate.owned().size, 0, 'the duplicate never owned a partition');
    // The first member is untouched.
    await produce(topic, [{ key: 'k', value: 'still-here' }]);
    await waitFor(() => first.records.some((r) => r.value === 'still-here'), {
      timeoutMs: 30_000,
      what: 'the first member to keep consuming',
    });
    assert.equal(first.error(), undefined);
    assert.equal(
      first.rebalances.filter((e) => e.type !== 'assigned').length,
      0,
      types(first.rebalances),
    );
  });
});
