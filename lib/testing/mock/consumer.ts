/**
 * {@link MockKafka}'s `KafkaConsumer`: node-rdkafka's consumer API over the in-memory broker, with
 * the binding's habits the library relies on: callbacks answer asynchronously; a commit's result
 * (`offset.commit`) comes with the next consume(); rebalance callbacks go to `rebalance_cb` and
 * wait for the (un)assign call that answers them, consume() returning nothing meanwhile (without
 * `rebalance_cb` it answers them itself); `disconnect()` while holding partitions revokes first.
 */
import * as Kafka from 'node-rdkafka';
import type { Assignment, Message, TopicPartitionOffset } from 'node-rdkafka';
import type { Isolation, MockBroker } from './broker';
import { MockBroker as Broker, partitionKey } from './broker';
import type { GroupPort, GroupProtocolKind, MockGroup } from './group';
import {
  describe,
  kafkaError,
  keyOf,
  messageOf,
  metadataOf,
  offsetsForTimesOf,
  protocolOf,
  resetOffset,
  startOffset,
  waitForAnswer,
} from './client-parts';
import type { MockClient } from './client-parts';
import type { Tp } from './client-parts';

const E = Kafka.CODES.ERRORS;

/**
 * The consumer class of one mock cluster. `Base` is the cluster's own client base class, which its
 * producer class shares: the library takes that as the sign that both come from one module.
 */
export function mockConsumerClass(
  broker: MockBroker,
  Base: typeof MockClient,
): typeof Kafka.KafkaConsumer {
  class MockKafkaConsumer extends Base implements GroupPort {
    readonly owned = new Set<string>();
    awaiting: GroupPort['awaiting'];
    subscription: string[] = [];
    readonly protocol: GroupProtocolKind;
    readonly group: MockGroup;
    private readonly isolation: Isolation;
    private readonly reset: string;
    private readonly rebalanceCb: ((err: Error, a: Assignment[]) => void) | undefined;
    private readonly fetchPos = new Map<string, number>();
    private readonly appPos = new Map<string, number>();
    private readonly paused = new Set<string>();
    private answers: { err: Error | undefined; offsets: TopicPartitionOffset[] }[] = [];
    /** Partitions whose offset could not be reset (`auto.offset.reset: error`), to report. */
    private resetFailures: string[] = [];
    private consumeTimeout = 1000;
    private rr = 0;

    constructor(config: Record<string, unknown>, topicConfig: Record<string, unknown> = {}) {
      super();
      // librdkafka checks the settings as it would for a real consumer (never connected).
      new Kafka.KafkaConsumer(config as Kafka.ConsumerGlobalConfig, topicConfig);
      if (config['group.instance.id'] !== undefined) {
        // Refused rather than modelled wrong: a static member's partitions wait for it.
        throw kafkaError(
          E.ERR__INVALID_ARG,
          'MockKafka does not model static membership (group.instance.id): leave it out on MockKafka, or test it with startTestCluster()',
        );
      }
      const id = config['group.id'];
      if (typeof id !== 'string' || id === '') {
        throw kafkaError(E.ERR__INVALID_ARG, 'MockKafka: a KafkaConsumer needs a group.id');
      }
      this.group = broker.group(id);
      this.protocol = protocolOf(config);
      this.isolation =
        config['isolation.level'] === 'read_uncommitted' ? 'read_uncommitted' : 'read_committed';
      this.reset = String(
        topicConfig['auto.offset.reset'] ?? config['auto.offset.reset'] ?? 'latest',
      );
      this.rebalanceCb =
        typeof config.rebalance_cb === 'function' ? (config.rebalance_cb as never) : undefined;
    }

    protected override onConnected(): void {
      if (this.subscription.length > 0) this.group.join(this);
    }

    disconnect(cb?: (err: Error | null, data?: unknown) => void): this {
      if (this.connected && this.owned.size > 0) {
        this.rebalance('revoke', [...this.owned]); // librdkafka's close: a last revoke
      }
      this.connected = false;
      this.group.remove(this);
      if (this.rebalanceCb === undefined) this.owned.clear();
      setImmediate(() => {
        this.emit('disconnected', {});
        cb?.(null, {});
      });
      return this;
    }

    subscribe(topics: string[]): this {
      this.subscription = [...topics];
      if (this.connected) this.group.join(this);
      return this;
    }

    unsubscribe(): this {
      this.subscription = [];
      this.group.leave(this);
      return this;
    }

    rebalanceProtocol(): string {
      return this.protocol === 'eager' ? 'EAGER' : 'COOPERATIVE';
    }

    refused(code: number, message: string): void {
      setImmediate(() => this.emit('event.error', kafkaError(code, message)));
    }

    /** A coordinator's callback: to `rebalance_cb`, or answered at once without one. */
    rebalance(kind: 'assign' | 'revoke', keys: string[]): void {
      this.awaiting = { kind, keys };
      const partitions = keys.map(keyOf);
      if (this.rebalanceCb === undefined) {
        const cooperative = this.protocol !== 'eager';
        if (kind === 'assign' && cooperative) this.incrementalAssign(partitions);
        else if (kind === 'assign') this.assign(partitions);
        else if (cooperative) this.incrementalUnassign(partitions);
        else this.unassign();
        return;
      }
      const code = kind === 'assign' ? E.ERR__ASSIGN_PARTITIONS : E.ERR__REVOKE_PARTITIONS;
      this.rebalanceCb(
        kafkaError(
          code,
          kind === 'assign' ? 'Local: Assign partitions' : 'Local: Revoke partitions',
        ),
        partitions,
      );
    }

    assign(partitions: Assignment[]): this {
      this.expect('eager');
      this.setAssignment([]);
      this.add(partitions);
      this.answered();
      return this;
    }

    unassign(): this {
      this.expect('eager');
      this.setAssignment([]);
      this.answered();
      return this;
    }

    incrementalAssign(partitions: Assignment[]): this {
      this.expect('cooperative');
      this.add(partitions);
      this.answered();
      return this;
    }

    incrementalUnassign(partitions: Assignment[]): this {
      this.expect('cooperative');
      for (const p of partitions) {
        if (!this.owned.has(partitionKey(p.topic, p.partition))) {
          throw kafkaError(
            E.ERR__INVALID_ARG,
            `${partitionKey(p.topic, p.partition)} is not assigned`,
          );
        }
      }
      const gone = new Set(partitions.map((p) => partitionKey(p.topic, p.partition)));
      this.setAssignment([...this.owned].filter((k) => !gone.has(k)).map(keyOf));
      this.answered();
      return this;
    }

    assignments(): Assignment[] {
      return [...this.owned].map(keyOf);
    }

    pause(tps: Tp[]): void {
      for (const t of tps) this.paused.add(partitionKey(t.topic, t.partition));
    }

    resume(tps: Tp[]): void {
      for (const t of tps) this.paused.delete(partitionKey(t.topic, t.partition));
      broker.changed();
    }

    seek(tp: TopicPartitionOffset, _timeout: number, cb?: (err: Error | null) => void): this {
      const k = partitionKey(tp.topic, tp.partition);
      const held = this.owned.has(k);
      if (held) {
        this.fetchPos.set(k, this.startOf(tp.topic, tp.partition, tp.offset));
        this.appPos.delete(k);
      }
      setImmediate(() => cb?.(held ? null : kafkaError(E.ERR__STATE, 'Local: Erroneous state')));
      return this;
    }

    position(tps?: Tp[]): TopicPartitionOffset[] {
      return (tps ?? this.assignments()).map((t) => ({
        ...t,
        offset: this.appPos.get(partitionKey(t.topic, t.partition)) ?? -1001,
      }));
    }

    committed(
      tps: Tp[] | number,
      timeout: number | ((err: Error | null, r: TopicPartitionOffset[]) => void),
      cb?: (err: Error | null, r: TopicPartitionOffset[]) => void,
    ): this {
      const list = Array.isArray(tps) ? tps : this.assignments();
      const done = (typeof timeout === 'function' ? timeout : cb) as (
        e: null,
        r: TopicPartitionOffset[],
      ) => void;
      const out = list.map((t) => ({
        topic: t.topic,
        partition: t.partition,
        offset: this.group.committed.get(partitionKey(t.topic, t.partition)) ?? -1001,
      }));
      setImmediate(() => done(null, out));
      return this;
    }

    commit(offsets?: TopicPartitionOffset | TopicPartitionOffset[] | null): this {
      if (!this.connected) throw kafkaError(E.ERR__STATE, 'KafkaConsumer is disconnected');
      const list =
        offsets === undefined || offsets === null
          ? []
          : Array.isArray(offsets)
            ? offsets
            : [offsets];
      const copy = list.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset }));
      const code = copy.length === 0 ? E.ERR__NO_OFFSET : this.group.commit(this, copy);
      const err = code === undefined ? undefined : kafkaError(code, describe(code));
      this.answers.push({ err, offsets: copy });
      broker.changed();
      return this;
    }

    setDefaultConsumeTimeout(ms: number): void {
      this.consumeTimeout = ms;
    }

    consume(n: number, cb: (err: Error | null, messages: Message[]) => void): void {
      if (!this.connected) {
        setImmediate(() => cb(kafkaError(E.ERR__STATE, 'KafkaConsumer is not connected'), []));
        return;
      }
      // Answers at once when there is something to give, else at the first change that brings
      // some, else empty at the timeout.
      waitForAnswer(broker, this.consumeTimeout, (force) => {
        const messages = this.fetch(n);
        const failed = messages.length === 0 ? this.resetFailures.shift() : undefined;
        if (!force && !failed && messages.length === 0 && this.answers.length === 0) return false;
        this.deliverAnswers();
        if (failed !== undefined) {
          const msg = `${failed}: Local: No offset to automatically reset to (auto.offset.reset: error)`;
          cb(kafkaError(E.ERR__AUTO_OFFSET_RESET, msg), []);
        } else {
          cb(null, messages);
        }
        return true;
      });
    }

    getMetadata(
      opts: { topic?: string } | undefined,
      cb: (err: Error | null, md: unknown) => void,
    ): void {
      const md = metadataOf(broker, opts?.topic);
      setImmediate(() => cb(null, md));
    }

    queryWatermarkOffsets(
      topic: string,
      partition: number,
      _timeout: number,
      cb: (err: Error | null, w: { lowOffset: number; highOffset: number }) => void,
    ): void {
      const highOffset = broker.end(topic, partition, this.isolation);
      setImmediate(() => cb(null, { lowOffset: 0, highOffset }));
    }

    offsetsForTimes(
      tps: TopicPartitionOffset[],
      _timeout: number,
      cb: (err: Error | null, offsets: TopicPartitionOffset[]) => void,
    ): void {
      const out = offsetsForTimesOf(broker, tps);
      setImmediate(() => cb(null, out));
    }

    setOauthBearerToken(): this {
      return this;
    }

    /** Up to `n` records of the partitions held and not paused, round-robin. */
    private fetch(n: number): Message[] {
      const out: Message[] = [];
      if (this.awaiting !== undefined) return out; // a rebalance callback waits for its answer
      const active = [...this.owned].filter((k) => !this.paused.has(k));
      for (let i = 0; i < active.length && out.length < n; i++) {
        const k = active[(this.rr + i) % active.length] as string;
        const { topic, partition } = keyOf(k);
        const log = broker.log(topic, partition) ?? [];
        const end = broker.end(topic, partition, this.isolation);
        let start = this.fetchPos.get(k) ?? 0;
        if (start > log.length) {
          // Out of range (a seek past the end): librdkafka resets by auto.offset.reset.
          start = this.resetOf(topic, partition);
          if (start < 0) {
            this.resetFailures.push(k);
            this.paused.add(k); // it fetches nothing more until assigned or seeked again
            continue;
          }
        }
        let pos = start;
        while (pos < end && out.length < n) {
          const e = log[pos++]!;
          if (!Broker.delivers(e, this.isolation)) continue;
          out.push(messageOf(topic, partition, e));
        }
        // The position moves past what was read, aborted records and markers included.
        if (pos > start) this.appPos.set(k, pos);
        this.fetchPos.set(k, pos);
      }
      this.rr += 1;
      return out;
    }

    private deliverAnswers(): void {
      for (const a of this.answers.splice(0)) this.emit('offset.commit', a.err, a.offsets);
    }

    private expect(kind: 'eager' | 'cooperative'): void {
      if ((this.protocol === 'eager') !== (kind === 'eager')) {
        throw kafkaError(E.ERR__STATE, 'Local: Erroneous state');
      }
    }

    private add(partitions: Assignment[]): void {
      for (const p of partitions) {
        const k = partitionKey(p.topic, p.partition);
        this.owned.add(k);
        const given = (p as { offset?: number }).offset;
        this.fetchPos.set(k, this.startOf(p.topic, p.partition, given));
      }
    }

    private startOf(topic: string, partition: number, given: number | undefined): number {
      const committed = this.group.committed.get(partitionKey(topic, partition));
      return startOffset(broker, this.reset, this.isolation, {
        topic,
        partition,
        given,
        committed,
      });
    }

    private resetOf(topic: string, partition: number): number {
      return resetOffset(broker, this.reset, this.isolation, topic, partition);
    }

    private setAssignment(next: Tp[]): void {
      const keep = new Set(next.map((p) => partitionKey(p.topic, p.partition)));
      for (const k of [...this.owned]) {
        if (keep.has(k)) continue;
        this.owned.delete(k);
        this.fetchPos.delete(k);
        this.appPos.delete(k);
        this.paused.delete(k);
      }
    }

    /** The callback waiting is answered once the assignment is what it asked for. */
    private answered(): void {
      const a = this.awaiting;
      if (a !== undefined) {
        const done =
          a.kind === 'assign'
            ? a.keys.every((k) => this.owned.has(k))
            : a.keys.every((k) => !this.owned.has(k));
        if (done) this.awaiting = undefined;
      }
      this.group.reconcile();
    }
  }
  return MockKafkaConsumer as unknown as typeof Kafka.KafkaConsumer;
}
