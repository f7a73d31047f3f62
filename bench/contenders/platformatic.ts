/** @platformatic/kafka: its consumer stream (`consume()`, 'data' events), autocommit on. */
import { loadPlatformatic } from '../peers';
import type { Contender } from './types';

export const platformaticStream: Contender = async ({ brokers, topic, groupId, meter }) => {
  const { Consumer } = loadPlatformatic();
  const consumer = new Consumer({
    groupId,
    clientId: 'bench',
    bootstrapBrokers: brokers.split(','),
  });
  const stream = await consumer.consume({
    topics: [topic],
    mode: 'earliest',
    autocommit: true,
  });
  stream.on('data', (message) => meter.add(1, message.value?.length ?? 0));
  stream.on('error', (err) => console.error('platformatic stream failed', err));
  return async () => {
    await stream.close();
    await consumer.close(true);
  };
};
