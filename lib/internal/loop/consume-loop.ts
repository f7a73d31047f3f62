/**
 * The consume loop: one `consume(n)` in flight at a time, its batch dispatched to the partition
 * streams, the periodic commit and librdkafka's positions between two calls.
 *
 * While batches come full, the next call is made as soon as a batch arrives, before it is
 * dispatched, so that the binding's worker fetches (and, on the companion binding, converts) the
 * next batch while the main thread runs this one's handlers: the two overlap instead of
 * alternating. A batch is dispatched before the call after it (no call in flight meanwhile) when
 * something needs that: a seek or a rewind waiting to be applied (seeks.ts, flow-control.ts),
 * librdkafka's positions due for the ledgers (positions.ts: a call in flight counts messages not
 * handed out yet), a short or empty batch, or the loop about to stop.
 */
import type { EngineObserver } from '../observe/engine-observer';
import type { Message } from '../binding/rdkafka';
import { toKafkaError } from '../binding/rdkafka';
import type { BaseParts, RebalanceUnits } from './engine-parts';

/** What the loop needs of the engine that runs it. */
export interface LoopHost {
  /** Whether the loop goes on (running, or closing while partitions are released). */
  polling(): boolean;
  /** Whether a close is under way (an idle call then waits briefly). */
  closing(): boolean;
  /** A consume call returned at `at`; `progressed` when it brought messages. */
  polled(at: number, progressed: boolean): void;
  observer(): EngineObserver;
  failWith(err: Error): void;
}

export async function consumeLoop(
  base: BaseParts,
  units: RebalanceUnits,
  host: LoopHost,
): Promise<void> {
  const { seeks, rebalance, commits } = units;
  const { client, flow, cadence, dispatcher, positions, assignments, shutdown } = base;
  /** The call in flight: its answer, and how many messages it asked for. */
  let next: { batch: Promise<Message[]>; asked: number } | undefined;
  const call = (): { batch: Promise<Message[]>; asked: number } => {
    const { size, timeoutMs } = cadence.next(
      rebalance.busy || client.awaitingPoll || host.closing(),
    );
    return { batch: client.consume(size, timeoutMs), asked: size };
  };
  try {
    while (host.polling()) {
      if (next === undefined) {
        if (seeks.waiting) await seeks.apply();
        if (flow.rewindsWaiting) await flow.applyRewinds();
        next = call();
      }
      const { batch: answer, asked } = next;
      next = undefined;
      let batch: Message[];
      try {
        batch = await answer;
      } catch (err) {
        host.failWith(toKafkaError(err, 'consume failed'));
        return;
      }
      const polledAt = Date.now();
      host.polled(polledAt, batch.length > 0);
      cadence.record(batch.length);
      const short = batch.length < asked;
      // The loop goes on after a full batch (nothing below awaits), so a call made here is awaited.
      if (
        !short &&
        host.polling() &&
        shutdown.stage !== 'disconnecting' &&
        !seeks.waiting &&
        !flow.rewindsWaiting &&
        !positions.due(polledAt, false)
      )
        next = call();
      if (batch.length > 0) dispatcher.dispatch(batch, host.observer());
      if (shutdown.stage !== 'disconnecting') {
        // After a failed call librdkafka's position may count messages never handed out.
        if (next === undefined && !client.lastConsumeFailed) positions.note(polledAt, short);
        commits.maybeCommit(assignments.values(), (c) => assignments.owns(c));
      }
      if (batch.length === 0) await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    // The close disconnects once the loop ended, and a disconnect under a consume call crashes the
    // binding: a call still in flight (the loop stopped after a full batch, or its dispatch threw)
    // is awaited, its messages dropped (none handed out, none committed).
    if (next !== undefined) await next.batch.catch(() => undefined);
  }
}
