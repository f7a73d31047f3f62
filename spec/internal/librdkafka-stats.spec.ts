import assert from 'node:assert/strict';
import { parseClientStats } from '../../lib/internal/binding/librdkafka-stats';
import { tpKey } from '../../lib/internal/binding/rdkafka';
import { statsEvent } from '../helpers/observability';

describe('parseClientStats', () => {
  it('reads lag, committed offset and high watermark per partition, skipping the internal partition -1', () => {
    const stats = parseClientStats(
      statsEvent('orders', [
        { partition: 0, lag: 7, committed: 93, hi: 100 },
        { partition: 1, hi: 5 },
      ]),
      tpKey,
    );
    assert.ok(stats);
    assert.equal(stats.partitions.size, 2);
    assert.deepEqual(stats.partitions.get(tpKey('orders', 0)), {
      topic: 'orders',
      partition: 0,
      lag: 7,
      committedOffset: 93,
      highWatermark: 100,
      fetchState: 'active',
    });
    const p1 = stats.partitions.get(tpKey('orders', 1));
    assert.equal(p1?.lag, undefined, 'librdkafka reports -1 when it does not know');
    assert.equal(p1?.committedOffset, undefined, '-1001 is a logical offset: unknown');
    assert.equal(p1?.highWatermark, 5);
  });

  it('reads the group state and counts brokers up, ignoring internal and logical brokers', () => {
    const up = parseClientStats(statsEvent('t', [], { joinState: 'wait-join' }), tpKey);
    assert.equal(up?.groupState, 'up');
    assert.equal(up?.joinState, 'wait-join');
    assert.equal(up?.brokers, 1);
    assert.equal(up?.brokersUp, 1);
    const down = parseClientStats(statsEvent('t', [], { brokersUp: false }), tpKey);
    assert.equal(down?.brokersUp, 0);
  });

  it('accepts a parsed object and returns undefined for anything that is not statistics', () => {
    assert.ok(parseClientStats(JSON.parse(statsEvent('t', []).message), tpKey));
    assert.equal(parseClientStats({ message: 'not json' }, tpKey), undefined);
    assert.equal(parseClientStats(undefined, tpKey), undefined);
    assert.equal(parseClientStats(42, tpKey), undefined);
    const empty = parseClientStats({}, tpKey);
    assert.equal(empty?.partitions.size, 0);
    assert.equal(empty?.groupState, undefined);
  });
});
