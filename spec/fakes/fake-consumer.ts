/**
 * A deterministic fake of the node-rdkafka KafkaConsumer subset the library uses. It follows the
 * binding's behaviours that the contract tests confirm on the real broker:
 * - commit results are delivered only from inside consume() (served by the consume loop), in the
 *   order the commits were sent (one coordinator connection);
 * - while a revoke awaits its unassign, consume() returns no messages at all (librdkafka pauses the
 *   whole assignment);
 * - during disconnect() a still-assigned consumer gets a final revoke in which only unassign works;
 * - incrementalUnassign of a partition not assigned throws ERR__INVALID_ARG.
 *
 * With `member: true` (implied by `groupProtocol`) it also follows what a member of a group sees
 * from the broker (see {@link FakeOptions.member}); the simulation (spec/sim) builds a group of
 * such fakes over shared logs and committed offsets.
 */
import { EventEmitter } from 'node:events';
import * as Kafka from 'node-rdkafka';
import type { Assignment, Message, TopicPartitionOffset } from 'node-rdkafka';

const E = Kafka.CODES.ERRORS;
type Protocol = 'EAGER' | 'COOPERATIVE';
export type Call =
  | { op: 'connect' | 'disconnect' | 'unassign' | 'unsubscribe' }
  | { op: 'subscribe'; topics: string[] }
  | {
      op: 'assign' | 'incrementalAssign' | 'incrementalUnassign' | 'pause' | 'resume' | 'seek';
      partitions: string[];
    }
  | { op: 'commit'; offsets: string[] };

const key = (t: { topic: string; partition: number }): string => `${t.topic}[${t.partition}]`;

/** librdkafka's UNKNOWN_MEMBER_ID: the coordinator does not know this member (it left). */
export const UNKNOWN_MEMBER_ID = 25;

/** How the broker answers one commit request, decided when it is sent. */
export interface CommitPlan {
  /** Consume calls before the result is delivered (and the commit applied). @default commitLatencyPolls */
  polls?: number;
  /** Refuse it with this librdkafka error code (nothing is applied). */
  error?: number;
  /**
   * Hold it — and every later request of this member, as on one coordinator connection — until
   * {@link FakeConsumer.releaseHeld}: the client's wait times out, the broker applies it later.
   */
  held?: boolean;
  /**
   * With `held`: later commits of the member are not held behind it and it is applied after them
   * when released (librdkafka sent it again after a coordinator change); releases and the leave
   * still wait for it.
   */
  overtaken?: boolean;
  /**
   * With `held`: librdkafka's wait-for-coordinator queue. Nothing waits behind it — the member's
   * later commits, releases (its rejoin or heartbeat) and its leave reach the broker first, as
   * librdkafka serves them before that queue once the coordinator is back — and it is applied when
   * released, refused (UNKNOWN_MEMBER_ID) if the member has left by then.
   */
  deferred?: boolean;
  /**
   * With `error`: the client is answered `error` (a local timeout, a transport failure) while the
   * request reached the broker after all (librdkafka sent it, or a copy of it, on a connection it
   * then gave up on). The broker applies it late: `'after-next'` when the member's next commit is
   * applied (so it lands after that one), `'manual'` at {@link FakeConsumer.applyLate}. A release
   * of one of its partitions reaching the broker first refuses it (the member's epoch moved on).
   */
  appliesLate?: 'after-next' | 'manual';
}

/** What the broker side learns from a member fake (`member` mode), in the order it learns it. */
export interface FakeMemberHooks {
  /** Every call the library makes on the fake, as it is made (before its effects). */
  call?(call: Call): void;
  /** A commit request was sent, with its plan. */
  commitSent?(offsets: TopicPartitionOffset[], plan: CommitPlan): void;
  /**
   * The broker applied (no error) or refused a commit request; `late`: one the client was
   * answered an error for (see {@link CommitPlan.appliesLate}).
   */
  commitApplied?(offsets: TopicPartitionOffset[], error: number | undefined, late?: boolean): void;
  /** The broker learnt that these partitions were released (unassigned) by the member. */
  released?(keys: string[]): void;
  /** The member left the group (after unsubscribe() once nothing was assigned, or on disconnect). */
  left?(): void;
}

export interface FakeOptions {
  protocol?: Protocol;
  /** Decides each commit's result: a librdkafka error code, or undefined for success. */
  commitResult?: (offsets: TopicPartitionOffset[]) => number | undefined;
  /** Per commit answered with an error: whether the broker applies it late (see {@link CommitPlan.appliesLate}). */
  commitAppliesLate?: (offsets: TopicPartitionOffset[]) => CommitPlan['appliesLate'];
  /**
   * How long after its error answer the broker may still apply a late commit; past it the commit
   * is dropped (the broker's `offsets.commit.timeout.ms`: what `lateCommitWindowMs` assumes).
   * @default Infinity
   */
  lateApplyWindowMs?: number;
  /** Consume calls before a commit result is delivered. @default 1 */
  commitLatencyPolls?: number;
  /**
   * How long a consume() call that found messages takes to answer, in ms (the native worker's
   * time; a call that found none answers after its timeout, at most 2 ms here). @default 0
   */
  consumeLatencyMs?: number;
  /** Per commit: consume calls before its result is delivered (overrides `commitLatencyPolls`). */
  commitPolls?: (offsets: TopicPartitionOffset[]) => number | undefined;
  connectError?: string;
  /** Makes seek() fail with this message. */
  seekError?: string;
  /**
   * seek() moves the position but answers ERR__TIMED_OUT, as node-rdkafka does when librdkafka's
   * wait for the reply (at least 10 ms, whatever timeout is asked) passes: the seek was queued and
   * applies all the same.
   */
  seekTimesOut?: boolean;
  /**
   * How many pause() calls are recorded but not applied, as when librdkafka drops a pause request
   * whose version barrier lost a race against one of its own threads (an outdated op).
   */
  losePauses?: number;
  /**
   * Off: an assigned partition whose committed offset is unstable (see pendingTxnOffsets) waits
   * for it whatever else the assignment does. On (librdkafka 2.12, the default here): if the
   * assignment changes while that fetch is in flight, librdkafka starts the partition at
   * auto.offset.reset (here: offset 0) — it reads around the open transaction. @default true
   */
  unstableStartsAtReset?: boolean;
  /** `event.log` lines emitted while a failing connect runs (before its error events). */
  connectLogs?: { fac: string; severity: number; message: string }[];
  /** `event.error` payloads emitted just before a failing connect's callback (as node-rdkafka does). */
  connectErrorEvents?: Error[];
  /** Logs and committed offsets shared with other fakes: one group on one broker. */
  shared?: { logs: Map<string, Message[]>; commits: Map<string, number> };
  /**
   * `group.protocol`: `'consumer'` is KIP-848, where `rebalanceProtocol()` is always COOPERATIVE
   * and every rebalance callback is an incremental delta. Implies `member`.
   */
  groupProtocol?: 'classic' | 'consumer';
  /**
   * Behave as a member of a group (opt-in, so older specs keep the simpler fake):
   * - every rebalance callback stays pending until answered (an assign by the assign call of its
   *   partitions, a revoke once none of its partitions is assigned); consume() returns no
   *   messages while one is pending (librdkafka pauses the assignment until the call);
   * - unsubscribe() revokes everything still assigned — incrementally under COOPERATIVE (even
   *   partitions an earlier revoke still holds), fully under EAGER unless a revoke of all of it is
   *   already pending — and revokes what an assign answered later adds; the member leaves the
   *   group once, after unsubscribe(), nothing is assigned and no assign is pending;
   * - a commit sent after the member left fails with UNKNOWN_MEMBER_ID (25); commit() throws once
   *   disconnected ("KafkaConsumer is disconnected"); each commit's fate comes from `commitPlan`;
   * - the broker sees commits, releases and the leave in the order the member sent them: a held
   *   commit holds back what follows it (see {@link CommitPlan.held});
   * - `fence(code)` drops the member (KIP-848 FENCED_MEMBER_EPOCH, classic UNKNOWN_MEMBER_ID):
   *   commits not yet applied and later ones fail with `code` until it answered the revoke of
   *   everything it had; then it is a member again.
   */
  member?: boolean;
  /** Decides each commit request's fate (`member` mode); `commitResult`/`commitLatencyPolls` otherwise. */
  commitPlan?: (offsets: TopicPartitionOffset[]) => CommitPlan;
  /** Notified of what the broker learns (`member` mode). */
  hooks?: FakeMemberHooks;
}

/** A request of the member on its way to the broker, in sending order. */
type OutboxItem =
  | {
      kind: 'commit';
      offsets: TopicPartitionOffset[];
      polls: number;
      error: number | undefined;
      held: boolean;
      overtaken: boolean;
      deferred: boolean;
      appliesLate: CommitPlan['appliesLate'];
      /** The member's fencing epoch when it was sent: a fence in between refuses it. */
      epoch: number;
    }
  | {
      /** librdkafka's local answer to `commit()` of the current assignment (no offsets). */
      kind: 'local';
      error: number;
      offsets: TopicPartitionOffset[];
      polls: number;
    }
  | { kind: 'release'; keys: string[] }
  | { kind: 'leave' };

/** A rebalance callback waiting for the application's answer (`member` mode). */
export interface PendingCallback {
  readonly kind: 'assign' | 'revoke';
  readonly keys: readonly string[];
  /** When it was fired (Date.now()). */
  readonly at: number;
}

/** Log entries that are control records (transaction markers): never returned by consume(). */
const controlRecords = new WeakSet<Message>();

export class FakeConsumer extends EventEmitter {
  readonly calls: Call[] = [];
  /**
   * (Un)assign calls made after disconnect() began while no revoke waited for them. librdkafka's
   * close ends on its own then (it needs no answer to an assignment delivered while closing), and
   * such a call races with its end: the real binding can block the calling (main) thread forever
   * (its request goes to a consumer group that is being torn down). A test asserts this stays
   * empty.
   */
  readonly callsRacingClose: Call[] = [];
  readonly commits: Map<string, number>;
  protocol: Protocol;
  private connected = false;
  private assignment: Assignment[] = [];
  /** Each partition's log; consumption reads it from a fetch position, as Kafka does. */
  private readonly logs: Map<string, Message[]>;
  /** Fetch positions of assigned partitions: the committed offset (or 0) at assignment. */
  private readonly fetchPos = new Map<string, number>();
  /**
   * Whether a transaction (of the fake transactional producer) holds offsets of a partition not
   * committed or aborted yet: an assignment of it waits for them (require_stable), as librdkafka's
   * committed-offset fetch does under read_committed.
   */
  pendingTxnOffsets: ((partitionKey: string) => boolean) | undefined;
  /** Assigned partitions whose committed offset is not stable yet (see pendingTxnOffsets). */
  private readonly unstable = new Set<string>();
  /** App positions (one past the last delivered offset) of this assignment, for position(). */
  private readonly appPos = new Map<string, number>();
  private readonly paused = new Set<string>();
  private pausesLost = 0;
  private revokePending = false;
  /** disconnect() was called (node-rdkafka: the close runs on a worker thread). */
  private disconnecting = false;
  /** Requests on their way to the broker (commits wait for consume() calls; see OutboxItem). */
  private outbox: OutboxItem[] = [];
  /** Commits answered with an error that the broker still applies (see CommitPlan.appliesLate). */
  private lateApplies: {
    offsets: TopicPartitionOffset[];
    when: 'after-next' | 'manual';
    epoch: number;
    answeredAt: number;
  }[] = [];
  private readonly rebalanceCb: (err: { code: number; message: string }, a: Assignment[]) => void;
  private rr = 0;
  consumeCalls = 0;
  /**
   * Every consume() answered without an error, in order: how many messages were asked and returned,
   * when it was answered, and when position() was first called after it (before the next answer).
   */
  readonly consumeLog: {
    asked: number;
    returned: number;
    answeredAt: number;
    positionAt: number | undefined;
  }[] = [];
  /** Errors the next consume() calls return instead of messages (as the binding reports them). */
  readonly consumeErrors: { code: number; message: string }[] = [];
  /**
   * Errors the next consume() calls that found messages return instead of them, the messages
   * dropped and the position past them: the companion binding's answer when it cannot allocate a
   * batch (`consumeBatch: out of memory`).
   */
  readonly droppedBatchErrors: { code: number; message: string }[] = [];
  /** `member` mode (see FakeOptions.member). */
  readonly member: boolean;
  private pendingCallbacks: PendingCallback[] = [];
  private subscribed = false;
  private unsubscribed = false;
  private left = false;
  private fencedWith: number | undefined;
  private fenceEpoch = 0;

  constructor(
    readonly config: Record<string, unknown>,
    private readonly options: FakeOptions = {},
  ) {
    super();
    this.member = options.member === true || options.groupProtocol !== undefined;
    this.protocol =
      options.groupProtocol === 'consumer' ? 'COOPERATIVE' : (options.protocol ?? 'EAGER');
    this.rebalanceCb = config.rebalance_cb as never;
    this.logs = options.shared?.logs ?? new Map<string, Message[]>();
    this.commits = options.shared?.commits ?? new Map<string, number>();
  }

  // --- test controls ---------------------------------------------------------------------------

  /** Appends records to a partition's log (they become consumable when assigned and not paused). */
  produce(topic: string, partition: number, count: number, size = 10): void {
    const k = key({ topic, partition });
    const q = this.logs.get(k) ?? [];
    let offset = q.length;
    for (let i = 0; i < count; i++) {
      q.push({
        topic,
        partition,
        offset,
        key: Buffer.from(`k${offset}`),
        value: Buffer.alloc(size, 1),
        size,
        timestamp: 1,
        headers: [{ h: Buffer.from('1') }, { h: Buffer.from('2') }],
      });
      offset += 1;
    }
    this.logs.set(k, q);
  }

  /**
   * Appends a control record (a transaction marker): an offset of the log that consume() never
   * returns; the position moves past it once consume() reads beyond it.
   */
  produceMarker(topic: string, partition: number): void {
    this.produce(topic, partition, 1);
    const log = this.logs.get(key({ topic, partition }))!;
    controlRecords.add(log[log.length - 1]!);
  }

  /** Fires an ASSIGN rebalance callback. */
  rebalanceAssign(partitions: { topic: string; partition: number }[]): void {
    if (this.member) {
      this.pendingCallbacks.push({ kind: 'assign', keys: partitions.map(key), at: Date.now() });
    }
    this.rebalanceCb(
      { code: E.ERR__ASSIGN_PARTITIONS, message: 'assign' },
      partitions.map((p) => ({ ...p })),
    );
  }

  /**
   * Set by a revoke of a lost assignment (librdkafka's `rd_kafka_assignment_lost()`: fenced by a
   * heartbeat, session timed out); cleared by the next (un)assign call, as librdkafka does.
   */
  assignmentLost = false;

  /**
   * Fires a REVOKE rebalance callback; consume() returns nothing until the app unassigns. With
   * `lost`, the assignment is lost (the callback looks the same; only `commit()` of the current
   * assignment tells: ERR__ASSIGNMENT_LOST).
   */
  rebalanceRevoke(
    partitions: { topic: string; partition: number }[],
    options: { lost?: boolean } = {},
  ): void {
    this.assignmentLost = options.lost === true;
    this.revokePending = true;
    if (this.member) {
      this.pendingCallbacks.push({ kind: 'revoke', keys: partitions.map(key), at: Date.now() });
    }
    this.rebalanceCb(
      { code: E.ERR__REVOKE_PARTITIONS, message: 'revoke' },
      partitions.map((p) => ({ ...p })),
    );
  }

  /**
   * The broker drops this member (`member` mode): commits not applied yet, and later ones, fail
   * with `code` until the member answered the revoke of everything it has, fired now.
   */
  fence(code: number): void {
    this.fencedWith = code;
    this.fenceEpoch += 1;
    // The lost revoke covers what no revoke is pending for already (those fail their commit).
    const revoking = new Set(
      this.pendingCallbacks.filter((c) => c.kind === 'revoke').flatMap((c) => c.keys),
    );
    const revoked = this.assignment.filter((p) => !revoking.has(key(p))).map((p) => ({ ...p }));
    if (revoked.length > 0) this.revokeLater(revoked, true);
    this.maybeRejoin();
  }

  /** Lets held commits (and what waits behind them) reach the broker. */
  releaseHeld(): void {
    for (const item of this.outbox) if (item.kind === 'commit') item.held = false;
    this.pump();
  }

  /**
   * The broker applies the commits answered with an error that it still holds as `'manual'` (see
   * {@link CommitPlan.appliesLate}); a fence since they were sent refuses them. Returns how many
   * were applied.
   */
  applyLate(): number {
    const due = this.lateApplies.filter((l) => l.when === 'manual');
    this.lateApplies = this.lateApplies.filter((l) => l.when !== 'manual');
    return this.applyLateItems(due);
  }

  /** Commits answered with an error that the broker will still apply. */
  get lateAppliesPending(): number {
    return this.lateApplies.length;
  }

  private applyLateItems(
    items: readonly { offsets: TopicPartitionOffset[]; epoch: number; answeredAt: number }[],
  ): number {
    let applied = 0;
    const windowMs = this.options.lateApplyWindowMs ?? Infinity;
    for (const l of items) {
      if (this.member && l.epoch !== this.fenceEpoch) continue;
      if (Date.now() > l.answeredAt + windowMs) continue;
      for (const o of l.offsets) this.commits.set(key(o), o.offset);
      this.options.hooks?.commitApplied?.(l.offsets, undefined, true);
      applied += 1;
    }
    return applied;
  }

  /** Whether a commit is being held (see {@link CommitPlan.held}). */
  get holdsCommits(): boolean {
    return this.outbox.some((i) => i.kind === 'commit' && i.held);
  }

  /** Rebalance callbacks not answered yet (`member` mode). */
  unanswered(): readonly PendingCallback[] {
    return this.pendingCallbacks;
  }

  get isSubscribed(): boolean {
    return this.subscribed && !this.unsubscribed;
  }

  get hasUnsubscribed(): boolean {
    return this.unsubscribed;
  }

  get hasLeft(): boolean {
    return this.left;
  }

  get isFenced(): boolean {
    return this.fencedWith !== undefined;
  }

  /** Messages of a partition not consumed yet. */
  remaining(topic: string, partition: number): number {
    const k = key({ topic, partition });
    const start = this.fetchPos.get(k) ?? this.commits.get(k) ?? 0;
    return (this.logs.get(k)?.length ?? 0) - start;
  }

  /** Delivers a message for a partition regardless of assignment (a late delivery). */
  injectLate: Message[] = [];

  /** True while a revoke awaits the application's unassign. */
  get revokeInProgress(): boolean {
    if (this.member) return this.pendingCallbacks.some((c) => c.kind === 'revoke');
    return this.revokePending;
  }

  isPaused(topic: string, partition: number): boolean {
    return this.paused.has(key({ topic, partition }));
  }

  ops(): string[] {
    return this.calls.map((c) => {
      if ('partitions' in c) return `${c.op}(${c.partitions.join(',')})`;
      if ('offsets' in c) return `commit(${c.offsets.join(',')})`;
      if ('topics' in c) return `subscribe(${c.topics.join(',')})`;
      return c.op;
    });
  }

  // --- node-rdkafka surface --------------------------------------------------------------------

  connect(_opts: unknown, cb: (err: Error | null, info?: unknown) => void): this {
    this.record({ op: 'connect' });
    setImmediate(() => {
      if (this.options.connectError) {
        for (const l of this.options.connectLogs ?? []) this.emit('event.log', l);
        for (const e of this.options.connectErrorEvents ?? []) this.emit('event.error', e);
        cb(new Error(this.options.connectError));
      } else {
        this.connected = true;
        this.disconnecting = false;
        cb(null, { name: 'fake' });
      }
    });
    return this;
  }

  disconnect(cb?: () => void): this {
    this.record({ op: 'disconnect' });
    if (this.consuming) this.disconnectsWhileConsuming += 1;
    this.disconnecting = true;
    if (this.protocol === 'EAGER' && this.revokePending) {
      // An eager revoke still unanswered: librdkafka's close releases the assignment itself (its
      // unsubscribe leaves the wait for the unassign call), with no callback (seen on the real
      // broker: the close ends ~200 ms later; an unassign then races with its end).
      const before = this.assignment.map(key);
      this.setAssignment([]);
      this.revokePending = false;
      if (this.member) {
        this.pendingCallbacks = [];
        this.released(before);
      }
    } else if (this.assignment.length > 0) {
      // librdkafka's close() fires a final revoke in which only unassign works.
      this.revokePending = true;
      this.connected = false;
      if (this.member) {
        this.pendingCallbacks.push({
          kind: 'revoke',
          keys: this.assignment.map(key),
          at: Date.now(),
        });
      }
      this.rebalanceCb(
        { code: E.ERR__REVOKE_PARTITIONS, message: 'revoke' },
        this.assignment.map((p) => ({ ...p })),
      );
    }
    this.connected = false;
    if (this.member && !this.left) {
      // Closing ends the membership; what was sent before still reaches the broker, in order.
      this.left = true;
      this.outbox.push({ kind: 'leave' });
      this.pump();
    }
    // The close ends once nothing it waits for is pending (an unanswered cooperative assignment
    // holds it for good, as librdkafka's does).
    const end = (): void => {
      if (this.closeWaitsForAssignCall()) {
        setTimeout(end, 5);
        return;
      }
      this.closeEnded = true;
      cb?.();
    };
    setImmediate(end);
    return this;
  }

  isConnected(): boolean {
    return this.connected;
  }

  /** Topics are the ones records were produced to; every partition's leader is broker 1. */
  getMetadata(
    _opts: unknown,
    cb: (
      err: null,
      md: { topics: { name: string; partitions: { id: number; leader: number }[] }[] },
    ) => void,
  ): void {
    this.metadataRequests += 1;
    const topics = new Map<string, { id: number; leader: number }[]>();
    for (const k of this.logs.keys()) {
      const [, name = '', p = '0'] = /^(.*)\[(\d+)\]$/.exec(k) ?? [];
      topics.set(name, [...(topics.get(name) ?? []), { id: Number(p), leader: 1 }]);
    }
    setImmediate(() =>
      cb(null, { topics: [...topics].map(([name, partitions]) => ({ name, partitions })) }),
    );
  }

  subscribe(topics: string[]): this {
    this.record({ op: 'subscribe', topics: [...topics] });
    this.subscribed = true;
    return this;
  }

  unsubscribe(): this {
    this.record({ op: 'unsubscribe' });
    if (this.member) {
      this.unsubscribed = true;
      const revoked = this.assignment.map((p) => ({ ...p }));
      const all = new Set(revoked.map(key));
      const alreadyRevoking =
        this.protocol === 'EAGER' &&
        this.pendingCallbacks.some(
          (c) => c.kind === 'revoke' && [...all].every((k) => c.keys.includes(k)),
        );
      if (revoked.length > 0 && !alreadyRevoking) this.revokeLater(revoked);
      this.maybeLeave();
      return this;
    }
    if (this.assignment.length > 0) {
      const revoked = this.assignment.map((p) => ({ ...p }));
      setImmediate(() => this.rebalanceRevoke(revoked));
    }
    return this;
  }

  private consumeTimeout = 1000;
  setDefaultConsumeTimeout(ms: number): void {
    this.consumeTimeout = ms;
  }

  /**
   * position() calls made while a consume() call was unanswered. librdkafka's position then counts
   * the messages that call took, which the application has not been handed yet; a ledger moved to
   * it would commit past them. A test asserts this stays 0.
   */
  positionsWhileConsuming = 0;
  /**
   * disconnect() calls made while a consume() call was unanswered: the real binding crashes the
   * process then (the call's worker uses the consumer being destroyed). Tests assert this stays 0.
   */
  disconnectsWhileConsuming = 0;
  /** Whether a consume() call is unanswered (its messages taken from the logs, not handed out). */
  private consuming = false;

  consume(
    n: number,
    cb: (err: { code: number; message: string } | null, messages: Message[]) => void,
  ): void {
    if (this.consuming) throw new Error('consume() while another consume() is unanswered');
    this.consuming = true;
    this.consumeCalls += 1;
    // Commit results are served from inside consume(), in the order the commits were sent.
    for (const item of this.outbox) {
      if (item.kind === 'commit' || item.kind === 'local') item.polls -= 1;
    }
    const due = this.takeReady();
    const out: Message[] = [];
    if (this.injectLate.length > 0) out.push(...this.injectLate.splice(0));
    const blocked = this.member ? this.pendingCallbacks.length > 0 : this.revokePending;
    for (const k of this.unstable) {
      if (this.pendingTxnOffsets?.(k) === true) continue;
      this.unstable.delete(k);
      this.fetchPos.set(k, this.commits.get(k) ?? 0);
    }
    if (!blocked) {
      const active = this.assignment.filter(
        (a) => !this.paused.has(key(a)) && !this.unstable.has(key(a)),
      );
      for (let i = 0; i < active.length && out.length < n; i++) {
        const a = active[(this.rr + i) % active.length]!;
        const k = key(a);
        const log = this.logs.get(k) ?? [];
        let pos = this.fetchPos.get(k) ?? 0;
        while (pos < log.length && out.length < n) {
          const m = log[pos++]!;
          if (!controlRecords.has(m)) out.push(m);
        }
        this.fetchPos.set(k, pos);
        if (pos > 0) this.appPos.set(k, pos);
      }
      this.rr += 1;
    }
    if (this.sharing) this.shareBatchBuffers(out);
    const delay =
      out.length > 0 ? (this.options.consumeLatencyMs ?? 0) : Math.min(this.consumeTimeout, 2);
    const consumeError =
      out.length === 0 ? this.consumeErrors.shift() : this.droppedBatchErrors.shift();
    setTimeout(() => {
      this.consuming = false;
      if (consumeError) {
        cb(consumeError, []);
        return;
      }
      for (const item of due) this.deliver(item, true);
      this.consumeLog.push({
        asked: n,
        returned: out.length,
        answeredAt: Date.now(),
        positionAt: undefined,
      });
      cb(null, out);
    }, delay);
  }

  commit(offsets?: TopicPartitionOffset | TopicPartitionOffset[] | null): this {
    if (this.member && !this.connected) throw new Error('KafkaConsumer is disconnected');
    if (offsets === undefined || offsets === null) {
      // A commit of the current assignment: the library stores no offsets, so librdkafka answers
      // locally — ERR__ASSIGNMENT_LOST when the assignment is lost, else ERR__NO_OFFSET — at the
      // next poll, whatever waits for the broker.
      const lost = this.assignmentLost && this.assignment.length > 0;
      this.outbox.push({
        kind: 'local',
        polls: 1,
        error: lost ? E.ERR__ASSIGNMENT_LOST : E.ERR__NO_OFFSET,
        offsets: lost
          ? []
          : this.assignment.map(
              (a) => ({ topic: a.topic, partition: a.partition }) as TopicPartitionOffset,
            ),
      });
      return this;
    }
    const list = Array.isArray(offsets) ? offsets : [offsets];
    this.record({ op: 'commit', offsets: list.map((o) => `${key(o)}@${o.offset}`) });
    const copy = list.map((o) => ({ ...o }));
    let plan: CommitPlan;
    if (!this.member) {
      plan = { error: this.options.commitResult?.(list) };
    } else if (this.left) {
      plan = { error: UNKNOWN_MEMBER_ID };
    } else if (this.fencedWith !== undefined) {
      plan = { error: this.fencedWith };
    } else {
      plan = this.options.commitPlan?.(copy) ?? { error: this.options.commitResult?.(list) };
    }
    this.options.hooks?.commitSent?.(copy, plan);
    this.outbox.push({
      kind: 'commit',
      offsets: copy,
      polls: plan.polls ?? this.options.commitPolls?.(list) ?? this.options.commitLatencyPolls ?? 1,
      error: plan.error,
      held: plan.held === true,
      overtaken: plan.held === true && plan.overtaken === true,
      deferred: plan.held === true && plan.deferred === true,
      appliesLate:
        plan.error === undefined
          ? undefined
          : (plan.appliesLate ?? this.options.commitAppliesLate?.(copy)),
      epoch: this.fenceEpoch,
    });
    return this;
  }

  /** See {@link callsRacingClose}. */
  private noteCloseRace(call: Call): void {
    if (this.disconnecting && !this.revokePending && !this.closeWaitsForAssignCall())
      this.callsRacingClose.push(call);
  }

  /**
   * Under cooperative rebalancing (and KIP-848) librdkafka's close waits for the answer to an
   * assignment delivered to the application (even an empty one); an eager close releases it
   * itself (its unsubscribe leaves the wait for the assign call).
   */
  private closeWaitsForAssignCall(): boolean {
    return (
      this.protocol === 'COOPERATIVE' && this.pendingCallbacks.some((c) => c.kind === 'assign')
    );
  }

  /** Whether librdkafka's close ended (see {@link disconnect}). */
  closeEnded = false;

  private record(call: Call): void {
    this.calls.push(call);
    this.options.hooks?.call?.(call);
  }

  /**
   * Removes the requests that may be answered now: local answers once due; in member mode the
   * head of the outbox up to the first commit still waiting (one coordinator connection), else
   * every commit whose latency has passed.
   */
  private takeReady(): OutboxItem[] {
    const ready: OutboxItem[] = [];
    let blocked = false;
    /** An overtaken commit still waits: commits go past it, releases and the leave do not. */
    let overtaken = false;
    this.outbox = this.outbox.filter((item) => {
      const waits =
        (item.kind === 'commit' && (item.held || item.polls > 0)) ||
        (item.kind === 'local' && item.polls > 0);
      if (item.kind === 'local' || !this.member) {
        if (waits) return true;
        ready.push(item);
        return false;
      }
      if (item.kind === 'commit' && item.held && item.deferred) return true; // nothing waits for it
      if (item.kind === 'commit' && item.held && item.overtaken && !blocked) {
        overtaken = true;
        return true;
      }
      if (blocked || waits || (overtaken && item.kind !== 'commit')) {
        blocked = true;
        return true;
      }
      ready.push(item);
      return false;
    });
    return ready;
  }

  /** Releases and the leave reach the broker at once unless a commit before them waits. */
  private pump(): void {
    for (;;) {
      const head = this.outbox.find(
        (i) => i.kind !== 'local' && !(i.kind === 'commit' && i.held && i.deferred),
      );
      if (head === undefined) return;
      const at = this.outbox.indexOf(head);
      if (head.kind === 'commit') {
        // Once disconnected nobody polls: the broker still applies what was sent.
        if (head.held || this.connected) return;
        this.outbox.splice(at, 1);
        this.deliver(head, false);
        continue;
      }
      this.outbox.splice(at, 1);
      this.deliver(head, false);
    }
  }

  /** The broker handles one request; a commit's result reaches the client when `notify`. */
  private deliver(item: OutboxItem, notify: boolean): void {
    const hooks = this.options.hooks;
    if (item.kind === 'release') {
      // The release moved the member's epoch on: a late copy of an earlier commit of these
      // partitions is refused from now on.
      const released = new Set(item.keys);
      this.lateApplies = this.lateApplies.filter(
        (l) => !l.offsets.some((o) => released.has(key(o))),
      );
      hooks?.released?.(item.keys);
      return;
    }
    if (item.kind === 'leave') {
      hooks?.left?.();
      return;
    }
    if (item.kind === 'local') {
      if (notify) {
        const err = Object.assign(new Error(`commit error ${item.error}`), { code: item.error });
        this.emit('offset.commit', err, item.offsets);
      }
      return;
    }
    let error = item.error;
    if (error === undefined && this.member && item.epoch !== this.fenceEpoch) {
      error = this.fencedWith ?? UNKNOWN_MEMBER_ID;
    }
    // A deferred commit rebuilt after the member left: the broker does not know the member.
    if (error === undefined && item.deferred && this.hasLeft) error = UNKNOWN_MEMBER_ID;
    if (error === undefined) for (const o of item.offsets) this.commits.set(key(o), o.offset);
    hooks?.commitApplied?.(item.offsets, error);
    if (error === undefined) {
      // Late copies of earlier commits waiting for this one land right after it.
      const due = this.lateApplies.filter((l) => l.when === 'after-next');
      this.lateApplies = this.lateApplies.filter((l) => l.when !== 'after-next');
      this.applyLateItems(due);
    }
    if (item.error !== undefined && item.appliesLate !== undefined) {
      this.lateApplies.push({
        offsets: item.offsets,
        when: item.appliesLate,
        epoch: item.epoch,
        answeredAt: Date.now(),
      });
    }
    if (!notify) return;
    const err =
      error === undefined
        ? undefined
        : Object.assign(new Error(`commit error ${error}`), { code: error });
    this.emit('offset.commit', err, item.offsets);
  }

  /** How many times committed() read the group's offsets. */
  committedReads = 0;

  committed(
    tps: { topic: string; partition: number }[],
    timeout: number,
    cb: (err: Error | null, r: TopicPartitionOffset[]) => void,
  ): this {
    this.committedReads += 1;
    // read_committed: librdkafka retries an "unstable offset commit" answer until the call's
    // timeout, then answers ERR__TIMED_OUT.
    const since = Date.now();
    const answer = (): void => {
      if (tps.some((t) => this.pendingTxnOffsets?.(key(t)) === true)) {
        if (Date.now() - since >= timeout) {
          cb(Object.assign(new Error('Local: Timed out'), { code: E.ERR__TIMED_OUT }), []);
        } else setTimeout(answer, 5);
        return;
      }
      cb(
        null,
        tps.map((t) => ({ ...t, offset: this.commits.get(key(t)) ?? -1001 })),
      );
    };
    setImmediate(answer);
    return this;
  }

  assign(partitions: Assignment[]): this {
    if (this.protocol === 'COOPERATIVE') throw new Error('Local: Erroneous state');
    // node-rdkafka checks its own state first: once its close began, an assign never reaches
    // librdkafka.
    if (this.disconnecting) {
      throw Object.assign(new Error('Local: Erroneous state'), { code: E.ERR__STATE });
    }
    this.record({ op: 'assign', partitions: partitions.map(key) });
    const before = this.assignment.map(key);
    // librdkafka's eager assign() replaces the assignment: every partition in it starts again at
    // the offset given or the committed one, even one that was assigned before the call.
    this.setAssignment([]);
    this.setAssignment(partitions.map((p) => ({ ...p })));
    this.revokePending = false;
    this.assignmentLost = false;
    if (this.member) {
      // The eager assign call answers every callback waiting (it replaces the assignment).
      this.pendingCallbacks = [];
      const now = new Set(this.assignment.map(key));
      this.released(before.filter((k) => !now.has(k)));
      this.afterAssign(partitions);
    }
    return this;
  }

  unassign(): this {
    // While librdkafka's consumer group terminates, every (un)assign call is taken as an unassign.
    if (this.protocol === 'COOPERATIVE' && !this.disconnecting)
      throw new Error('Local: Erroneous state');
    this.record({ op: 'unassign' });
    this.noteCloseRace({ op: 'unassign' });
    const before = this.assignment.map(key);
    this.setAssignment([]);
    this.revokePending = false;
    this.assignmentLost = false;
    if (this.member) {
      this.pendingCallbacks = [];
      this.released(before);
    }
    return this;
  }

  incrementalAssign(partitions: Assignment[]): this {
    if (this.protocol !== 'COOPERATIVE')
      throw Object.assign(new Error('Local: Erroneous state'), { code: E.ERR__STATE });
    if (this.disconnecting || (this.member && !this.connected)) {
      throw Object.assign(new Error('KafkaConsumer is disconnected'), { code: E.ERR__STATE });
    }
    this.record({ op: 'incrementalAssign', partitions: partitions.map(key) });
    this.setAssignment([...this.assignment, ...partitions.map((p) => ({ ...p }))]);
    this.revokePending = false;
    this.assignmentLost = false;
    if (this.member) {
      const assigned = new Set(this.assignment.map(key));
      const given = new Set(partitions.map(key));
      let answeredEmpty = false;
      this.pendingCallbacks = this.pendingCallbacks.filter((c) => {
        if (c.kind !== 'assign') return true;
        if (c.keys.length === 0) {
          // An empty assignment is answered by the next assign call.
          if (answeredEmpty || partitions.length > 0) return true;
          answeredEmpty = true;
          return false;
        }
        return !(c.keys.every((k) => assigned.has(k)) && c.keys.some((k) => given.has(k)));
      });
      this.afterAssign(partitions);
    }
    return this;
  }

  incrementalUnassign(partitions: Assignment[]): this {
    if (this.protocol !== 'COOPERATIVE')
      throw Object.assign(new Error('Local: Erroneous state'), { code: E.ERR__STATE });
    const assigned = new Set(this.assignment.map(key));
    for (const p of partitions) {
      if (!assigned.has(key(p))) {
        throw Object.assign(
          new Error(`${key(p)} can't be unassigned since it is not in the current assignment`),
          {
            code: E.ERR__INVALID_ARG,
          },
        );
      }
    }
    this.record({ op: 'incrementalUnassign', partitions: partitions.map(key) });
    this.noteCloseRace({ op: 'incrementalUnassign', partitions: partitions.map(key) });
    const gone = new Set(partitions.map(key));
    this.setAssignment(this.assignment.filter((a) => !gone.has(key(a))));
    this.revokePending = false;
    this.assignmentLost = false;
    if (this.member) {
      const still = new Set(this.assignment.map(key));
      // A revoke is answered once none of its partitions is assigned any more.
      this.pendingCallbacks = this.pendingCallbacks.filter(
        (c) => c.kind !== 'revoke' || c.keys.some((k) => still.has(k)),
      );
      this.released([...gone]);
    }
    return this;
  }

  /** After unsubscribe(), what an assign call adds is revoked again (the target is empty). */
  private afterAssign(partitions: Assignment[]): void {
    if (partitions.length === 0) return;
    // Fenced: what an assign asked before the fence brings is lost too.
    if (this.fencedWith !== undefined) this.revokeLater(partitions, true);
    else if (this.unsubscribed && !this.left) this.revokeLater(partitions);
  }

  /** A fenced member is a member again once nothing is assigned nor waiting to be. */
  private maybeRejoin(): void {
    if (this.fencedWith === undefined || this.assignment.length > 0) return;
    if (this.pendingCallbacks.some((c) => c.kind === 'assign')) return;
    this.fencedWith = undefined;
  }

  /**
   * A revoke librdkafka serves from a later poll: of the partitions still assigned by then (none
   * left, or disconnected: no callback).
   */
  private revokeLater(partitions: Assignment[], lost = false): void {
    const revoked = partitions.map((p) => ({ topic: p.topic, partition: p.partition }));
    setImmediate(() => {
      const still = new Set(this.assignment.map(key));
      const now = revoked.filter((p) => still.has(key(p)));
      if (now.length > 0 && this.connected) this.rebalanceRevoke(now, { lost });
    });
  }

  /** Tells the broker (in order) that partitions were released; leaves or rejoins when due. */
  private released(keys: string[]): void {
    if (keys.length > 0) {
      this.outbox.push({ kind: 'release', keys });
      this.pump();
    }
    this.maybeRejoin();
    this.maybeLeave();
  }

  /** After unsubscribe(), the member leaves once nothing is assigned nor waiting to be. */
  private maybeLeave(): void {
    if (!this.member || !this.unsubscribed || this.left) return;
    if (this.assignment.length > 0) return;
    if (this.pendingCallbacks.some((c) => c.kind === 'assign')) return;
    this.left = true;
    this.outbox.push({ kind: 'leave' });
    this.pump();
  }

  /** Partitions started at the reset offset while a transaction held offsets of them. */
  readonly readAroundPending: string[] = [];

  private setAssignment(next: Assignment[]): void {
    const keep = new Set(next.map(key));
    // librdkafka 2.12: an "unstable offset commit" answer arriving after the assignment changed is
    // not retried; the partition goes back to pending with an INVALID offset, which starts it at
    // auto.offset.reset (rd_kafka_assignment_apply_offsets).
    if ((this.options.unstableStartsAtReset ?? true) && this.unstable.size > 0) {
      for (const k of [...this.unstable]) {
        if (!keep.has(k)) continue;
        this.unstable.delete(k);
        this.fetchPos.set(k, 0);
        this.readAroundPending.push(k);
      }
    }
    for (const a of this.assignment) {
      if (!keep.has(key(a))) {
        this.fetchPos.delete(key(a));
        this.appPos.delete(key(a));
        this.unstable.delete(key(a));
      }
    }
    for (const a of next) {
      // A new assignment starts at the offset given in the assign call, else at the committed
      // offset (earliest when none).
      const given = (a as { offset?: number }).offset;
      const fromCommitted = !(typeof given === 'number' && given >= 0);
      if (fromCommitted && !this.fetchPos.has(key(a)) && this.pendingTxnOffsets?.(key(a))) {
        // read_committed: the committed offset is fetched with require_stable, and the broker
        // answers UNSTABLE_OFFSET_COMMIT while a transaction holds offsets of the partition.
        this.unstable.add(key(a));
      } else if (!this.fetchPos.has(key(a))) {
        this.fetchPos.set(
          key(a),
          typeof given === 'number' && given >= 0 ? given : (this.commits.get(key(a)) ?? 0),
        );
      }
    }
    this.assignment = next;
  }

  /** The companion binding's views (`setBatchBufferSharing(true)`): see shareBatchBuffers. */
  private sharing = false;
  setBatchBufferSharing(on: boolean): void {
    this.sharing = on;
  }

  /**
   * As the companion binding with sharing on: each returned message's value and key become views
   * of one buffer per partition of this consume batch.
   */
  private shareBatchBuffers(out: Message[]): void {
    const parts = new Map<number, Message[]>();
    for (const m of out) parts.set(m.partition, [...(parts.get(m.partition) ?? []), m]);
    for (const [, ms] of parts) {
      const pieces = ms.flatMap((m) => [
        m.value ?? Buffer.alloc(0),
        (m.key as Buffer) ?? Buffer.alloc(0),
      ]);
      const batch = Buffer.concat(pieces);
      let at = 0;
      ms.forEach((m, i) => {
        const view = (b: Buffer): Buffer => {
          const v = batch.subarray(at, at + b.length);
          at += b.length;
          return v;
        };
        const value = pieces[2 * i] as Buffer;
        const key = pieces[2 * i + 1] as Buffer;
        const copy = { ...m, value: m.value === null ? null : view(value) } as Message;
        copy.key = m.key === undefined || m.key === null ? m.key : view(key);
        if (m.key === undefined || m.key === null) at += key.length;
        if (m.value === null) at += value.length;
        ms[i] = copy;
        out[out.indexOf(m)] = copy;
      });
    }
  }

  rebalanceProtocol(): string {
    // node-rdkafka answers NONE once its close began (its own "connected" check).
    if (this.disconnecting) return 'NONE';
    return this.protocol;
  }

  /** Moves the fetch position of an assigned partition (as librdkafka, purging what was fetched). */
  seek(tp: TopicPartitionOffset, _timeout: number, cb: (err?: Error) => void): this {
    this.record({ op: 'seek', partitions: [`${key(tp)}@${tp.offset}`] });
    const assigned = this.assignment.some((a) => key(a) === key(tp)) && !this.options.seekError;
    if (this.options.seekError) {
      setImmediate(() => cb(new Error(this.options.seekError)));
      return this;
    }
    if (assigned) {
      this.fetchPos.set(key(tp), tp.offset);
      this.appPos.delete(key(tp)); // librdkafka resets the position until a record is consumed
    }
    if (assigned && this.options.seekTimesOut) {
      setImmediate(() =>
        cb(Object.assign(new Error('Local: Timed out'), { code: E.ERR__TIMED_OUT })),
      );
      return this;
    }
    setImmediate(() => (assigned ? cb() : cb(new Error('Local: Erroneous state'))));
    return this;
  }

  /** The first offset whose record timestamp is ≥ the given one (-1 when none). */
  offsetsForTimes(
    tps: TopicPartitionOffset[],
    _timeout: number,
    cb: (err: null, offsets: TopicPartitionOffset[]) => void,
  ): void {
    const out = tps.map((tp) => {
      const log = this.logs.get(key(tp)) ?? [];
      const hit = log.find((m) => (m.timestamp ?? 0) >= tp.offset);
      return { topic: tp.topic, partition: tp.partition, offset: hit ? hit.offset : -1 };
    });
    setImmediate(() => cb(null, out));
  }

  assignments(): Assignment[] {
    return this.assignment.map((a) => ({ ...a }));
  }

  pause(tps: { topic: string; partition: number }[]): void {
    if (!this.connected) throw new Error('KafkaConsumer is disconnected');
    this.record({ op: 'pause', partitions: tps.map(key) });
    if ((this.options.losePauses ?? 0) > this.pausesLost) {
      this.pausesLost += 1;
      return;
    }
    for (const t of tps) this.paused.add(key(t));
  }

  resume(tps: { topic: string; partition: number }[]): void {
    if (!this.connected) throw new Error('KafkaConsumer is disconnected');
    this.record({ op: 'resume', partitions: tps.map(key) });
    for (const t of tps) this.paused.delete(key(t));
  }

  /** getMetadata() and queryWatermarkOffsets() calls so far. */
  metadataRequests = 0;
  watermarkRequests = 0;
  /** High watermarks reported by queryWatermarkOffsets (default: the next offset produced). */
  watermarks = new Map<string, number>();
  queryWatermarkOffsets(
    topic: string,
    partition: number,
    _timeout: number,
    cb: (err: null, w: { lowOffset: number; highOffset: number }) => void,
  ): void {
    this.watermarkRequests += 1;
    const k = key({ topic, partition });
    setImmediate(() =>
      cb(null, {
        lowOffset: 0,
        highOffset: this.watermarks.get(k) ?? this.logs.get(k)?.length ?? 0,
      }),
    );
  }

  /** librdkafka's app position: invalid (-1001) until a message of this assignment was consumed. */
  position(tps: { topic: string; partition: number }[]): TopicPartitionOffset[] {
    if (this.consuming) this.positionsWhileConsuming += 1;
    const last = this.consumeLog[this.consumeLog.length - 1];
    if (last !== undefined) last.positionAt ??= Date.now();
    return tps.map((t) => ({ ...t, offset: this.appPos.get(key(t)) ?? -1001 }));
  }
}

/** Builds a factory that records the fake it creates. */
export function fakeFactory(options: FakeOptions = {}): {
  factory: (g: Record<string, unknown>) => never;
  fake: () => FakeConsumer;
} {
  let created: FakeConsumer | undefined;
  return {
    factory: (g) => {
      created = new FakeConsumer(g, options);
      return created as never;
    },
    fake: () => {
      if (!created) throw new Error('no consumer created yet');
      return created;
    },
  };
}
