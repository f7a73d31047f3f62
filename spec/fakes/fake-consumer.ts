/**
 * A deterministic fake of the node-rdkafka KafkaConsumer subset the library uses. It follows the
 * binding's behaviours that the contract tests confirm on the real broker:
 * - commit results are delivered only from inside consume() (served by the consume loop);
 * - while a revoke awaits its unassign, consume() returns no messages at all (librdkafka pauses the
 *   whole assignment);
 * - during disconnect() a still-assigned consumer gets a final revoke in which only unassign works;
 * - incrementalUnassign of a partition not assigned throws ERR__INVALID_ARG.
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

export interface FakeOptions {
  protocol?: Protocol;
  /** Decides each commit's result: a librdkafka error code, or undefined for success. */
  commitResult?: (offsets: TopicPartitionOffset[]) => number | undefined;
  /** Consume calls before a commit result is delivered. @default 1 */
  commitLatencyPolls?: number;
  /** Per commit: consume calls before its result is delivered (overrides `commitLatencyPolls`). */
  commitPolls?: (offsets: TopicPartitionOffset[]) => number | undefined;
  connectError?: string;
  /** Makes seek() fail with this message. */
  seekError?: string;
  /** `event.error` payloads emitted just before a failing connect's callback (as node-rdkafka does). */
  connectErrorEvents?: Error[];
}

export class FakeConsumer extends EventEmitter {
  readonly calls: Call[] = [];
  readonly commits = new Map<string, number>();
  protocol: Protocol;
  private connected = false;
  private assignment: Assignment[] = [];
  /** Each partition's log; consumption reads it from a fetch position, as Kafka does. */
  private readonly logs = new Map<string, Message[]>();
  /** Fetch positions of assigned partitions: the committed offset (or 0) at assignment. */
  private readonly fetchPos = new Map<string, number>();
  /** App positions (one past the last delivered offset) of this assignment, for position(). */
  private readonly appPos = new Map<string, number>();
  private readonly paused = new Set<string>();
  private revokePending = false;
  private pendingResults: { polls: number; err?: number; offsets: TopicPartitionOffset[] }[] = [];
  private readonly rebalanceCb: (err: { code: number; message: string }, a: Assignment[]) => void;
  private rr = 0;
  consumeCalls = 0;
  /** Errors the next consume() calls return instead of messages (as the binding reports them). */
  readonly consumeErrors: { code: number; message: string }[] = [];

  constructor(
    readonly config: Record<string, unknown>,
    private readonly options: FakeOptions = {},
  ) {
    super();
    this.protocol = options.protocol ?? 'EAGER';
    this.rebalanceCb = config.rebalance_cb as never;
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

  /** Fires an ASSIGN rebalance callback. */
  rebalanceAssign(partitions: { topic: string; partition: number }[]): void {
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
    this.rebalanceCb(
      { code: E.ERR__REVOKE_PARTITIONS, message: 'revoke' },
      partitions.map((p) => ({ ...p })),
    );
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
    this.calls.push({ op: 'connect' });
    setImmediate(() => {
      if (this.options.connectError) {
        for (const e of this.options.connectErrorEvents ?? []) this.emit('event.error', e);
        cb(new Error(this.options.connectError));
      } else {
        this.connected = true;
        cb(null, { name: 'fake' });
      }
    });
    return this;
  }

  disconnect(cb?: () => void): this {
    this.calls.push({ op: 'disconnect' });
    if (this.assignment.length > 0) {
      // librdkafka's close() fires a final revoke in which only unassign works.
      this.revokePending = true;
      this.connected = false;
      this.rebalanceCb(
        { code: E.ERR__REVOKE_PARTITIONS, message: 'revoke' },
        this.assignment.map((p) => ({ ...p })),
      );
    }
    this.connected = false;
    setImmediate(() => cb?.());
    return this;
  }

  isConnected(): boolean {
    return this.connected;
  }

  /** Topics are the ones records were produced to. */
  getMetadata(
    _opts: unknown,
    cb: (err: null, md: { topics: { name: string; partitions: { id: number }[] }[] }) => void,
  ): void {
    const topics = new Map<string, { id: number }[]>();
    for (const k of this.logs.keys()) {
      const [, name = '', p = '0'] = /^(.*)\[(\d+)\]$/.exec(k) ?? [];
      topics.set(name, [...(topics.get(name) ?? []), { id: Number(p) }]);
    }
    setImmediate(() =>
      cb(null, { topics: [...topics].map(([name, partitions]) => ({ name, partitions })) }),
    );
  }

  subscribe(topics: string[]): this {
    this.calls.push({ op: 'subscribe', topics: [...topics] });
    return this;
  }

  unsubscribe(): this {
    this.calls.push({ op: 'unsubscribe' });
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

  consume(
    n: number,
    cb: (err: { code: number; message: string } | null, messages: Message[]) => void,
  ): void {
    this.consumeCalls += 1;
    // Commit results are served from inside consume().
    const due = this.pendingResults.filter((r) => --r.polls <= 0);
    this.pendingResults = this.pendingResults.filter((r) => r.polls > 0);
    const out: Message[] = [];
    if (this.injectLate.length > 0) out.push(...this.injectLate.splice(0));
    if (!this.revokePending) {
      const active = this.assignment.filter((a) => !this.paused.has(key(a)));
      for (let i = 0; i < active.length && out.length < n; i++) {
        const a = active[(this.rr + i) % active.length]!;
        const k = key(a);
        const log = this.logs.get(k) ?? [];
        let pos = this.fetchPos.get(k) ?? 0;
        while (pos < log.length && out.length < n) out.push(log[pos++]!);
        this.fetchPos.set(k, pos);
        if (pos > 0) this.appPos.set(k, pos);
      }
      this.rr += 1;
    }
    const delay = out.length > 0 ? 0 : Math.min(this.consumeTimeout, 2);
    const consumeError = out.length === 0 ? this.consumeErrors.shift() : undefined;
    setTimeout(() => {
      if (consumeError) {
        cb(consumeError, []);
        return;
      }
      for (const r of due) {
        const err =
          r.err === undefined
            ? undefined
            : Object.assign(new Error(`commit error ${r.err}`), { code: r.err });
        if (r.err === undefined) for (const o of r.offsets) this.commits.set(key(o), o.offset);
        this.emit('offset.commit', err, r.offsets);
      }
      cb(null, out);
    }, delay);
  }

  commit(offsets?: TopicPartitionOffset | TopicPartitionOffset[] | null): this {
    if (offsets === undefined || offsets === null) {
      // A commit of the current assignment: the library stores no offsets, so librdkafka answers
      // locally — ERR__ASSIGNMENT_LOST when the assignment is lost, else ERR__NO_OFFSET.
      const lost = this.assignmentLost && this.assignment.length > 0;
      this.pendingResults.push({
        polls: 1,
        err: lost ? E.ERR__ASSIGNMENT_LOST : E.ERR__NO_OFFSET,
        offsets: lost
          ? []
          : this.assignment.map(
              (a) => ({ topic: a.topic, partition: a.partition }) as TopicPartitionOffset,
            ),
      });
      return this;
    }
    const list = Array.isArray(offsets) ? offsets : [offsets];
    this.calls.push({ op: 'commit', offsets: list.map((o) => `${key(o)}@${o.offset}`) });
    const err = this.options.commitResult?.(list);
    this.pendingResults.push({
      polls: this.options.commitPolls?.(list) ?? this.options.commitLatencyPolls ?? 1,
      err,
      offsets: list.map((o) => ({ ...o })),
    });
    return this;
  }

  committed(
    tps: { topic: string; partition: number }[],
    _timeout: number,
    cb: (err: null, r: TopicPartitionOffset[]) => void,
  ): this {
    setImmediate(() =>
      cb(
        null,
        tps.map((t) => ({ ...t, offset: this.commits.get(key(t)) ?? -1001 })),
      ),
    );
    return this;
  }

  assign(partitions: Assignment[]): this {
    if (this.protocol === 'COOPERATIVE') throw new Error('Local: Erroneous state');
    this.calls.push({ op: 'assign', partitions: partitions.map(key) });
    this.setAssignment(partitions.map((p) => ({ ...p })));
    this.revokePending = false;
    this.assignmentLost = false;
    return this;
  }

  unassign(): this {
    if (this.protocol === 'COOPERATIVE') throw new Error('Local: Erroneous state');
    this.calls.push({ op: 'unassign' });
    this.setAssignment([]);
    this.revokePending = false;
    this.assignmentLost = false;
    return this;
  }

  incrementalAssign(partitions: Assignment[]): this {
    if (this.protocol !== 'COOPERATIVE')
      throw Object.assign(new Error('Local: Erroneous state'), { code: E.ERR__STATE });
    this.calls.push({ op: 'incrementalAssign', partitions: partitions.map(key) });
    this.setAssignment([...this.assignment, ...partitions.map((p) => ({ ...p }))]);
    this.revokePending = false;
    this.assignmentLost = false;
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
    this.calls.push({ op: 'incrementalUnassign', partitions: partitions.map(key) });
    const gone = new Set(partitions.map(key));
    this.setAssignment(this.assignment.filter((a) => !gone.has(key(a))));
    this.revokePending = false;
    this.assignmentLost = false;
    return this;
  }

  private setAssignment(next: Assignment[]): void {
    const keep = new Set(next.map(key));
    for (const a of this.assignment) {
      if (!keep.has(key(a))) {
        this.fetchPos.delete(key(a));
        this.appPos.delete(key(a));
      }
    }
    for (const a of next) {
      // A new assignment starts at the offset given in the assign call, else at the committed
      // offset (earliest when none).
      const given = (a as { offset?: number }).offset;
      if (!this.fetchPos.has(key(a))) {
        this.fetchPos.set(
          key(a),
          typeof given === 'number' && given >= 0 ? given : (this.commits.get(key(a)) ?? 0),
        );
      }
    }
    this.assignment = next;
  }

  rebalanceProtocol(): string {
    return this.protocol;
  }

  /** Moves the fetch position of an assigned partition (as librdkafka, purging what was fetched). */
  seek(tp: TopicPartitionOffset, _timeout: number, cb: (err?: Error) => void): this {
    this.calls.push({ op: 'seek', partitions: [`${key(tp)}@${tp.offset}`] });
    const assigned = this.assignment.some((a) => key(a) === key(tp)) && !this.options.seekError;
    if (this.options.seekError) {
      setImmediate(() => cb(new Error(this.options.seekError)));
      return this;
    }
    if (assigned) {
      this.fetchPos.set(key(tp), tp.offset);
      this.appPos.delete(key(tp)); // librdkafka resets the position until a record is consumed
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
    this.calls.push({ op: 'pause', partitions: tps.map(key) });
    for (const t of tps) this.paused.add(key(t));
  }

  resume(tps: { topic: string; partition: number }[]): void {
    if (!this.connected) throw new Error('KafkaConsumer is disconnected');
    this.calls.push({ op: 'resume', partitions: tps.map(key) });
    for (const t of tps) this.paused.delete(key(t));
  }

  /** High watermarks reported by queryWatermarkOffsets (default: the next offset produced). */
  watermarks = new Map<string, number>();
  queryWatermarkOffsets(
    topic: string,
    partition: number,
    _timeout: number,
    cb: (err: null, w: { lowOffset: number; highOffset: number }) => void,
  ): void {
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
