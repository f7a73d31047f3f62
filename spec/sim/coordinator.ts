/**
 * The simulation's group coordinator: the broker's view of who holds which partition, and the
 * revokes and assigns it fires at the members' fakes, per protocol:
 * - eager: every member gives everything back; once the broker saw every release, the partitions
 *   are dealt out again, an assign callback per member (empty ones too);
 * - cooperative (classic): incremental revokes; partitions released are assigned only once no
 *   revoke is pending anywhere in the group (the second round of the rebalance);
 * - KIP-848: incremental revokes and assigns per member, independently; a second revoke may come
 *   while an earlier one is still being handled.
 * A partition becomes free when the broker learns its holder released it (which waits behind the
 * holder's earlier commits), when the holder leaves, or when the holder is fenced.
 */
import type { FakeConsumer } from '../fakes/fake-consumer';
import type { SimProtocol } from './config';
import type { Random } from './random';

/** A member as the coordinator sees it: a name and its client. */
export interface Member {
  readonly id: string;
  readonly fake: FakeConsumer;
}

/** What the coordinator needs from the world. */
export interface CoordinatorHost<M extends Member> {
  readonly protocol: SimProtocol;
  readonly partitions: number;
  readonly topic: string;
  readonly rnd: Random;
  /** Every member life so far (the coordinator filters who may take part). */
  members(): readonly M[];
  /** Runs `fn` as a world event at the current instant, after what is running now. */
  defer(fn: () => void): void;
  log(line: string): void;
  count(what: string): void;
}

const partitionOf = (k: string): number => Number(/\[(\d+)\]/.exec(k)?.[1] ?? -1);

export class Coordinator<M extends Member> {
  /** Which member holds (was assigned, has not released) each partition. */
  private readonly holder = new Map<number, M>();
  private deciding = false;

  constructor(private readonly host: CoordinatorHost<M>) {}

  /** One random rebalance step (a revoke, an assign, an eager round). */
  rebalance(): void {
    this.decide(() => {
      if (this.host.protocol === 'eager') this.eagerRound(this.host.rnd.chance(0.5));
      else this.incrementalStep();
    });
  }

  /** Calm phase: hand every free partition to someone. */
  assignFree(): void {
    this.decide(() => {
      if (this.host.protocol === 'eager') {
        this.eagerRound(false);
        return;
      }
      const free = this.free();
      if (free.length === 0 || this.barrier()) return;
      const eligible = this.eligible();
      if (eligible.length === 0) return;
      const shares = new Map<M, number[]>();
      for (const p of free) {
        const m = this.host.rnd.pick(eligible);
        shares.set(m, [...(shares.get(m) ?? []), p]);
      }
      for (const [m, ps] of shares) this.assign(m, ps);
    });
  }

  /** The broker learnt that `member` released these partitions. */
  released(member: M, keys: readonly string[]): void {
    const ps = keys.map(partitionOf).filter((p) => this.holder.get(p) === member);
    for (const p of ps) this.holder.delete(p);
    if (ps.length > 0) this.host.log(`broker: ${member.id} released [${ps.join(',')}]`);
  }

  /** The member left the group (or was fenced): whatever it held is free now. */
  dropped(member: M, why: string): void {
    const ps = [...this.holder].filter(([, m]) => m === member).map(([p]) => p);
    for (const p of ps) this.holder.delete(p);
    this.host.log(
      `broker: ${member.id} ${why}${ps.length > 0 ? `, freeing [${ps.join(',')}]` : ''}`,
    );
  }

  describe(): string {
    const parts = [...Array(this.host.partitions).keys()].map(
      (p) => `p${p}:${this.holder.get(p)?.id ?? 'free'}`,
    );
    const pending = this.host
      .members()
      .filter((m) => m.fake.unanswered().length > 0)
      .map(
        (m) =>
          `${m.id} waits ${m.fake
            .unanswered()
            .map((c) => c.kind)
            .join('+')}`,
      );
    return [...parts, ...pending].join(' ');
  }

  /**
   * Runs one decision; a decision asked for from inside another one (a callback's subscriber
   * calling back into the world) waits until that one has fired all its callbacks.
   */
  private decide(fn: () => void): void {
    if (this.deciding) {
      this.host.defer(() => this.decide(fn));
      return;
    }
    this.deciding = true;
    try {
      fn();
    } finally {
      this.deciding = false;
    }
  }

  private incrementalStep(): void {
    const rnd = this.host.rnd;
    const options: (() => void)[] = [];
    for (const m of this.active()) {
      const pending = m.fake.unanswered();
      if (pending.some((c) => c.kind === 'assign')) continue;
      const revoking = new Set(pending.filter((c) => c.kind === 'revoke').flatMap((c) => c.keys));
      const revocable = m.fake
        .assignments()
        .filter(
          (a) => !revoking.has(`${a.topic}[${a.partition}]`) && this.holder.get(a.partition) === m,
        )
        .map((a) => a.partition);
      if (revocable.length > 0) options.push(() => this.revoke(m, rnd.subset(revocable)));
    }
    const free = this.free();
    if (free.length > 0 && !this.barrier()) {
      for (const m of this.eligible()) options.push(() => this.assign(m, rnd.subset(free)));
    }
    if (options.length > 0) rnd.pick(options)();
  }

  private eagerRound(force: boolean): void {
    if (this.anyPending()) return;
    const holders = this.active().filter((m) => m.fake.assignments().length > 0);
    const free = this.free();
    if (holders.length > 0 && (free.length > 0 || force)) {
      for (const m of holders)
        this.revoke(
          m,
          m.fake.assignments().map((a) => a.partition),
        );
      return;
    }
    if (holders.length === 0 && free.length > 0) {
      const eligible = this.eligible();
      if (eligible.length === 0) return;
      const shares = new Map<M, number[]>(eligible.map((m) => [m, []]));
      for (const p of free) shares.get(this.host.rnd.pick(eligible))?.push(p);
      for (const [m, ps] of shares) this.assign(m, ps);
    }
  }

  private assign(member: M, wanted: readonly number[]): void {
    // The broker never assigns a member what it has (or is being given) already.
    const has = new Set([
      ...member.fake.assignments().map((a) => a.partition),
      ...member.fake
        .unanswered()
        .filter((c) => c.kind === 'assign')
        .flatMap((c) => c.keys.map(partitionOf)),
    ]);
    const partitions = wanted.filter((p) => !has.has(p));
    if (partitions.length === 0 && wanted.length > 0) return;
    for (const p of partitions) this.holder.set(p, member);
    this.host.count('assigns');
    this.host.log(`coordinator → ${member.id}: assign [${partitions.join(',')}]`);
    member.fake.rebalanceAssign(
      partitions.map((partition) => ({ topic: this.host.topic, partition })),
    );
  }

  private revoke(member: M, partitions: readonly number[]): void {
    this.host.count('revokes');
    if (member.fake.revokeInProgress) this.host.count('overlappingRevokes');
    this.host.log(`coordinator → ${member.id}: revoke [${partitions.join(',')}]`);
    member.fake.rebalanceRevoke(
      partitions.map((partition) => ({ topic: this.host.topic, partition })),
    );
  }

  /** Members in the group: subscribed, connected, not left, not fenced. */
  private active(): M[] {
    return this.host
      .members()
      .filter(
        (m) => m.fake.isConnected() && m.fake.isSubscribed && !m.fake.hasLeft && !m.fake.isFenced,
      );
  }

  /** Members that may get partitions now: in the group, no callback waiting for an answer. */
  private eligible(): M[] {
    return this.active().filter((m) => m.fake.unanswered().length === 0);
  }

  private free(): number[] {
    return [...Array(this.host.partitions).keys()].filter((p) => !this.holder.has(p));
  }

  private anyPending(kind?: 'assign' | 'revoke'): boolean {
    return this.host
      .members()
      .some((m) => m.fake.unanswered().some((c) => kind === undefined || c.kind === kind));
  }

  /** Classic cooperative: the assign round waits for every revoke of the first round. */
  private barrier(): boolean {
    return this.host.protocol === 'cooperative' && this.anyPending('revoke');
  }
}
