import assert from 'node:assert/strict';
import pino from 'pino';
import { ConfigError, ReactiveConsumer } from '../../lib';
import type { KafkaMessage } from '../../lib';
import { MockKafka, VirtualClock, nextRebalance, waitFor } from '../../lib/testing';

const silent = pino({ level: 'silent' });

describe('testing kit: MockKafka', () => {
  it('runs process() to the end: every record once, everything committed', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 3 });
    await mock.produce(
      topic,
      Array.from({ length: 30 }, (_, i) => ({ value: `v${i}`, key: `k${i}` })),
    );
    const options = mock.consumerOptions({ topics: [topic] });
    const consumer = new ReactiveConsumer({ ...options, logger: silent });
    const seen: string[] = [];
    consumer.process(async (m: KafkaMessage) => void seen.push(m.value!.toString())).subscribe();
    await waitFor(() => seen.length === 30, { timeoutMs: 10_000, what: '30 processed' });
    await consumer.close();
    assert.deepEqual(seen.slice().sort(), Array.from({ length: 30 }, (_, i) => `v${i}`).sort());
    assert.deepEqual(await mock.uncommitted(options.config['group.id'], topic), {});
    await mock.close();
  });
});

/** The protocols a group can run, as a user's consumer options say them. */
const PROTOCOLS = [
  { name: 'KIP-848 (group.protocol=consumer)', groupProtocol: 'consumer' as const, extra: {} },
  {
    name: 'classic eager',
    groupProtocol: 'classic' as const,
    extra: { 'partition.assignment.strategy': 'range' },
  },
  {
    name: 'classic cooperative-sticky',
    groupProtocol: 'classic' as const,
    extra: { 'partition.assignment.strategy': 'cooperative-sticky' },
  },
];

describe('testing kit: MockKafka rebalances', () => {
  for (const p of PROTOCOLS) {
    it(`${p.name}: a member joins and leaves mid-stream; nothing lost, nothing processed twice, all committed`, async () => {
      const mock = new MockKafka({ groupProtocol: p.groupProtocol });
      const { name: topic } = await mock.createTopic({ partitions: 6 });
      await mock.produce(
        topic,
        Array.from({ length: 600 }, (_, i) => `m${i}`),
      );
      const base = mock.consumerOptions({ topics: [topic] });
      const groupId = base.config['group.id'];
      const consumer = new ReactiveConsumer({
        ...base,
        config: { ...base.config, ...p.extra },
        logger: silent,
      });
      const seen = new Map<string, number>();
      consumer
        .process(async (m: KafkaMessage) => {
          await new Promise((r) => setTimeout(r, 1));
          const v = m.value!.toString();
          seen.set(v, (seen.get(v) ?? 0) + 1);
        })
        .subscribe();
      await waitFor(() => seen.size >= 30, { timeoutMs: 10_000, what: 'the first 30' });
      const revoked = nextRebalance(consumer, 'revoked', { timeoutMs: 10_000 });
      const member = await mock.joinGroup(groupId, [topic], { config: p.extra });
      await member.waitForAssignment(1, { timeoutMs: 10_000 });
      const { partitions } = await revoked;
      assert.ok(partitions.length >= 1);
      const back = nextRebalance(consumer, 'assigned', { partitions, timeoutMs: 10_000 });
      await member.leave();
      await back;
      await waitFor(() => seen.size === 600, { timeoutMs: 20_000, what: 'all 600' });
      await consumer.close();
      const twice = [...seen].filter(([, n]) => n > 1).map(([v]) => v);
      assert.deepEqual(twice, []);
      assert.deepEqual(await mock.uncommitted(groupId, topic), {});
      await mock.close();
    });
  }
});

describe('testing kit: MockKafka writes, transactions and commit faults', () => {
  it('a dead-lettered message is in the dead-letter topic, with its headers, and its offset committed', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 1 });
    const { name: dlq } = await mock.createTopic({ partitions: 1 });
    await mock.produce(topic, ['ok-0', 'poison', 'ok-2']);
    const options = mock.consumerOptions({ topics: [topic] });
    const consumer = new ReactiveConsumer({ ...options, logger: silent });
    consumer
      .process(
        async (m: KafkaMessage) => {
          if (m.value!.toString() === 'poison') throw new Error('bad order');
        },
        {
          retry: { count: 1, initialDelayMs: 1 },
          onFailure: 'dead-letter',
          deadLetter: { topic: dlq },
        },
      )
      .subscribe();
    const groupId = options.config['group.id'];
    await waitFor(async () => (await mock.committedOffsets(groupId, topic))[0] === 3, {
      timeoutMs: 10_000,
      what: 'offset 3 committed',
    });
    await consumer.close();
    const dead = await mock.readRecords(dlq);
    assert.deepEqual(
      dead.map((r) => r.value?.toString()),
      ['poison'],
    );
    const headers = Object.fromEntries(dead[0]!.headers.map(([k, v]) => [k, v.toString()]));
    assert.equal(headers['dlq.original.offset'], '1');
    assert.match(headers['dlq.error.message'] ?? '', /bad order/);
    await mock.close();
  });

  it('processTransactional(): outputs and input offsets commit together; read_committed readers see each once', async () => {
    const mock = new MockKafka();
    const { name: input } = await mock.createTopic({ partitions: 2 });
    const { name: output } = await mock.createTopic({ partitions: 2 });
    await mock.produce(
      input,
      Array.from({ length: 40 }, (_, i) => `i${i}`),
    );
    const options = mock.consumerOptions({ topics: [input] });
    const consumer = new ReactiveConsumer({ ...options, logger: silent });
    consumer
      .processTransactional(
        async (m: KafkaMessage) => [
          { topic: output, key: m.key, value: Buffer.from(m.value!.toString().toUpperCase()) },
        ],
        { transactionalIdPrefix: 'mock-spec' },
      )
      .subscribe();
    await waitFor(async () => (await mock.readRecords(output)).length === 40, {
      timeoutMs: 10_000,
      what: '40 outputs',
    });
    await consumer.close();
    const written = (await mock.readRecords(output)).map((r) => r.value!.toString());
    assert.deepEqual(written.sort(), Array.from({ length: 40 }, (_, i) => `I${i}`).sort());
    assert.deepEqual(await mock.uncommitted(options.config['group.id'], input), {});
    await mock.close();
  });

  it('an input transaction that aborted is never given to a read_committed consumer; an open one holds what follows it', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 1 });
    await mock.produce(topic, ['a']);
    await mock.produce(topic, ['aborted-1', 'aborted-2'], { transaction: 'abort' });
    await mock.produce(topic, ['b'], { transaction: 'commit' });
    await mock.produce(topic, ['open'], { transaction: 'open' });
    await mock.produce(topic, ['after-open']);
    assert.deepEqual(
      (await mock.readRecords(topic, { isolation: 'read_uncommitted' })).map((r) =>
        r.value!.toString(),
      ),
      ['a', 'aborted-1', 'aborted-2', 'b', 'open', 'after-open'],
    );
    const options = mock.consumerOptions({ topics: [topic] });
    const consumer = new ReactiveConsumer({ ...options, logger: silent });
    const seen: string[] = [];
    consumer.process(async (m: KafkaMessage) => void seen.push(m.value!.toString())).subscribe();
    await waitFor(() => seen.length === 2, { timeoutMs: 10_000, what: 'a and b' });
    // Offsets: a 0, aborted 1-2, abort marker 3, b 4, commit marker 5, open 6.
    await waitFor(
      async () => (await mock.committedOffsets(options.config['group.id'], topic))[0] === 6,
      {
        timeoutMs: 10_000,
        what: 'committed up to the open transaction',
      },
    );
    await consumer.close();
    assert.deepEqual(seen, ['a', 'b']);
    await mock.close();
  });

  for (const appliedAnyway of [false, true]) {
    it(`commits that fail (${appliedAnyway ? 'timed out yet applied' : 'timed out, not applied'}) lose nothing and repeat nothing (virtual time: the doubt window passes at once)`, async () => {
      const clock = new VirtualClock({ autoAdvance: true });
      clock.install();
      try {
        const mock = new MockKafka();
        const { name: topic } = await mock.createTopic({ partitions: 2 });
        await mock.produce(
          topic,
          Array.from({ length: 100 }, (_, i) => `m${i}`),
        );
        const options = mock.consumerOptions({ topics: [topic] });
        const groupId = options.config['group.id'];
        mock.failCommits(groupId, { count: 3, code: 7, appliedAnyway });
        const consumer = new ReactiveConsumer({ ...options, commitIntervalMs: 5, logger: silent });
        const seen = new Map<string, number>();
        consumer
          .process(async (m: KafkaMessage) => {
            const v = m.value!.toString();
            seen.set(v, (seen.get(v) ?? 0) + 1);
          })
          .subscribe();
        await waitFor(() => seen.size === 100, { timeoutMs: 10_000, what: 'all 100' });
        await waitFor(() => consumer.metrics().commits.failed >= 3, { what: '3 failed commits' });
        await consumer.close();
        assert.deepEqual(
          [...seen.values()].filter((n) => n > 1),
          [],
        );
        assert.deepEqual(await mock.uncommitted(groupId, topic), {});
        await mock.close();
      } finally {
        clock.uninstall();
      }
    });
  }
});

describe('testing kit: VirtualClock with MockKafka', () => {
  /** A pipeline whose first two attempts fail, with 30-minute backoffs: an hour of waiting. */
  async function flakyPipeline(mock: MockKafka) {
    const { name: topic } = await mock.createTopic({ partitions: 1 });
    await mock.produce(topic, ['flaky']);
    const options = mock.consumerOptions({ topics: [topic] });
    const consumer = new ReactiveConsumer({ ...options, logger: silent });
    const run = { attempts: 0, committed: undefined as number | undefined };
    consumer
      .process(
        async () => {
          run.attempts += 1;
          if (run.attempts < 3) throw new Error('not yet');
        },
        { retry: { count: 5, initialDelayMs: 1_800_000, maxDelayMs: 1_800_000, jitter: 0 } },
      )
      .subscribe();
    const poll = () => {
      void mock
        .committedOffsets(options.config['group.id'], topic)
        .then((c) => (run.committed = c[0]));
      return run.committed === 1;
    };
    return { consumer, run, poll };
  }

  it('manual: runUntil() fires timers in order until the condition holds; an hour of backoff passes', async () => {
    const clock = new VirtualClock();
    clock.install();
    try {
      const mock = new MockKafka();
      const { consumer, run, poll } = await flakyPipeline(mock);
      const realStart = performance.now();
      const virtualMs = await clock.runUntil(poll, {
        withinMs: 2 * 3_600_000,
        what: 'offset 1 committed',
      });
      console.log(
        `      ${virtualMs} virtual ms in ${(performance.now() - realStart).toFixed(0)} real ms`,
      );
      assert.equal(run.attempts, 3);
      assert.ok(virtualMs >= 3_600_000, `two 30-minute backoffs passed (${virtualMs} virtual ms)`);
      let closed = false;
      void consumer.close().then(() => (closed = true));
      await clock.runUntil(() => closed, { what: 'close() to resolve' });
      await mock.close();
    } finally {
      clock.uninstall();
    }
  });

  it('autoAdvance: plain awaits, time jumps over every wait', async () => {
    const clock = new VirtualClock({ autoAdvance: true });
    clock.install();
    try {
      const mock = new MockKafka();
      const { consumer, run, poll } = await flakyPipeline(mock);
      const startedAt = Date.now();
      await waitFor(poll, { timeoutMs: 2 * 3_600_000, what: 'offset 1 committed' });
      assert.equal(run.attempts, 3);
      assert.ok(Date.now() - startedAt >= 3_600_000, 'virtual time moved past both backoffs');
      await consumer.close();
      await mock.close();
    } finally {
      clock.uninstall();
    }
  });
});

describe('testing kit: MockKafka broker rules', () => {
  const call = (fn: (cb: (err: unknown) => void) => void): Promise<unknown> =>
    new Promise((resolve) => fn((err) => resolve(err)));

  it('shares partitions evenly and disjointly, and a cooperative member keeps what stays its own', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 7 });
    const a = await mock.joinGroup('g', [topic]);
    await a.waitForAssignment(7);
    const b = await mock.joinGroup('g', [topic]);
    const c = await mock.joinGroup('g', [topic]);
    await waitFor(
      () => b.assignment().length > 0 && c.assignment().length > 0 && a.assignment().length <= 3,
    );
    const shares = [a, b, c].map((m) => m.assignment().map((p) => p.partition));
    assert.deepEqual(shares.map((s) => s.length).sort(), [2, 2, 3]);
    assert.deepEqual(shares.flat().sort(), [0, 1, 2, 3, 4, 5, 6]);
    const before = a.assignment().map((p) => p.partition);
    await c.leave();
    await waitFor(() => a.assignment().length + b.assignment().length === 7);
    const after = a.assignment().map((p) => p.partition);
    assert.ok(
      before.every((p) => after.includes(p)),
      `a kept ${before} (now ${after})`,
    );
    await mock.close();
  });

  it('refuses a commit of a partition the member does not hold, and any commit once it left', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 2 });
    const c = new mock.binding.KafkaConsumer({ 'group.id': 'g', 'group.protocol': 'consumer' }, {});
    const answers: { code?: number }[] = [];
    c.on('offset.commit', (err: { code?: number } | undefined) => answers.push(err ?? {}));
    await call((cb) => c.connect({}, cb));
    c.subscribe([topic]);
    await waitFor(() => c.assignments().length === 2);
    const poll = () => call((cb) => c.consume(10, cb));
    c.commit([{ topic, partition: 0, offset: 0 }]);
    c.commit([{ topic, partition: 5, offset: 1 }]);
    await poll();
    assert.deepEqual(
      answers.map((a) => a.code),
      [undefined, 113],
    );
    c.unsubscribe();
    await waitFor(() => c.assignments().length === 0);
    await waitFor(async () => {
      c.commit([{ topic, partition: 0, offset: 0 }]);
      await poll();
      return answers[answers.length - 1]?.code === 25;
    });
    assert.deepEqual(await mock.committedOffsets('g', topic), { 0: 0 });
    await call((cb) => c.disconnect(cb));
    await mock.close();
  });

  it('a newer producer of a transactional.id fences the older one and aborts what it left open', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 1 });
    const older = new mock.binding.Producer({ 'transactional.id': 't' });
    await call((cb) => older.connect({}, cb));
    assert.equal(await call((cb) => older.initTransactions(1000, cb)), null);
    await call((cb) => older.beginTransaction(cb));
    older.produce(topic, 0, Buffer.from('left open'));
    const newer = new mock.binding.Producer({ 'transactional.id': 't' });
    await call((cb) => newer.connect({}, cb));
    await call((cb) => newer.initTransactions(1000, cb));
    const fenced = (await call((cb) => older.commitTransaction(1000, cb))) as { isFatal?: boolean };
    assert.equal(fenced?.isFatal, true);
    assert.deepEqual(await mock.readRecords(topic), []);
    assert.equal((await mock.readRecords(topic, { isolation: 'read_uncommitted' })).length, 1);
    await mock.close();
  });

  it('a transaction with a record the broker refused does not commit: the input is not committed, nothing is visible', async () => {
    const mock = new MockKafka();
    const { name: input } = await mock.createTopic({ partitions: 1 });
    const { name: output } = await mock.createTopic({ partitions: 4 });
    await mock.produce(input, ['a', 'b', 'c']);
    const options = mock.consumerOptions({ topics: [input] });
    const consumer = new ReactiveConsumer({ ...options, logger: silent });
    let failure: unknown;
    consumer
      .processTransactional(
        async (m: KafkaMessage) => [
          // 'b' goes to a partition the topic does not have.
          { topic: output, partition: m.value!.toString() === 'b' ? 9 : 0, value: m.value },
        ],
        { transactionalIdPrefix: 'mock-refused' },
      )
      .subscribe({ error: (err: unknown) => (failure = err) });
    await waitFor(() => failure !== undefined, { timeoutMs: 20_000, what: 'the pipeline to stop' });
    await consumer.close();
    assert.equal((failure as { code?: string }).code, 'ERR_RKC_TRANSACTION', String(failure));
    const committed = (await mock.committedOffsets(options.config['group.id'], input))[0] ?? 0;
    assert.ok(committed <= 1, `no offset past the refused input 'b' (committed ${committed})`);
    const written = (await mock.readRecords(output)).map((r) => r.value!.toString());
    assert.ok(!written.includes('b') && !written.includes('c'), `visible: ${written}`);
    await mock.close();
  });

  it('checks settings as librdkafka does, and refuses a member of another protocol in a group', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 2 });
    const options = mock.consumerOptions({ topics: [topic] });
    assert.throws(
      () =>
        new ReactiveConsumer({
          ...options,
          topicConfig: { 'auto.offset.reset': 'earliset' as never },
          logger: silent,
        }),
      /auto\.offset\.reset/,
    );
    const groupId = options.config['group.id'];
    const consumer = new ReactiveConsumer({ ...options, logger: silent });
    const owned = new Set<number>();
    consumer.rebalances$.subscribe((e) => {
      for (const p of e.partitions) {
        if (e.type === 'assigned') owned.add(p.partition);
        if (e.type === 'revoked' || e.type === 'lost') owned.delete(p.partition);
      }
    });
    consumer.process(() => undefined).subscribe();
    await waitFor(() => owned.size === 2, { what: 'the consumer assigned' });
    const errors: { code?: number }[] = [];
    const eager = new mock.binding.KafkaConsumer(
      { 'group.id': groupId, 'partition.assignment.strategy': 'range' },
      {},
    );
    eager.on('event.error', (e: { code?: number }) => errors.push(e));
    await new Promise((resolve) => eager.connect({}, resolve));
    eager.subscribe([topic]);
    await waitFor(() => errors.length > 0, { what: 'the refusal' });
    assert.equal(errors[0]?.code, 23);
    assert.deepEqual(eager.assignments(), []);
    assert.equal(owned.size, 2, 'the group kept its member');
    eager.disconnect();
    await consumer.close();
    await mock.close();
  });

  it('a seek past the end resets by auto.offset.reset; a handler writing into a value changes no record', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 1 });
    await mock.produce(topic, ['m0', 'm1', 'm2']);
    const options = mock.consumerOptions({ topics: [topic] });
    const consumer = new ReactiveConsumer({ ...options, logger: silent });
    const seen: string[] = [];
    let sought = false;
    consumer
      .process((m: KafkaMessage) => {
        seen.push(m.value!.toString());
        m.value!.fill(42); // the handler's own copy
        if (!sought && seen.length === 3) {
          sought = true;
          void consumer.seek({ topic, partition: 0 }, { offset: 100 });
        }
      })
      .subscribe();
    await waitFor(() => seen.length >= 6, { what: 'read again from the start after the reset' });
    await consumer.close();
    assert.deepEqual(seen.slice(0, 6), ['m0', 'm1', 'm2', 'm0', 'm1', 'm2']);
    assert.deepEqual(
      (await mock.readRecords(topic)).map((r) => r.value!.toString()),
      ['m0', 'm1', 'm2'],
    );
    await mock.close();
  });

  it('refuses bad input: a transaction mode it does not know, a partition count out of range', async () => {
    const mock = new MockKafka();
    const { name: topic } = await mock.createTopic({ partitions: 1 });
    await assert.rejects(
      mock.produce(topic, ['x'], { transaction: 'comitted' as never }),
      /Expected `transaction` to be 'commit', 'abort' or 'open', got comitted/,
    );
    await assert.rejects(mock.createTopic({ partitions: 0 }), RangeError);
    const options = mock.consumerOptions({ topics: [topic] });
    assert.throws(
      () =>
        new ReactiveConsumer({
          ...options,
          config: { ...options.config, 'group.instance.id': 'pod-a' },
          logger: silent,
        }),
      (err: unknown) =>
        err instanceof ConfigError && /does not model static membership/.test(err.message),
    );
    assert.throws(() => new MockKafka({ groupProtocol: 'eager' as never }), RangeError);
    assert.deepEqual(await mock.readRecords(topic, { isolation: 'read_uncommitted' }), []);
    await mock.close();
  });
});
