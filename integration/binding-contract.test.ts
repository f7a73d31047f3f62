/**
 * Contract tests of node-rdkafka on the real broker: the behaviours the library (and the unit tests'
 * fake consumer) rely on. If the binding changes, these fail first. With KAFKA_TEST_BINDING=fast they
 * hold the companion build (fast-binding/) to the same contract.
 */
import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import { testBinding } from './helpers/binding';
import type { Assignment, LibrdKafkaError, Message, TopicPartitionOffset } from 'node-rdkafka';
import { BROKERS, createTopic, produce, uniqueName, waitFor } from './helpers/kafka';

const E = Kafka.CODES.ERRORS;
/** The binding's consumer class: node-rdkafka's, or the companion's (KAFKA_TEST_BINDING=fast). */
const Consumer = (testBinding?.KafkaConsumer ?? Kafka.KafkaConsumer) as typeof Kafka.KafkaConsumer;

function consumeOnce(c: Kafka.KafkaConsumer, n = 100): Promise<Message[]> {
  return new Promise((resolve, reject) =>
    c.consume(n, (err, m) =>
      err && err.code !== E.ERR__TIMED_OUT ? reject(err) : resolve(m ?? []),
    ),
  );
}

function connect(c: Kafka.KafkaConsumer): Promise<void> {
  return new Promise((resolve, reject) =>
    c.connect({ timeout: 15_000 }, (err) => (err ? reject(err) : resolve())),
  );
}

describe('node-rdkafka contract (real broker)', function () {
  this.timeout(90_000);

  it('delivers commit results only while consume() is being called', async () => {
    const topic = uniqueName('contract-commit');
    await createTopic(topic, 1);
    await produce(topic, [{ key: 'k', value: 'v' }]);
    const c = new Consumer(
      {
        'bootstrap.servers': BROKERS,
        'group.id': uniqueName('contract'),
        'enable.auto.commit': false,
        offset_commit_cb: true,
      },
      { 'auto.offset.reset': 'earliest' },
    );
    c.setDefaultConsumeTimeout(100);
    await connect(c);
    try {
      c.assign([{ topic, partition: 0 }]);
      const got: Message[] = [];
      await waitFor(async () => (got.push(...(await consumeOnce(c))), got.length === 1), {
        timeoutMs: 20_000,
        what: 'the message',
        intervalMs: 0,
      });
      const results: TopicPartitionOffset[][] = [];
      c.on('offset.commit', (_err: unknown, offsets: TopicPartitionOffset[]) =>
        results.push(offsets),
      );
      c.commit({ topic, partition: 0, offset: 1 });
      // Observation window with no consume() call: the result must not arrive.
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(results.length, 0, 'no commit result without polling');
      await waitFor(async () => (await consumeOnce(c, 1), results.length === 1), {
        timeoutMs: 10_000,
        what: 'the commit result once polling',
        intervalMs: 0,
      });
      assert.deepEqual(
        results[0]?.map((o) => [o.partition, o.offset]),
        [[0, 1]],
      );
    } finally {
      await new Promise<void>((r) => c.disconnect(() => r()));
    }
  });

  it('stops fetching every assigned partition while a cooperative revoke awaits its unassign', async () => {
    const topic = uniqueName('contract-pause');
    const group = uniqueName('contract');
    await createTopic(topic, 2);
    let pendingRevoke: Assignment[] | undefined;
    let closing = false;
    const errors: Error[] = [];
    const make = (onRevoke: (c: Kafka.KafkaConsumer, a: Assignment[]) => void) => {
      const c: Kafka.KafkaConsumer = new Consumer(
        {
          'bootstrap.servers': BROKERS,
          'group.id': group,
          'enable.auto.commit': false,
          'group.protocol': 'consumer',
          rebalance_cb: (err: LibrdKafkaError, a: Assignment[]) => {
            try {
              if (err.code === E.ERR__ASSIGN_PARTITIONS) c.incrementalAssign(a);
              else if (closing) c.incrementalUnassign(a);
              else onRevoke(c, a);
            } catch (e) {
              errors.push(e as Error);
            }
          },
        },
        { 'auto.offset.reset': 'earliest' },
      );
      c.setDefaultConsumeTimeout(100);
      return c;
    };
    const a = make((_c, revoked) => (pendingRevoke = revoked));
    const b = make((c, revoked) => c.incrementalUnassign(revoked));
    await connect(a);
    await connect(b);
    try {
      a.subscribe([topic]);
      await waitFor(async () => (await consumeOnce(a), a.assignments().length === 2), {
        timeoutMs: 30_000,
        what: 'a owning both partitions',
        intervalMs: 0,
      });
      b.subscribe([topic]);
      await waitFor(
        async () => (await consumeOnce(a), await consumeOnce(b), pendingRevoke !== undefined),
        {
          timeoutMs: 30_000,
          what: 'a revoke on a',
          intervalMs: 0,
        },
      );
      const kept = a
        .assignments()
        .filter((x) => !pendingRevoke!.some((r) => r.partition === x.partition));
      assert.equal(kept.length, 1, 'one partition kept');
      await produce(
        topic,
        Array.from({ length: 10 }, (_, i) => ({
          key: `${i}`,
          value: 'v',
          partition: kept[0]!.partition,
        })),
      );
      // While the revoke is pending, the kept partition delivers nothing either.
      const during: Message[] = [];
      for (let i = 0; i < 15; i++) during.push(...(await consumeOnce(a)));
      assert.equal(during.length, 0, 'no messages while the revoke is pending');
      a.incrementalUnassign(pendingRevoke!);
      const after: Message[] = [];
      await waitFor(async () => (after.push(...(await consumeOnce(a))), after.length >= 10), {
        timeoutMs: 20_000,
        what: 'the kept partition to flow again',
        intervalMs: 0,
      });
      assert.ok(after.every((m) => m.partition === kept[0]!.partition));
      assert.deepEqual(errors, []);
    } finally {
      closing = true;
      await Promise.all([a, b].map((c) => new Promise<void>((r) => c.disconnect(() => r()))));
    }
  });

  it('allows only unassign in the final revoke fired by disconnect()', async () => {
    const topic = uniqueName('contract-close');
    await createTopic(topic, 1);
    const outcomes: Record<string, string> = {};
    let assigned = false;
    const c: Kafka.KafkaConsumer = new Consumer(
      {
        'bootstrap.servers': BROKERS,
        'group.id': uniqueName('contract'),
        'enable.auto.commit': false,
        'enable.auto.offset.store': false,
        rebalance_cb: (err: LibrdKafkaError, a: Assignment[]) => {
          if (err.code === E.ERR__ASSIGN_PARTITIONS) {
            c.assign(a);
            assigned = true;
            return;
          }
          for (const [name, fn] of [
            ['commit', () => c.commit({ topic, partition: 0, offset: 0 })],
            ['offsetsStore', () => c.offsetsStore([{ topic, partition: 0, offset: 0 }])],
            ['unassign', () => c.unassign()],
          ] as const) {
            try {
              fn();
              outcomes[name] = 'ok';
            } catch (e) {
              outcomes[name] = (e as Error).message;
            }
          }
        },
      },
      {},
    );
    c.setDefaultConsumeTimeout(100);
    await connect(c);
    c.subscribe([topic]);
    await waitFor(async () => (await consumeOnce(c), assigned), {
      timeoutMs: 30_000,
      what: 'assignment',
      intervalMs: 0,
    });
    await new Promise<void>((r) => c.disconnect(() => r()));
    // librdkafka refuses commits here ("Erroneous state" or "disconnected"); unassign works.
    assert.notEqual(outcomes.commit, 'ok', JSON.stringify(outcomes));
    assert.notEqual(outcomes.commit, undefined, 'the final revoke fired');
    assert.notEqual(outcomes.offsetsStore, 'ok', JSON.stringify(outcomes));
    assert.equal(outcomes.unassign, 'ok');
  });

  for (const [name, protocolConfig] of [
    [
      'cooperative-sticky',
      {
        'partition.assignment.strategy': 'cooperative-sticky',
        'session.timeout.ms': 6000,
        'heartbeat.interval.ms': 500,
      },
    ],
    ['KIP-848', { 'group.protocol': 'consumer' }],
  ] as const) {
    it(`answers commit() of the current assignment with ERR__ASSIGNMENT_LOST only once the assignment is lost (${name})`, async () => {
      const topic = uniqueName('contract-lost');
      await createTopic(topic, 1);
      const answers: number[] = [];
      const revokes: { probe?: number }[] = [];
      let assigned = false;
      let revoking = false;
      let closing = false;
      const c: Kafka.KafkaConsumer = new Consumer(
        {
          'bootstrap.servers': BROKERS,
          'group.id': uniqueName('contract'),
          'enable.auto.commit': false,
          'enable.auto.offset.store': false,
          'max.poll.interval.ms': 6000,
          offset_commit_cb: true,
          ...protocolConfig,
          rebalance_cb: (err: LibrdKafkaError, a: Assignment[]) => {
            if (err.code === E.ERR__ASSIGN_PARTITIONS) {
              try {
                c.incrementalAssign(a);
              } catch (assignErr) {
                // The rejoin after the loss can answer during disconnect(): node-rdkafka refuses
                // incrementalAssign then, and librdkafka's close waits for an answer; an unassign
                // is the one it takes (as the library does, docs/binding-behaviours.md).
                if (!closing) throw assignErr;
                c.unassign();
                return;
              }
              assigned = a.length > 0 || assigned;
              return;
            }
            // The revoke callback looks the same whether the assignment is lost or not; ask.
            if (closing) {
              c.incrementalUnassign(a); // the final revoke of disconnect(): only unassign works
              return;
            }
            revoking = true;
            revokes.push({});
            c.commit();
          },
        } as Kafka.ConsumerGlobalConfig,
        {},
      );
      c.on('offset.commit', (err: LibrdKafkaError | undefined, offsets: TopicPartitionOffset[]) => {
        if (offsets.every((o) => o.offset === undefined)) answers.push(err?.code ?? 0);
      });
      c.setDefaultConsumeTimeout(100);
      await connect(c);
      try {
        c.subscribe([topic]);
        await waitFor(async () => (await consumeOnce(c), assigned), {
          timeoutMs: 30_000,
          what: 'assignment',
          intervalMs: 0,
        });
        // Assigned and healthy: nothing is stored, so librdkafka answers ERR__NO_OFFSET locally.
        c.commit();
        await waitFor(async () => (await consumeOnce(c), answers.length === 1), {
          timeoutMs: 10_000,
          what: 'the answer of a healthy member',
          intervalMs: 0,
        });
        assert.equal(answers[0], E.ERR__NO_OFFSET);
        // Stop polling past max.poll.interval.ms: librdkafka leaves the group and the assignment
        // is lost; the revoke that follows must answer ERR__ASSIGNMENT_LOST.
        await new Promise((r) => setTimeout(r, 9000));
        const consumeErrors: number[] = [];
        const poll = (): Promise<void> =>
          new Promise((resolve) =>
            c.consume(10, (err) => {
              if (err && err.code !== E.ERR__TIMED_OUT) consumeErrors.push(err.code);
              resolve();
            }),
          );
        await waitFor(async () => (await poll(), revoking && answers.length === 2), {
          timeoutMs: 20_000,
          what: 'the revoke of the lost assignment and its answer',
          intervalMs: 0,
        });
        assert.equal(answers[1], E.ERR__ASSIGNMENT_LOST, JSON.stringify(answers));
        assert.ok(consumeErrors.includes(E.ERR__MAX_POLL_EXCEEDED), JSON.stringify(consumeErrors));
        c.incrementalUnassign(c.assignments());
      } finally {
        closing = true;
        await new Promise<void>((r) => c.disconnect(() => r()));
      }
    });
  }

  it('neither sends nor returns commit metadata (node-rdkafka 3.x): the completed-offset memory needs its own topic', async () => {
    const topic = uniqueName('contract-metadata');
    await createTopic(topic, 1);
    const c = new Consumer(
      {
        'bootstrap.servers': BROKERS,
        'group.id': uniqueName('contract'),
        'enable.auto.commit': false,
      },
      {},
    );
    await connect(c);
    try {
      c.commitSync([{ topic, partition: 0, offset: 0, metadata: 'remember-me' } as never]);
      const got = await new Promise<Record<string, unknown>[]>((resolve, reject) =>
        c.committed([{ topic, partition: 0 }], 10_000, (err, r) =>
          err ? reject(err) : resolve(r as unknown as Record<string, unknown>[]),
        ),
      );
      assert.equal(got[0]?.offset, 0, 'the offset itself is committed');
      assert.notEqual(got[0]?.metadata, 'remember-me', JSON.stringify(got));
    } finally {
      await new Promise<void>((r) => c.disconnect(() => r()));
    }
  });
});
