/**
 * @platformatic/kafka: its consumer stream (`consume()`, 'data' events), twice.
 *
 * - Defaults: `autocommit: true`, which commits after every fetch response.
 * - Tuned: `autocommit: TUNED_COMMIT_INTERVAL_MS` (a timer commits what was fetched, at the
 *   library's commit cadence). `autocommit: false` is slower for a stream user, as every message
 *   then carries its own bound `commit()`; larger `maxBytes`/`maxBytesPerPartition` and a larger
 *   `highWaterMark` measured no better here (see docs/benchmarks.md); `minBytes`/`maxWaitTime`
 *   only matter once the backlog is consumed.
 */
import { loadPlatformatic } from '../peers';
import { TUNED_COMMIT_INTERVAL_MS } from './kafkajs';
import type { Contender } from './types';

const stream =
  (autocommit: boolean | number): Contender =>
  async ({ brokers, topic, groupId, meter }) => {
    const { Consumer } = loadPlatformatic();
    const consumer = new Consumer({
      groupId,
      clientId: 'bench',
      bootstrapBrokers: brokers.split(','),
    });
    const messages = await consumer.consume({ topics: [topic], mode: 'earliest', autocommit });
    messages.on('data', (message) => meter.add(1, message.value?.length ?? 0));
    messages.on('error', (err) => console.error('platformatic stream failed', err));
    return async () => {
      await messages.close();
      await consumer.close(true);
    };
  };

export const platformaticStream = stream(true);
export const platformaticStreamTuned = stream(TUNED_COMMIT_INTERVAL_MS);
