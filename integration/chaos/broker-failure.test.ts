import { join } from 'node:path';
import { killLeftoverWorkers, runChaos } from './driver';
import { OUTPUT_ROOT } from '../helpers/output';
import { protocolVariants } from './protocols';
import { seededRandom } from '../helpers/random';
import { chaosSeeds } from './seeds';

/**
 * Broker-failure variants, on the three-node cluster (`KAFKA_NODES=3 make kafka-up`): a worker
 * joins, and while a member's revoke is in flight a node — looked up at that moment — is killed,
 * then brought back 10–15 s later (seeded):
 * - the group's coordinator: zero lost; duplicates only where a final commit demonstrably failed
 *   or a member lost its partition;
 * - a follower of the group's `__consumer_offsets` partition (in sync, not its leader): the
 *   coordinator stays, but its offset writes (commits, and KIP-848 heartbeats that change the
 *   group) wait for the ISR to drop the dead node, which the controller does once it fences the
 *   broker (`broker.session.timeout.ms`, 6 s) — longer than `offsets.commit.timeout.ms` (5 s), so
 *   commits in flight end with an error although the broker applies them: commits of unknown
 *   outcome. Zero lost and zero duplicates; a duplicate is excused only where a member was
 *   demonstrably fenced or dropped (it saw the partition lost), and the summary counts those.
 * Graceful stops exit 0 and log nothing at error level. Seeds: TEST_SEEDS (default: TEST_SEED's
 * base seed).
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
// KIP-848 takes its session from the broker (group.consumer.session.timeout.ms, 6 s in kafka.sh):
// no longer than the fencing of a dead broker, so a heartbeat waiting on the stalled offsets
// partition could cost a member its session. The follower variant gives its group a 20 s session
// (a dynamic group config) so that a fence would be the library's or the broker's defect, not the
// test's settings.
const KIP848_FOLLOWER_GROUP_CONFIG = { 'consumer.session.timeout.ms': '20000' };

describe('rebalance chaos with a broker failure (real three-node cluster)', function () {
  this.timeout(600_000);
  afterEach(() => void killLeftoverWorkers());

  for (const target of ['coordinator', 'follower'] as const) {
    for (const [name, protocolConfig] of PROTOCOLS) {
      for (const seed of seeds) {
        const title =
          target === 'coordinator'
            ? `rides out its coordinator killed mid-revoke with nothing lost: ${name} seed=${seed}`
            : `rides out a follower of its offsets partition killed mid-revoke, nothing lost or processed twice: ${name} seed=${seed}`;
        const variant = target === 'coordinator' ? 'broker-failure' : 'follower-failure';
        it(title, async () => {
          console.log(`      seed=${seed}`);
          const r = seededRandom(target === 'coordinator' ? seed : seed + 1);
          const downMs = 10_000 + Math.floor(r() * 5000);
          await runChaos({
            name: `${variant}-${name}-s${seed}`,
            outDir: join(OUTPUT_ROOT, 'chaos', `${variant}-${name}-s${seed}`),
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
            // The follower variant holds a busy revoke open 4 s (not 2): on this shared machine
            // kafka.sh stop-node took 3 s once, and the revoke had ended before the node was dead.
            brokerFailure: {
              afterMs: 6000,
              downMs,
              target,
              ...(target === 'follower' ? { drainHoldMs: 4000 } : {}),
            },
            ...(target === 'follower' && name === 'kip848'
              ? { groupConfig: KIP848_FOLLOWER_GROUP_CONFIG }
              : {}),
          });
        });
      }
    }
  }
});
