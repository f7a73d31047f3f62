import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import type { KafkaMessage, OutputRecord } from '../lib';
import { protocolVariants } from './chaos/protocols';
import {
  BROKERS,
  call,
  committedOffsets,
  commitOffsetsForGroup,
  createTopic,
  produce,
  uniqueName,
  waitFor,
} from './helpers/kafka';
import { useConsumers } from './helpers/consumers';
import { useTestOutput } from './helpers/output';

/**
 * The next owner of partitions whose offsets an open transaction holds (the member that wrote it
 * was killed, or its commit's outcome is unknown): it must start where that transaction leaves the
 * group once it ends — never read around it.
 *
 * Here a plain node-rdkafka member owns the 4 partitions and a transactional producer sends offsets
 * of all of them (10, over a committed 5) in a transaction it keeps open. processTransactional()
 * joins: it gets 2 partitions (the first step), the first member leaves, it gets the other 2 (a
 * second step). librdkafka 2.12 starts the first step's partitions at auto.offset.reset (offset 0)
 * when that second step changes the assignment while its committed-offset fetch is answered
 * "unstable offset commit" (docs/binding-behaviours.md, "A pending transaction's offsets"); the
 * library reads the offsets itself and waits. Then the transaction is committed or aborted.
 */
const PARTITIONS = 4;
const PER_PARTITION = 30;
const COMMITTED = 5;
const PENDING = 10;

describe('a partition whose offsets an open transaction holds (real broker)', function () {
  this.timeout(180_000);
  const output = useTestOutput();
  const { consumer, subs } = useConsumers(output);
  const PROTOCOLS = protocolVariants({
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 500,
    maxPollIntervalMs: 60_000,
  }).filter(([name]) => name !== 'eager');

  for (const [protocol, config] of PROTOCOLS) {
    for (const outcome of ['committed', 'aborted', 'closed'] as const) {
      const title =
        outcome === 'closed'
          ? `${protocol}: the next owner closed while it waits: close() ends well within its deadline, nothing handled; a later owner starts where the aborted transaction leaves the group`
          : `${protocol}: the next owner waits for the transaction, then starts where its ${outcome} outcome leaves the group`;
      it(title, async () => {
        const topic = uniqueName(`pending-start-${protocol}`);
        const group = uniqueName(`pending-start-group-${protocol}`);
        await createTopic(topic, PARTITIONS);
        await produce(
          topic,
          Array.from({ length: PARTITIONS * PER_PARTITION }, (_, i) => ({
            partition: i % PARTITIONS,
            key: 'k',
            value: `${i % PARTITIONS}:${Math.floor(i / PARTITIONS)}`,
          })),
        );
        const tps = Array.from({ length: PARTITIONS }, (_, partition) => ({ topic, partition }));
        await commitOffsetsForGroup(
          group,
          tps.map((tp) => ({ ...tp, offset: COMMITTED })),
        );

        // The first member, and its open transaction with offsets of every partition.
        const first = new Kafka.KafkaConsumer(
          {
            'bootstrap.servers': BROKERS,
            'group.id': group,
            'enable.auto.commit': false,
            ...(config as Record<string, unknown>),
            rebalance_cb: (err: Kafka.LibrdKafkaError, assignment: Kafka.Assignment[]) => {
              try {
                if (err.code === Kafka.CODES.ERRORS.ERR__ASSIGN_PARTITIONS) {
                  first.incrementalAssign(assignment);
                } else first.incrementalUnassign(assignment);
              } catch {
                // node-rdkafka refuses the call once its disconnect began: librdkafka's close
                // releases the assignment itself.
              }
            },
          } as Kafka.ConsumerGlobalConfig,
          { 'auto.offset.reset': 'earliest' },
        );
        await call((cb) => first.connect({ timeout: 15_000 }, cb));
        first.subscribe([topic]);
        const polling = setInterval(() => first.consume(1, () => undefined), 50);
        const txn = new Kafka.Producer({
          'bootstrap.servers': BROKERS,
          'transactional.id': uniqueName('pending-start-txn'),
          'transaction.timeout.ms': 120_000,
        } as Kafka.ProducerGlobalConfig);
        try {
          await waitFor(() => first.assignments().length === PARTITIONS, {
            timeoutMs: 30_000,
            what: 'the first member to own every partition',
          });
          clearInterval(polling);
          await call((cb) => txn.connect({ timeout: 15_000 }, cb));
          await call((cb) => txn.initTransactions(15_000, cb));
          await call((cb) => txn.beginTransaction(cb));
          await call((cb) =>
            txn.sendOffsetsToTransaction(
              tps.map((tp) => ({ ...tp, offset: PENDING })),
              first,
              15_000,
              cb,
            ),
          );

          // The next owner joins; it gets the partitions in two steps.
          const handled: { partition: number; offset: number }[] = [];
          // What the owners saw, for a failure's message: their rebalances (with what each revoke's
          // commit did with the open transaction) and their events (an abort and a redo repeat
          // handler calls, which exactly once allows; this test expects none).
          const seen: string[] = [];
          const owners: ReturnType<typeof consumer>[] = [];
          const owner = (name: string) => {
            const c = consumer(name, {
              config: { 'group.id': group, ...(config as Record<string, unknown>) },
              topics: [topic],
              closeTimeoutMs: 30_000,
            });
            const t0 = Date.now();
            subs.push(
              c.rebalances$.subscribe((e) =>
                seen.push(
                  `${name} +${Date.now() - t0}ms ${e.type} ${e.partitions.map((p) => p.partition).join(',')}${e.type === 'committed' && e.transaction ? ` transaction ${e.transaction.outcome}${e.transaction.reason ? ` (${e.transaction.reason})` : ''}` : ''}`,
                ),
              ),
              c.events$.subscribe((e) =>
                seen.push(`${name} +${Date.now() - t0}ms event ${e.type}`),
              ),
            );
            subs.push(
              c
                .processTransactional(
                  (m: KafkaMessage): OutputRecord[] => {
                    handled.push({ partition: m.partition, offset: m.offset });
                    return [];
                  },
                  { transactionalId: uniqueName(`pending-start-${name}`) },
                )
                .subscribe({ error: (err: unknown) => output.logger('test').error({ err }) }),
            );
            owners.push(c);
            return c;
          };
          const next = owner('next');
          const firstPolling = setInterval(() => first.consume(1, () => undefined), 50);
          await waitFor(() => first.assignments().length < PARTITIONS, {
            timeoutMs: 60_000,
            what: 'the first member to give partitions up',
          });
          // The first member leaves gracefully: unsubscribed, its revoke answered, then closed.
          first.unsubscribe();
          await waitFor(() => first.assignments().length === 0, {
            timeoutMs: 30_000,
            what: 'the first member to release its partitions',
          });
          clearInterval(firstPolling);
          await call((cb) => first.disconnect(cb));
          // The second step is due now (librdkafka would read around the transaction within a
          // second of it): watched for 8 s, failing at the first record below the pending offsets.
          const watchUntil = Date.now() + 8000;
          while (Date.now() < watchUntil) {
            const early = handled.filter((h) => h.offset < PENDING);
            assert.deepEqual(
              early,
              [],
              `nothing below ${PENDING} handled while the transaction is open`,
            );
            await new Promise((resolve) => setTimeout(resolve, 50));
          }

          if (outcome === 'closed') {
            // librdkafka waits for the assign call meanwhile; the close must answer it (and the
            // revoke of what librdkafka's group view holds) and leave, not wait out its deadline.
            const closing = Date.now();
            await next.close();
            const closeMs = Date.now() - closing;
            assert.ok(closeMs < 12_000, `close() took ${closeMs} ms (deadline 30 s)`);
            assert.deepEqual(handled, [], 'nothing handled by the member that closed');
            owner('later');
          }
          if (outcome === 'committed') await call((cb) => txn.commitTransaction(15_000, cb));
          else await call((cb) => txn.abortTransaction(15_000, cb));
          const from = outcome === 'committed' ? PENDING : COMMITTED;
          await waitFor(
            async () =>
              (await committedOffsets(group, topic, PARTITIONS)).every((o) => o === PER_PARTITION),
            { timeoutMs: 60_000, what: 'every partition committed at its end' },
          );
          // Exactly once allows handler calls to repeat after a transaction was aborted (its
          // outputs thrown away, its partitions' work since redone: a rebalance step can make the
          // broker refuse the offsets of a transaction open across it); each offset from `from` is
          // handled, none below it, and a repeat only where a transaction was aborted.
          const aborted = owners.reduce((n, c) => n + (c.metrics().transactions?.aborted ?? 0), 0);
          const repeats =
            handled.length - new Set(handled.map((h) => `${h.partition}@${h.offset}`)).size;
          const said = `; aborted transactions ${aborted}, repeated calls ${repeats}; the owners saw:\n${seen.join('\n')}`;
          for (let p = 0; p < PARTITIONS; p++) {
            assert.deepEqual(
              [...new Set(handled.filter((h) => h.partition === p).map((h) => h.offset))].sort(
                (a, b) => a - b,
              ),
              Array.from({ length: PER_PARTITION - from }, (_, i) => from + i),
              `partition ${p}: every offset from ${from}, none below${said}`,
            );
          }
          assert.ok(repeats === 0 || aborted > 0, `handler calls repeated without an abort${said}`);
        } finally {
          clearInterval(polling);
          txn.setPollInterval(0);
          await new Promise<void>((resolve) => txn.disconnect(() => resolve()));
          if (first.isConnected()) await call((cb) => first.disconnect(cb));
        }
      });
    }
  }
});
