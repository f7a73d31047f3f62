import { join } from 'node:path';
import { killLeftoverWorkers, runChaos } from './driver';
import { OUTPUT_ROOT } from '../helpers/output';

/**
 * Broker-failure variant, on the three-node cluster (`KAFKA_NODES=3 make kafka-up`): one broker is
 * killed mid-run and brought back. Zero lost; duplicates only where a final commit demonstrably
 * failed (or a worker crashed); workers keep progressing and log nothing at error level.
 */
const seed = Number(process.env.TEST_SEED ?? 20261130);

describe('rebalance chaos with a broker failure (real three-node cluster)', function () {
  this.timeout(600_000);
  afterEach(() => void killLeftoverWorkers());

  it('rides out a killed broker with nothing lost', async () => {
    await runChaos({
      name: 'broker-failure-kip848',
      outDir: join(OUTPUT_ROOT, 'chaos', 'broker-failure-kip848'),
      protocolConfig: { 'group.protocol': 'consumer', 'max.poll.interval.ms': 20_000 },
      seed,
      workers: 3,
      partitions: 12,
      messages: 15_000,
      restartsPerWorker: 3,
      minLifeMs: 5000,
      maxLifeMs: 9000,
      replicationFactor: 3,
      topicConfig: { 'min.insync.replicas': '2' },
      brokerFailure: { node: 2, afterMs: 6000, downMs: 10_000 },
    });
  });
});
