import { join } from 'node:path';
import { killLeftoverWorkers, runChaos } from './driver';
import type { ChaosOptions } from './driver';
import { OUTPUT_ROOT } from '../helpers/output';
import { protocolVariants } from './protocols';
import { BASE_SEED, chaosSeeds } from './seeds';

/**
 * The rebalance chaos suite: worker processes joining and leaving a group on a real broker while
 * work is in flight. Scale is set by CHAOS_SCALE=default|full (full = taskbroker's 8 × 32 × 100k × 16).
 * TEST_SEED sets the base seed (the single-seed variants); TEST_SEEDS=a,b,… the overlap variants'
 * seeds (default: the base seed and one derived from it).
 */
const full = process.env.CHAOS_SCALE === 'full';
const seed = BASE_SEED;
const overlapSeeds = chaosSeeds(2);

const scale = full
  ? {
      workers: 8,
      partitions: 32,
      messages: 100_000,
      restartsPerWorker: 16,
      minLifeMs: 4000,
      maxLifeMs: 30_000,
    }
  : {
      workers: 4,
      partitions: 12,
      messages: 20_000,
      restartsPerWorker: 3,
      minLifeMs: 4000,
      maxLifeMs: 9000,
    };

const PROTOCOLS = protocolVariants({
  sessionTimeoutMs: 6000,
  heartbeatIntervalMs: 500,
  maxPollIntervalMs: 20_000,
});

function options(
  name: string,
  protocolConfig: Record<string, unknown>,
  extra: Partial<ChaosOptions> = {},
): ChaosOptions {
  return {
    name,
    outDir: join(OUTPUT_ROOT, 'chaos', name),
    protocolConfig,
    seed,
    ...scale,
    ...extra,
  };
}

describe('rebalance chaos (real broker)', function () {
  this.timeout(full ? 3_600_000 : 600_000);
  before(() =>
    console.log(
      `      seed=${seed} overlap seeds=${overlapSeeds.join(',')} scale=${full ? 'full' : 'default'}`,
    ),
  );
  afterEach(() => {
    const n = killLeftoverWorkers();
    if (n > 0) console.log(`      killed ${n} leftover worker(s)`);
  });

  for (const [name, config] of PROTOCOLS) {
    it(`graceful restarts lose nothing and duplicate nothing: ${name}`, async () => {
      await runChaos(options(`graceful-${name}`, config));
    });
  }

  // Two things at once (docs: shared/notes/attacking-guarantees.md): stops that land while a revoke
  // drains or an assignment waits for its start positions, stops by unsubscribe()/takeUntil
  // instead of close(), handlers in retry backoff at a revoke, fewer slots than partitions with
  // several handlers per partition, and a heavy latency tail — all graceful, so 0 lost, 0 duplicates.
  for (const [name, config] of PROTOCOLS) {
    for (const s of overlapSeeds) {
      it(`overlap: stops while draining/assigning, by unsubscribe/takeUntil, retries in backoff lose and duplicate nothing: ${name} seed=${s}`, async () => {
        console.log(`      seed=${s}`);
        await runChaos(
          options(`overlap-${name}-s${s}`, config, {
            seed: s,
            concurrency: 4,
            partitionConcurrency: 3,
            latency: 'heavy',
            stopModes: ['close', 'unsubscribe', 'takeUntil'],
            selfStop: { onRevoking: 0.4, inAssign: 0.2 },
            onAssignDelayMs: 300,
            failures: { rate: 0.05, maxAttempts: 2 },
            retry: { count: 5, initialDelayMs: 20, maxDelayMs: 200 },
          }),
        );
      });
    }
  }

  if (!full) {
    it('crash variant: SIGKILLed workers lose nothing; duplicates only above their last confirmed commit', async () => {
      await runChaos(options('crash-kip848', PROTOCOLS[2]![1], { killEvery: 2 }));
    });

    it("ordering 'key' with the completed-offset memory: graceful restarts lose nothing and duplicate nothing", async () => {
      await runChaos(
        options('graceful-key-memory', PROTOCOLS[1]![1], {
          partitionConcurrency: 4,
          ordering: 'key',
          rememberCompleted: true,
        }),
      );
    });

    it("ordering 'key' with the completed-offset memory: SIGKILLed workers lose nothing", async () => {
      await runChaos(
        options('crash-key-memory', PROTOCOLS[2]![1], {
          killEvery: 2,
          partitionConcurrency: 4,
          ordering: 'key',
          rememberCompleted: true,
        }),
      );
    });

    it('frozen member: a worker stopped past its session timeout sees its partitions lost and carries on', async () => {
      await runChaos(
        options('frozen-cooperative', PROTOCOLS[1]![1], {
          restartsPerWorker: 2,
          minLifeMs: 16_000,
          maxLifeMs: 18_000,
          freeze: { afterMs: 3000, forMs: 10_000 },
        }),
      );
    });

    it('stuck handler: the partition is released at the drain deadline and the hung message is redone', async () => {
      await runChaos(
        options(
          'stuck-eager',
          { ...PROTOCOLS[0]![1], 'max.poll.interval.ms': 10_000 },
          {
            workers: 3,
            restartsPerWorker: 2,
            minLifeMs: 8000,
            maxLifeMs: 10_000,
            // One handler per partition: only the hung message is redone (with more, the messages
            // finished after it are above the contiguous commit and are redone too).
            partitionConcurrency: 1,
            stuck: { key: 'm-5', ms: 20_000, drainTimeoutMs: 4000 },
          },
        ),
      );
    });
  }
});
