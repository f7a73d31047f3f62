/**
 * The coordinator of one consumer group of {@link MockKafka}: its committed offsets, its members
 * and how partitions move between them.
 *
 * - **Eager** (classic range/roundrobin): any change revokes every member's whole assignment; once
 *   every member answered (unassigned), each is given its new share.
 * - **Cooperative** (`cooperative-sticky`, and KIP-848's `group.protocol=consumer`): a member keeps
 *   what stays its own; a partition that moves is revoked from its owner first and given to the
 *   next one only once released.
 *
 * Shares are balanced (each member gets ⌊P/N⌋ or ⌈P/N⌉ of the P partitions its subscriptions name)
 * and sticky. A member answers each callback with its (incremental) assign or unassign call; until
 * then it gets no further callback. Commits are checked as a broker does: a member that left is
 * refused UNKNOWN_MEMBER_ID, a partition it does not hold ILLEGAL_GENERATION (classic) or
 * STALE_MEMBER_EPOCH (KIP-848).
 */
import type { MockBroker } from './broker';
import { partitionKey } from './broker';

export type GroupProtocolKind = 'eager' | 'cooperative' | 'consumer';

/** What the coordinator sees of a member (a mock consumer). */
export interface GroupPort {
  readonly subscription: readonly string[];
  readonly protocol: GroupProtocolKind;
  readonly owned: ReadonlySet<string>;
  /** The rebalance callback fired and not answered yet. */
  readonly awaiting:
    { readonly kind: 'assign' | 'revoke'; readonly keys: readonly string[] } | undefined;
  /** Fires a rebalance callback (the port records it as `awaiting`). */
  rebalance(kind: 'assign' | 'revoke', keys: string[]): void;
  /** The coordinator refused its join (an `event.error` of the client). */
  refused(code: number, message: string): void;
}

/** A planned failure of the group's next commits (see `MockKafka.failCommits`). */
export interface CommitFailurePlan {
  code: number;
  remaining: number;
  /** The broker applies the commit anyway: the client's error was a timeout, not a refusal. */
  appliedAnyway: boolean;
}

export const UNKNOWN_MEMBER_ID = 25;
export const ILLEGAL_GENERATION = 22;
export const STALE_MEMBER_EPOCH = 113;
export const INCONSISTENT_GROUP_PROTOCOL = 23;

const topicOf = (key: string): string => key.slice(0, key.lastIndexOf('['));

export class MockGroup {
  /** Committed offsets by partition key. */
  readonly committed = new Map<string, number>();
  private readonly members: GroupPort[] = [];
  private readonly leaving = new Set<GroupPort>();
  /** Members given an assignment since they joined. */
  private readonly synced = new Set<GroupPort>();
  private eagerRound = false;
  private scheduled = false;
  readonly failures: CommitFailurePlan[] = [];

  constructor(
    readonly id: string,
    private readonly broker: MockBroker,
  ) {}

  join(member: GroupPort): void {
    const first = this.members[0];
    if (first !== undefined && first !== member && first.protocol !== member.protocol) {
      // Members of one group must share a protocol: eager, cooperative-sticky or KIP-848.
      member.refused(
        INCONSISTENT_GROUP_PROTOCOL,
        `Broker: Inconsistent group protocol (group ${this.id} runs ${first.protocol}, this member ${member.protocol})`,
      );
      return;
    }
    if (!this.members.includes(member)) this.members.push(member);
    this.eagerRound = true;
    this.reconcile();
  }

  /** Leaves gracefully: what it holds is revoked first. */
  leave(member: GroupPort): void {
    if (!this.members.includes(member)) return;
    this.leaving.add(member);
    this.eagerRound = true;
    this.reconcile();
  }

  /** Gone now (closed): what it held is free. */
  remove(member: GroupPort): void {
    const at = this.members.indexOf(member);
    if (at < 0) return;
    this.members.splice(at, 1);
    this.leaving.delete(member);
    this.synced.delete(member);
    this.eagerRound = true;
    this.reconcile();
  }

  isMember(member: GroupPort): boolean {
    return this.members.includes(member);
  }

  /** The error a commit of `offsets` by `member` gets now (undefined: applied). */
  commit(
    member: GroupPort,
    offsets: readonly { topic: string; partition: number; offset: number }[],
  ): number | undefined {
    const plan = this.failures[0];
    if (plan !== undefined) {
      plan.remaining -= 1;
      if (plan.remaining <= 0) this.failures.shift();
      if (plan.appliedAnyway) this.apply(offsets);
      return plan.code;
    }
    const refused = this.refusal(member, offsets);
    if (refused === undefined) this.apply(offsets);
    return refused;
  }

  /** Why the group refuses `member`'s offsets for these partitions now (undefined: it does not). */
  refusal(
    member: GroupPort,
    offsets: readonly { topic: string; partition: number }[],
  ): number | undefined {
    if (!this.members.includes(member)) return UNKNOWN_MEMBER_ID;
    const stale = offsets.some((o) => !member.owned.has(partitionKey(o.topic, o.partition)));
    if (!stale) return undefined;
    return member.protocol === 'consumer' ? STALE_MEMBER_EPOCH : ILLEGAL_GENERATION;
  }

  apply(offsets: readonly { topic: string; partition: number; offset: number }[]): void {
    for (const o of offsets) this.committed.set(partitionKey(o.topic, o.partition), o.offset);
  }

  /** Moves partitions as the membership asks, once the current callbacks are answered. */
  reconcile(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.step();
    });
  }

  private step(): void {
    for (const m of [...this.leaving]) {
      if (m.owned.size === 0 && m.awaiting === undefined) this.remove(m);
    }
    const active = this.members.filter((m) => !this.leaving.has(m));
    if ((this.members[0]?.protocol ?? 'eager') === 'eager') this.stepEager(active);
    else this.stepCooperative(active);
    this.broker.changed();
  }

  private stepEager(active: GroupPort[]): void {
    if (this.members.some((m) => m.awaiting !== undefined)) return;
    const target = this.target(active);
    const settled = active.every(
      (m) => this.synced.has(m) && same(m.owned, target.get(m) as Set<string>),
    );
    const leaverHolds = [...this.leaving].some((m) => m.owned.size > 0);
    if (!this.eagerRound && settled && !leaverHolds) return;
    const owners = this.members.filter((m) => m.owned.size > 0);
    if (owners.length > 0 && (!settled || leaverHolds)) {
      for (const m of owners) m.rebalance('revoke', [...m.owned]);
      return;
    }
    if (this.leaving.size > 0) return; // they leave at the next step
    this.eagerRound = false;
    if (settled) return;
    for (const m of active) {
      this.synced.add(m);
      m.rebalance('assign', [...(target.get(m) as Set<string>)]);
    }
  }

  private stepCooperative(active: GroupPort[]): void {
    const target = this.target(active);
    for (const m of this.members) {
      if (m.awaiting !== undefined) continue;
      const wanted = target.get(m) ?? new Set<string>();
      const revoke = [...m.owned].filter((k) => !wanted.has(k));
      if (revoke.length > 0) {
        m.rebalance('revoke', revoke);
        continue;
      }
      if (this.leaving.has(m)) continue;
      const elsewhere = new Set<string>();
      for (const o of this.members) {
        if (o === m) continue;
        for (const k of o.owned) elsewhere.add(k);
        if (o.awaiting?.kind === 'assign') for (const k of o.awaiting.keys) elsewhere.add(k);
      }
      const assign = [...wanted].filter((k) => !m.owned.has(k) && !elsewhere.has(k));
      if (assign.length > 0 || !this.synced.has(m)) {
        this.synced.add(m);
        m.rebalance('assign', assign);
      }
    }
  }

  /** Each active member's balanced, sticky share of the partitions its subscription names. */
  private target(active: GroupPort[]): Map<GroupPort, Set<string>> {
    const out = new Map<GroupPort, Set<string>>(active.map((m) => [m, new Set<string>()]));
    const wanted = (m: GroupPort, topic: string): boolean =>
      m.subscription.some((s) => (s.startsWith('^') ? new RegExp(s).test(topic) : s === topic));
    const keys: string[] = [];
    for (const topic of this.broker.topicNames().sort()) {
      if (!active.some((m) => wanted(m, topic))) continue;
      const n = this.broker.partitionCount(topic);
      for (let p = 0; p < n; p++) keys.push(partitionKey(topic, p));
    }
    if (active.length === 0) return out;
    const base = Math.floor(keys.length / active.length);
    let extras = keys.length % active.length;
    const take = (m: GroupPort, k: string, force: boolean): boolean => {
      const share = out.get(m) as Set<string>;
      if (share.size < base || (share.size === base && extras > 0) || force) {
        if (share.size >= base && !force) extras -= 1;
        share.add(k);
        return true;
      }
      return false;
    };
    const rest: string[] = [];
    for (const k of keys) {
      const owner = active.find(
        (m) => m.owned.has(k) || (m.awaiting?.kind === 'assign' && m.awaiting.keys.includes(k)),
      );
      if (owner === undefined || !wanted(owner, topicOf(k)) || !take(owner, k, false)) rest.push(k);
    }
    for (const k of rest) {
      const eligible = active
        .filter((m) => wanted(m, topicOf(k)))
        .sort((a, b) => (out.get(a) as Set<string>).size - (out.get(b) as Set<string>).size);
      const first = eligible[0];
      if (first !== undefined && !eligible.some((m) => take(m, k, false))) take(first, k, true);
    }
    return out;
  }
}

function same(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((k) => b.has(k));
}
