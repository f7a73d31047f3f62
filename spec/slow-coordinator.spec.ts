/**
 * Calls that librdkafka does not resume, against a coordinator that answers in 1.5 s: each
 * sendOffsetsToTransaction and each committed() read starts over, and a call shorter than the
 * answer never succeeds (rd_kafka_send_offsets_to_transaction waits for its AddOffsetsToTxn answer
 * and turns one that came after the call's timeout into a retriable TIMED_OUT; rd_kafka_committed
 * sends a fresh OffsetFetch per call). So neither is made in one-second calls.
 */
import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import type { KafkaMessage, OutputRecord } from '../lib';
import { fakeTransactionalProducerFactory } from './fakes/fake-transactional-producer';
import type { FakeTransactionalProducer } from './fakes/fake-transactional-producer';
import { T, committed, harness, tp, until } from './helpers/harness';

const COORDINATOR_MS = 1500;
const ERR_TIMED_OUT = -185;

function slowCoordinatorHarness() {
  const box: { fake?: () => { commits: Map<string, number> } } = {};
  const p = fakeTransactionalProducerFactory(() => box.fake!());
  const sendTimeouts: number[] = [];
  const factory = (g: Record<string, unknown>): never => {
    const producer = p.factory(g) as unknown as FakeTransactionalProducer;
    const original = producer.sendOffsetsToTransaction.bind(producer);
    producer.sendOffsetsToTransaction = (offsets, consumer, timeout, cb) => {
      sendTimeouts.push(timeout);
      // The coordinator answers AddOffsetsToTxn after COORDINATOR_MS, whatever the timeout.
      setTimeout(() => {
        if (timeout < COORDINATOR_MS) {
          cb(
            Object.assign(new Error('Failed to add offsets to transaction: Local: Timed out'), {
              code: ERR_TIMED_OUT,
              isFatal: false,
              isRetriable: true,
              isTxnRequiresAbort: false,
            }),
          );
          return;
        }
        original(offsets, consumer, timeout, cb);
      }, COORDINATOR_MS);
    };
    return producer as never;
  };
  const h = harness({}, {}, { transactionalProducerFactory: factory as never });
  box.fake = h.fake;
  return { ...h, producer: p.producer, sendTimeouts };
}

describe('sendOffsetsToTransaction against a coordinator slower than one second', () => {
  const subs: Subscription[] = [];
  afterEach(() => {
    for (const s of subs.splice(0)) s.unsubscribe();
  });

  it('commits when the coordinator answers AddOffsetsToTxn in 1.5 s (commitTimeoutMs 10 s)', async function () {
    this.timeout(30_000);
    const s = slowCoordinatorHarness();
    const handler = (m: KafkaMessage): OutputRecord[] => [
      { topic: 'out', key: m.key, value: `${m.offset}` },
    ];
    subs.push(
      s.consumer
        .processTransactional(handler, { transactionalId: 'tx-slow' })
        .subscribe({ error: () => undefined }),
    );
    await until(() => s.fake().isConnected(), 'connect');
    s.fake().produce(T, 0, 5);
    s.fake().rebalanceAssign([tp(0)]);
    let failure: unknown;
    try {
      await until(() => committed(s, 0) === 5, 'the 5 offsets committed', 15_000);
    } catch (err) {
      failure = err;
    }
    const txns = s.producer().transactions.map((t) => t.outcome);
    const timeouts = s.sendTimeouts.slice(0, 12);
    await s.consumer.close({ timeoutMs: 3000 });
    assert.equal(
      failure,
      undefined,
      `never committed: sendOffsets timeouts ${JSON.stringify(timeouts)}; transactions ${JSON.stringify(txns)}`,
    );
  });
});

import pino from 'pino';
import { verifyFinalOffsets } from '../lib/internal/commit/commit-verification';
import type { ConsumerClient } from '../lib/internal/binding/consumer-client';
import type { ConsumerSettings } from '../lib/config';
import type { PartitionControl } from '../lib/internal/partition/partition-control';

describe('the read-back of group offsets against a coordinator slower than one second', () => {
  it('confirms the final offset when OffsetFetch is answered in 1.5 s (commitTimeoutMs 10 s, 6 s left)', async function () {
    this.timeout(30_000);
    const timeouts: number[] = [];
    // rd_kafka_committed (rdkafka.c:3622-3682): waits at most its timeout for the OffsetFetch
    // answer and fails ERR__TIMED_OUT otherwise; a new call sends a new OffsetFetch.
    const client = {
      doubts: {
        of: () => ({ offsets: [5] }),
        openUntil: () => 0,
        settle: () => undefined,
      },
      committed: (_tps: unknown, timeoutMs: number) => {
        timeouts.push(timeoutMs);
        return new Promise((resolve, reject) => {
          if (timeoutMs >= 1500) {
            setTimeout(() => resolve([{ topic: 't', partition: 0, offset: 10 }]), 1500);
          } else {
            setTimeout(
              () => reject(Object.assign(new Error('Local: Timed out'), { code: -185 })),
              timeoutMs,
            );
          }
        });
      },
      canCommit: () => true,
      commit: () => Promise.resolve(),
    } as unknown as ConsumerClient;
    const control = { topic: 't', partition: 0, state: 'ending' } as unknown as PartitionControl;
    let wake: (() => void) | undefined;
    const host = {
      until: async (condition: () => boolean, deadline: number): Promise<boolean> => {
        while (!condition() && Date.now() < deadline) {
          await new Promise<void>((r) => {
            wake = r;
            setTimeout(r, Math.max(0, Math.min(20, deadline - Date.now())));
          });
        }
        return condition();
      },
      changed: () => wake?.(),
    };
    const by = Date.now() + 6000;
    const outcome = await verifyFinalOffsets(
      client,
      { commitTimeoutMs: 10_000 } as ConsumerSettings,
      pino({ level: 'silent' }),
      host,
      [{ control, offset: 10 }],
      () => by,
    );
    assert.deepEqual(
      outcome.unverified.map((u) => u.kind),
      [],
      `read timeouts ${JSON.stringify(timeouts)}`,
    );
  });
});
