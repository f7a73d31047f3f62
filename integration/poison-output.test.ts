import assert from 'node:assert/strict';
import { TransactionError } from '../lib';
import type { ConsumerEvent, KafkaMessage, OutputRecord } from '../lib';
import { committedOffsets, createTopic, produce, uniqueName, waitFor } from './helpers/kafka';
import { useConsumers } from './helpers/consumers';
import { useTestOutput } from './helpers/output';
import { readTopic } from './eos/scenario';
import { MAX_ATTRIBUTED_FAILURES } from '../lib/internal/transactions/input-faults';

/**
 * The aborts a poison input may cost: it is judged after at most MAX_ATTRIBUTED_FAILURES
 * transactions of its own failed, and each transaction a refused record aborted may abort the next
 * one too (requests in flight behind the refused one fail with "skipped sequence numbers" and
 * librdkafka bumps the producer epoch, an abortable error: how many depends on timing).
 */
const MAX_ABORTS = 2 * MAX_ATTRIBUTED_FAILURES;

/**
 * processTransactional() with an output record the broker refuses after produce() took it: a 4 KiB
 * record to a topic whose `max.message.bytes` is 1024, and a null key to a compacted topic. With
 * `onFailure: 'stop'` the consumer stops with a TransactionError naming the input and the output
 * topic, within a bounded number of aborts, and nothing at or after the input in its partition is
 * committed or visible to read_committed readers; with `'skip'` the input counts with no output,
 * every other input's record is there exactly once and the group's offset is at the input's end.
 */
const MESSAGES = 40;
const POISON_OFFSET = 17;

describe('processTransactional(): poison outputs (real broker)', function () {
  this.timeout(120_000);
  const output = useTestOutput();
  const { consumer, subs } = useConsumers(output);

  const cases: {
    name: string;
    topicConfig: Record<string, string>;
    poison: (m: KafkaMessage, topic: string) => OutputRecord;
  }[] = [
    {
      name: 'a 4 KiB record to a topic with max.message.bytes 1024',
      topicConfig: { 'max.message.bytes': '1024' },
      poison: (m: KafkaMessage, topic: string): OutputRecord => ({
        topic,
        key: m.key,
        value: 'x'.repeat(4096),
      }),
    },
    {
      name: 'a null key to a compacted topic',
      topicConfig: { 'cleanup.policy': 'compact' },
      poison: (m: KafkaMessage, topic: string): OutputRecord => ({
        topic,
        key: null,
        value: `${m.partition}:${m.offset}`,
      }),
    },
  ];

  for (const c of cases) {
    for (const onFailure of ['stop', 'skip'] as const) {
      it(`${c.name}, onFailure '${onFailure}'`, async () => {
        const input = uniqueName('poison-in');
        const out = uniqueName('poison-out');
        const group = uniqueName('poison-group');
        await createTopic(input, 1);
        await createTopic(out, 1, c.topicConfig);
        await produce(
          input,
          Array.from({ length: MESSAGES }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
        );
        const events: ConsumerEvent[] = [];
        const rc = consumer(group, { config: { 'group.id': group }, topics: [input] });
        subs.push(rc.events$.subscribe((e) => events.push(e)));
        let error: unknown;
        let stopped = false;
        const startedAt = Date.now();
        subs.push(
          rc
            .processTransactional(
              (m) =>
                m.offset === POISON_OFFSET
                  ? [c.poison(m, out)]
                  : [{ topic: out, key: m.key, value: `${m.partition}:${m.offset}` }],
              { onFailure, maxMs: 50, retry: { count: 0 } },
            )
            .subscribe({
              error: (e: unknown) => {
                error = e;
                stopped = true;
              },
            }),
        );
        const expected = Array.from({ length: MESSAGES }, (_, o) => `0:${o}`);
        if (onFailure === 'stop') {
          await waitFor(() => stopped, { timeoutMs: 60_000, what: 'the pipeline to stop' });
          const err = error as TransactionError;
          assert.ok(err instanceof TransactionError, String(err));
          assert.deepEqual(err.input, { topic: input, partition: 0, offset: POISON_OFFSET });
          assert.equal(err.outputTopic, out);
          const t = rc.metrics().transactions;
          console.log(
            `      stopped after ${Date.now() - startedAt} ms, ${t?.aborted} aborts, ${t?.refusedRecords} refused records: ${err.message}`,
          );
          assert.ok((t?.aborted ?? 0) <= MAX_ABORTS, `bounded aborts (${t?.aborted})`);
          await rc.close();
          const [committed] = await committedOffsets(group, input, 1);
          assert.ok(
            committed === undefined || committed <= POISON_OFFSET,
            `nothing at or after the poison input committed (${committed})`,
          );
          const seen = await readTopic(out, 1, 'read_committed');
          assert.equal(new Set(seen).size, seen.length, 'nothing twice');
          assert.deepEqual(
            seen.filter((v) => Number(v.split(':')[1]) >= POISON_OFFSET),
            [],
            'nothing at or after the poison input visible to read_committed readers',
          );
          assert.deepEqual(seen, expected.slice(0, seen.length), 'what is visible, in order');
        } else {
          await waitFor(async () => (await committedOffsets(group, input, 1))[0] === MESSAGES, {
            timeoutMs: 60_000,
            what: 'the group committed to the input end',
            intervalMs: 250,
          });
          assert.equal(error, undefined);
          const t = rc.metrics().transactions;
          console.log(
            `      skipped after ${Date.now() - startedAt} ms, ${t?.aborted} aborts, ${t?.refusedRecords} refused records`,
          );
          await rc.close();
          const seen = (await readTopic(out, 1, 'read_committed')).sort();
          assert.deepEqual(
            seen,
            expected.filter((v) => v !== `0:${POISON_OFFSET}`).sort(),
            'every other input exactly once',
          );
          const skipped = events.filter((e) => e.type === 'message-skipped');
          assert.equal(skipped.length, 1);
          assert.equal((skipped[0] as { offset: number }).offset, POISON_OFFSET);
          assert.equal(t?.skippedInputs, 1);
        }
      });
    }
  }
});
