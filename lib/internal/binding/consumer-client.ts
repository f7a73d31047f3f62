/**
 * A thin promise-based wrapper around node-rdkafka's KafkaConsumer: bounded connect, one
 * `consume(n)` at a time, and commits that resolve only when the broker confirmed them (matched to
 * librdkafka's answers by commit-tracker.ts); broker reads counted so that the disconnect waits for
 * them.
 */
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { translateLibrdkafkaConfigError } from '../settings/librdkafka-settings';
import { ConfigError, ConnectError } from '../../errors';
import { OAuthBearerRefresher } from './oauth-bearer';
import { TlsFailureWatch, bootstrapAddresses, describeTlsSettings } from './tls-handshake';
import type { KafkaClientError } from '../../errors';
import type {
  Assignment,
  ConsumerFactory,
  LibrdKafkaError,
  Message,
  RdKafkaConsumer,
  RebalanceCallback,
  TopicPartitionOffset,
} from './rdkafka';
import { Code, consumerFactoryOf, toKafkaError } from './rdkafka';
import { CommitDoubts } from '../commit/commit-doubts';
import { CommitTracker } from './commit-tracker';

export class ConsumerClient {
  readonly raw: RdKafkaConsumer;
  /**
   * Commits whose outcome is unknown (answered with an error that does not say the broker
   * refused them, or never answered): they may still be applied, after newer ones.
   */
  readonly doubts: CommitDoubts;
  /** Pending commits and assignment-lost probes, matched to librdkafka's answers. */
  private readonly commits: CommitTracker;
  private consuming = false;
  /**
   * The last `consume(n)` answered with an error (other than a timeout): librdkafka's position may
   * then count messages never handed out (the companion binding drops a batch it could not
   * convert), so it is not read for the ledgers after such a call (positions.ts).
   */
  lastConsumeFailed = false;
  private lastTimeoutMs = -1;
  /** Keeps the OAUTHBEARER token fresh, when `oauthBearerToken` is set. */
  private oauth: OAuthBearerRefresher | undefined;
  /** The connect was given up before node-rdkafka answered it (a TLS verdict). */
  private givenUp = false;
  private disconnectCalled = false;
  /**
   * Broker reads whose worker runs on the libuv pool (committed, offsetsForTimes,
   * queryWatermarkOffsets): node-rdkafka's workers for them use the native client without its
   * connection lock, so a disconnect meanwhile is a use-after-free (docs/binding-behaviours.md).
   */
  private readsInFlight = 0;
  private readsIdle: (() => void)[] = [];

  constructor(
    private readonly settings: ConsumerSettings,
    private readonly logger: Logger,
    onRebalance: RebalanceCallback,
    factory: ConsumerFactory = consumerFactoryOf(settings.binding),
    private readonly onConsumeError: (err: KafkaClientError) => void = (err) =>
      logger.warn({ err }, 'consume returned an error'),
  ) {
    this.doubts = new CommitDoubts(settings.lateCommitWindowMs);
    const globalConfig = {
      ...settings.globalConfig,
      rebalance_cb: (err: LibrdKafkaError, assignment: Assignment[]) =>
        onRebalance(err, assignment),
      offset_commit_cb: true,
    };
    try {
      this.raw = factory(globalConfig, settings.topicConfig);
    } catch (err) {
      if (err instanceof TypeError && /not a constructor/.test(err.message)) {
        throw new ConfigError(
          `Expected \`binding\`'s KafkaConsumer to build a node-rdkafka consumer: ${err.message}`,
          'binding',
        );
      }
      throw translateLibrdkafkaConfigError(err);
    }
    const raw = this.raw as Partial<Record<'on' | 'consume' | 'connect', unknown>> | undefined;
    if (
      typeof raw?.on !== 'function' ||
      typeof raw.consume !== 'function' ||
      typeof raw.connect !== 'function'
    ) {
      throw new ConfigError(
        "Expected `binding`'s KafkaConsumer to build a node-rdkafka consumer (with on, connect and consume): it built something else",
        'binding',
      );
    }
    if (settings.sharedBatchBuffers !== false) {
      (
        this.raw as unknown as { setBatchBufferSharing(shared: boolean | number): void }
      ).setBatchBufferSharing(settings.sharedBatchBuffers);
    }
    this.commits = new CommitTracker(this.raw, this.doubts, logger, () => this.onAnswered());
    this.raw.on(
      'offset.commit',
      (err: LibrdKafkaError | undefined, offsets: TopicPartitionOffset[]) =>
        this.commits.onCommitResult(err, offsets ?? []),
    );
  }

  /**
   * Connects, bounded by `connectTimeoutMs`; rejects with {@link ConnectError}. With an
   * OAUTHBEARER provider the first token is set before. A TLS handshake failure is named in the
   * error; when every bootstrap broker's certificate failed verification the connect is given up
   * at once (that never heals by retrying), without waiting for the timeout.
   */
  async connect(): Promise<void> {
    const provider = this.settings.oauthBearerToken;
    if (provider) {
      this.oauth?.stop();
      this.oauth = new OAuthBearerRefresher(
        provider,
        this.raw,
        this.logger.child({ component: 'oauthbearer' }),
        this.settings.connectTimeoutMs,
      );
      await this.oauth.start();
    }
    const timeoutMs = this.settings.connectTimeoutMs;
    const config = this.settings.globalConfig as Record<string, unknown>;
    const servers = String(config['bootstrap.servers'] ?? config['metadata.broker.list']);
    const tls = new TlsFailureWatch(bootstrapAddresses(servers));
    const tlsError = (what: string): ConnectError | undefined => {
      const f = tls.failure;
      if (!f) return undefined;
      return new ConnectError(
        `TLS handshake with ${f.broker} failed${what}: ${f.reason} (${describeTlsSettings(config)})` +
          (f.certificateRejected
            ? ": the broker's certificate is not signed by a CA in ssl.ca.location (or the system's CAs), has expired, or does not match the broker's host name"
            : ''),
        { retriable: !f.certificateRejected },
      );
    };
    return new Promise((resolve, reject) => {
      let settled = false;
      const onLog = (log: { fac: string; message: string }): void => {
        if (!tls.observe(log) || settled) return;
        settled = true;
        this.givenUp = true;
        reject(tlsError(` on every bootstrap broker (${servers})`));
      };
      this.raw.on('event.log', onLog);
      this.raw.connect({ timeout: timeoutMs }, (err) => {
        this.raw.removeListener('event.log', onLog);
        if (settled) {
          // Given up early: node-rdkafka cleans up a failed connect itself; one that succeeded
          // after all (a broker with a good certificate answered) is closed again.
          if (!err) this.raw.disconnect(() => undefined);
          return;
        }
        settled = true;
        if (err) {
          const named = tlsError('');
          reject(
            new ConnectError(
              `Could not connect to ${servers} within ${timeoutMs} ms: ${err.message}${named ? `; ${named.message}` : ''}`,
              { cause: err, retriable: named?.retriable ?? true },
            ),
          );
        } else {
          resolve();
        }
      });
    });
  }

  /**
   * One `consume(n)`; only one may be outstanding (each holds a libuv pool thread). Errors
   * (other than timeouts) resolve to an empty batch and go to `onConsumeError`: most are transient
   * (unknown topic while metadata propagates, transport errors) and the caller decides.
   */
  consume(n: number, timeoutMs: number = this.settings.consumeTimeoutMs): Promise<Message[]> {
    if (this.consuming) throw new Error('consume() is already in flight');
    this.consuming = true;
    if (timeoutMs !== this.lastTimeoutMs) {
      this.raw.setDefaultConsumeTimeout(timeoutMs);
      this.lastTimeoutMs = timeoutMs;
    }
    return new Promise((resolve) => {
      this.raw.consume(n, (err, messages) => {
        this.consuming = false;
        this.lastConsumeFailed = false;
        if (err) {
          if (err.code !== Code.TIMED_OUT && err.code !== Code.PARTITION_EOF) {
            this.lastConsumeFailed = true;
            this.onConsumeError(toKafkaError(err, 'consume failed'));
          }
          resolve([]);
        } else {
          resolve(messages ?? []);
        }
      });
    });
  }

  /**
   * Sends an asynchronous commit of explicit offsets (each the next offset to read) and resolves
   * when the broker confirmed it. The result only arrives while `consume()` keeps being called.
   * Rejects with {@link CommitError} (carrying librdkafka's code) or {@link TimeoutError}; after a
   * timeout librdkafka still holds the commit (it cannot be cancelled): `late`, if given, is told
   * whether it was applied when librdkafka answers (false if it never will: dropped at disconnect),
   * with librdkafka's code when it was refused, and returns whether the answer was still awaited.
   */
  commit(
    offsets: readonly TopicPartitionOffset[],
    timeoutMs: number = this.settings.commitTimeoutMs,
    late?: (applied: boolean, code?: number) => boolean,
  ): Promise<void> {
    return this.commits.commit(offsets, timeoutMs, late);
  }

  /** Called whenever librdkafka answers a commit (the engine re-checks what waits on one). */
  onAnswered: () => void = () => undefined;

  /**
   * Offsets of this partition's commits that librdkafka has not answered yet, including commits
   * whose wait timed out here: librdkafka may still send (or retry) those, and one landing after a
   * newer commit would move the group's offset backwards. A commit of another offset for the
   * partition must wait until these are answered.
   */
  unanswered(topic: string, partition: number): number[] {
    return this.commits.unanswered(topic, partition);
  }

  /** Whether committing `offset` now cannot be overtaken by an unanswered commit of another offset. */
  canCommit(topic: string, partition: number, offset: number): boolean {
    return this.unanswered(topic, partition).every((o) => o === offset);
  }

  /**
   * Whether librdkafka considers the current assignment lost (`rd_kafka_assignment_lost()`, which
   * node-rdkafka does not expose). A commit of the current assignment (`commit()` without offsets)
   * is answered locally: `ERR__ASSIGNMENT_LOST` when the assignment is lost — librdkafka fenced
   * by a heartbeat, a session timeout, max.poll exceeded — and `ERR__NO_OFFSET` otherwise (the
   * library stores no offsets, so nothing is sent to the broker). Resolves `undefined` when no
   * answer came within `timeoutMs` (the answer, like every commit result, is served by consume()).
   */
  probeAssignmentLost(timeoutMs: number): Promise<boolean | undefined> {
    return this.commits.probeAssignmentLost(timeoutMs);
  }

  /**
   * Whether an answer only the next consume call delivers is awaited (a commit result, an
   * assignment-lost probe): the consume loop then polls with a short timeout.
   */
  get awaitingPoll(): boolean {
    return this.commits.awaitingPoll;
  }

  /** Commits librdkafka has not answered yet, including ones whose wait timed out here. */
  get unansweredCount(): number {
    return this.commits.unansweredCount;
  }

  /** OAUTHBEARER tokens set and refreshes failed so far (undefined without a provider). */
  get oauthBearerStats(): { tokensSet: number; failures: number } | undefined {
    return this.oauth
      ? { tokensSet: this.oauth.tokensSet, failures: this.oauth.failures }
      : undefined;
  }

  /** Number of commits sent and not yet confirmed or failed. */
  get pendingCommitCount(): number {
    return this.commits.pendingCommitCount;
  }

  /** The group's committed offsets for the given partitions (`offset` is absent or < 0 when none). */
  committed(
    partitions: readonly { topic: string; partition: number }[],
    timeoutMs: number,
  ): Promise<TopicPartitionOffset[]> {
    return this.read((resolve, reject) => {
      this.raw.committed(
        partitions.map((p) => ({ topic: p.topic, partition: p.partition })),
        timeoutMs,
        (err, tps) => (err ? reject(toKafkaError(err, 'committed() failed')) : resolve(tps)),
      );
    });
  }

  /** A broker read on the libuv pool, counted until node-rdkafka answers it. */
  private read<T>(
    start: (resolve: (value: T) => void, reject: (err: unknown) => void) => void,
  ): Promise<T> {
    this.readsInFlight += 1;
    return new Promise<T>(start).finally(() => {
      this.readsInFlight -= 1;
      if (this.readsInFlight === 0) for (const wake of this.readsIdle.splice(0)) wake();
    });
  }

  /**
   * Resolves once no broker read is in flight (each ends within its own timeout): the disconnect
   * waits for it.
   */
  readsSettled(): Promise<void> {
    if (this.readsInFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.readsIdle.push(resolve));
  }

  /** A partition's high watermark (end offset), asked from the broker. */
  async highWatermark(topic: string, partition: number, timeoutMs: number): Promise<number> {
    return (await this.watermarks(topic, partition, timeoutMs)).high;
  }

  /** The first offset whose timestamp is at or after `timestamp` (-1 when none is that recent). */
  offsetForTime(
    tp: { topic: string; partition: number },
    timestamp: number,
    timeoutMs: number,
  ): Promise<number> {
    return this.read((resolve, reject) => {
      this.raw.offsetsForTimes(
        [{ topic: tp.topic, partition: tp.partition, offset: timestamp }],
        timeoutMs,
        (err, offsets) => {
          if (err) reject(toKafkaError(err, 'offsetsForTimes failed'));
          else resolve(offsets?.[0]?.offset ?? -1);
        },
      );
    });
  }

  /** Moves the fetch position of an assigned partition; resolves when librdkafka did. */
  seek(tp: { topic: string; partition: number; offset: number }, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.raw.seek(tp, timeoutMs, (err) =>
        err ? reject(toKafkaError(err, `seek of ${tp.topic}[${tp.partition}] failed`)) : resolve(),
      );
    });
  }

  /** A partition's log start (low) and end (high) offsets, asked from the broker. */
  watermarks(
    topic: string,
    partition: number,
    timeoutMs: number,
  ): Promise<{ low: number; high: number }> {
    return this.read((resolve, reject) => {
      this.raw.queryWatermarkOffsets(topic, partition, timeoutMs, (err, w) =>
        err
          ? reject(toKafkaError(err, 'queryWatermarkOffsets failed'))
          : resolve({ low: w.lowOffset, high: w.highOffset }),
      );
    });
  }

  /**
   * Whether the binding's disconnect was called: its close runs on a worker thread from then on,
   * and node-rdkafka refuses assign calls.
   */
  get disconnectStarted(): boolean {
    return this.disconnectCalled;
  }

  /** Disconnects; resolves once node-rdkafka reports it (or at once when not connected). */
  disconnect(): Promise<void> {
    this.commits.failPendingCommits('the client is disconnecting');
    this.oauth?.stop();
    return new Promise((resolve) => {
      // (a connect given up early is not connected yet: its own callback cleans up, see connect())
      if (this.givenUp || !this.raw.isConnected()) {
        resolve();
        return;
      }
      this.disconnectCalled = true;
      this.raw.disconnect(() => resolve());
    });
  }
}
