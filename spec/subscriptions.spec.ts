import assert from 'node:assert/strict';
import type { Subscription } from 'rxjs';
import * as Kafka from 'node-rdkafka';
import { T, harness, tp, until } from './helpers/harness';

const E = Kafka.CODES.ERRORS;
const GONE = 'deleted-topic';

describe('several topics', () => {
  let subs: Subscription[] = [];
  afterEach(() => {
    subs.forEach((s) => s.unsubscribe());
    subs = [];
  });

  it('confirms the final commit of live topics revoked together with a deleted one (eager)', async () => {
    // node-rdkafka reports one error for the whole commit: UNKNOWN_TOPIC_OR_PART when any
    // partition's topic is gone.
    const h = harness(
      { topics: [T, GONE] },
      {
        commitResult: (offsets) =>
          offsets.some((o) => o.topic === GONE) ? E.ERR_UNKNOWN_TOPIC_OR_PART : undefined,
      },
    );
    const seen: string[] = [];
    subs.push(h.consumer.process((m) => void seen.push(m.topic)).subscribe());
    await until(() => h.fake().isConnected(), 'connect');
    h.fake().produce(T, 0, 3);
    h.fake().produce(GONE, 0, 2);
    h.fake().rebalanceAssign([tp(0), { topic: GONE, partition: 0 }]);
    await until(() => seen.length === 5, 'processed');
    h.fake().rebalanceRevoke([tp(0), { topic: GONE, partition: 0 }]);
    await until(() => h.events.some((e) => e.type === 'revoked'), 'revoked');
    const committed = h.events.find((e) => e.type === 'committed');
    assert.ok(committed?.type === 'committed');
    const byTopic = Object.fromEntries(committed.results.map((r) => [r.topic, r.status]));
    assert.deepEqual(byTopic, { [T]: 'committed', [GONE]: 'failed' });
    assert.equal(h.fake().commits.get(`${T}[0]`), 3);
    await h.consumer.close();
  });
});
