import { join } from 'node:path';
import { killLeftoverWorkers, runChaos } from './driver';
import { OUTPUT_ROOT } from '../helpers/output';
import { protocolVariants } from './protocols';
import { seededRandom } from '../helpers/random';
import { chaosSeeds } from './seeds';

/**
 * Broker-failure variant, on the three-node cluster (`KAFKA_NODES=3 make kafka-up`): a worker joins,
 * and while a member's revoke is in flight the group's coordinator — looked up at that moment — is
 * killed, then brought back 10–15 s later (seeded). Zero lost; duplicates only where a final commit
 * demonstrably failed; graceful stops exit 0 and log nothing at error level. Seeds: TEST_SEEDS
 * (default: TEST_SEED's base seed).
 */
const seeds = chaosSeeds(1);
// The classic session must outlast a coordinator failover (the controller notices a dead broker
// after broker.session.timeout.ms, 6 s here, then a new coordinator loads the group): with a 6 s
// session librdkafka drops the member itself (SESSTMOUT, a real loss: its work is redone).
const PROTOCOLS = protocolVariants({
  sessionTimeoutMs: 30_000,
  heartbeatIntervalMs: 1000,
  maxPollIntervalMs: 45_000,
  kip848MaxPollIntervalMs: 20_000,
});

describe('rebalance chaos with a broker failure (real three-node cluster)', function () {
  this.timeout(600_000);
  afterEach(() => void killLeftoverWorkers());

  for (const [name, protocolConfig] of PROTOCOLS) {
    for (const seed of seeds) {
      it(`rides out its coordinator killed mid-revoke with nothing lost: ${name} seed=${seed}`, async () => {
        console.log(`      seed=${seed}`);
        const downMs = 10_000 + Math.floor(seededRandom(seed)() * 5000);
        await runChaos({
          name: `broker-failure-${name}-s${seed}`,
          outDir: join(OUTPUT_ROOT, 'chaos', `broker-failure-${name}-s${seed}`),
          protocolConfig,
          seed,
          workers: 3,
          partitions: 12,
          messages: 15_000,
          restartsPerWorker: 3,
          minLifeMs: 5000,
          maxLifeMs: 9000,
          latency: 'heavy',
          replicationFactor: 3,
          topicConfig: { 'min.insync.replicas': '2' },
          brokerFailure: { afterMs: 6000, downMs },
        });
      });
    }
  }
});
