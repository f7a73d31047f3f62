/**
 * Handler instrumentation: each invocation of a user's handler timed, watched for stalls (logged
 * and published when it runs longer than `stallThresholdMs`) and published on the handler
 * diagnostics channels. Kept apart from the counters and snapshots in observability.ts because it
 * runs on every message: its costs per invocation are stated and kept small here.
 */
import { Observable, isObservable } from 'rxjs';
import type { Logger } from '../../logger';
import type { ConsumerSettings } from '../../config';
import { channels, publish } from '../../diagnostics';
import type { HandlerDiagnostics } from '../../diagnostics';
import type { HandlerResult, KafkaMessage } from '../../types';
import { RunningHandler, StallDetector } from './stall-detector';

/** The least a message must carry for a handler to be instrumented. */
export type HandledMessage = Pick<KafkaMessage, 'topic' | 'partition' | 'offset'> & {
  readonly generation?: number;
};

/** What the instrumentation tells the consumer's counters. */
export interface InstrumentationHost {
  /** An invocation ended, ok or failed (a cancelled one is not counted). */
  ended(topic: string, partition: number, ms: number, ok: boolean): void;
  /** A handler of this partition has run longer than `stallThresholdMs`. */
  stalled(topic: string, partition: number): void;
}

export class HandlerInstrumentation {
  /** Handlers running now, oldest first; the stalled ones among them. */
  readonly stalls: StallDetector;

  constructor(
    private readonly settings: ConsumerSettings,
    private readonly clientId: string | undefined,
    private readonly logger: Logger,
    private readonly host: InstrumentationHost,
  ) {
    this.stalls = new StallDetector(settings.stallThresholdMs, {
      stalled: (h, elapsedMs) => this.onStalled(h, elapsedMs),
      completed: (h, elapsedMs) => this.onStallCompleted(h, elapsedMs),
    });
  }

  /**
   * Wraps a handler so each invocation is counted, timed, watched for stalls and published on the
   * handler diagnostics channels. The wrapper returns what the handler returns (a Promise gains a
   * `then`, an Observable is subscribed through).
   *
   * Per invocation: one clock read at the start and one at the end, a histogram observation
   * without allocation. A handler that returns a plain value (or throws) allocates nothing here:
   * it cannot be seen stalling while it runs (the sweep is a timer, and the event loop is busy),
   * so only one that returns a Promise or an Observable gets a {@link HandlerCall}, the stall
   * detector's list node and the invocation's state, no closure. Diagnostics payloads are built
   * only while a handler channel has subscribers, observations only while a listener is
   * registered.
   */
  instrument<M extends HandledMessage, R>(
    handler: (message: M) => HandlerResult<R>,
  ): (message: M) => HandlerResult<R> {
    return (message: M): HandlerResult<R> => {
      const startedAt = this.stalls.clock();
      const diag =
        channels.handlerStart.hasSubscribers || channels.handlerEnd.hasSubscribers
          ? this.startDiagnostics(message)
          : undefined;
      let result: HandlerResult<R>;
      try {
        result = handler(message);
      } catch (err) {
        this.endedNow(message, startedAt, diag, 'failed', err);
        throw err;
      }
      if (result === null || (typeof result !== 'object' && typeof result !== 'function')) {
        this.endedNow(message, startedAt, diag, 'ok', undefined);
        return result;
      }
      const observable = isObservable(result);
      if (!observable && typeof (result as Promise<R>).then !== 'function') {
        this.endedNow(message, startedAt, diag, 'ok', undefined);
        return result;
      }
      const call = new HandlerCall(message, startedAt);
      call.diag = diag;
      this.stalls.track(call);
      return observable
        ? this.observeThrough(call, result as Observable<R>)
        : this.endWhenSettled(call, result as Promise<R>);
    };
  }

  /** An invocation that ended before its handler returned (a plain value, or a throw). */
  private endedNow(
    message: HandledMessage,
    startedAt: number,
    diag: HandlerDiagnostics | undefined,
    outcome: 'ok' | 'failed',
    error: unknown,
  ): void {
    const ms = this.stalls.clock() - startedAt;
    this.host.ended(message.topic, message.partition, ms, outcome === 'ok');
    if (diag !== undefined) this.publishEnd(diag, outcome, ms, error);
  }

  /**
   * Ends a call when its Promise settles. A method of its own: closures over `call` inside the
   * wrapper above would make V8 allocate a context at every invocation, plain results included.
   */
  private endWhenSettled<R>(call: HandlerCall, promise: Promise<R>): Promise<R> {
    // A bare thenable's then() may return nothing: adopt it into a Promise first.
    const settled = promise instanceof Promise ? promise : Promise.resolve(promise);
    return settled.then(
      (v) => {
        this.ended(call, 'ok', undefined);
        return v;
      },
      (e: unknown) => {
        this.ended(call, 'failed', e);
        throw e;
      },
    );
  }

  private observeThrough<R>(call: HandlerCall, source: Observable<R>): Observable<R> {
    return new Observable<R>((subscriber) => {
      const sub = source.subscribe({
        next: (v) => subscriber.next(v),
        error: (e: unknown) => {
          this.ended(call, 'failed', e);
          subscriber.error(e);
        },
        complete: () => {
          this.ended(call, 'ok', undefined);
          subscriber.complete();
        },
      });
      return () => {
        sub.unsubscribe();
        this.ended(call, 'cancelled', undefined);
      };
    });
  }

  /** The handler start payload (published now on its channel if it has subscribers). */
  private startDiagnostics(message: HandledMessage): HandlerDiagnostics {
    const diag: HandlerDiagnostics = {
      group: this.settings.groupId,
      clientId: this.clientId,
      topic: message.topic,
      partition: message.partition,
      offset: message.offset,
      generation: message.generation,
      message: message as unknown as KafkaMessage,
      startedAt: Date.now(),
      outcome: undefined,
      durationMs: undefined,
      error: undefined,
    };
    if (channels.handlerStart.hasSubscribers) channels.handlerStart.publish(diag);
    return diag;
  }

  /** One invocation ended (the first report counts; later ones, e.g. a teardown, are ignored). */
  private ended(call: HandlerCall, outcome: 'ok' | 'failed' | 'cancelled', error: unknown): void {
    if (call.ended) return;
    call.ended = true;
    const ms = this.stalls.clock() - call.startedAt;
    this.stalls.end(call);
    if (outcome !== 'cancelled') this.host.ended(call.topic, call.partition, ms, outcome === 'ok');
    if (call.diag !== undefined) this.publishEnd(call.diag, outcome, ms, error);
  }

  private publishEnd(
    diag: HandlerDiagnostics,
    outcome: 'ok' | 'failed' | 'cancelled',
    ms: number,
    error: unknown,
  ): void {
    diag.outcome = outcome;
    diag.durationMs = ms;
    diag.error = error;
    if (channels.handlerEnd.hasSubscribers) channels.handlerEnd.publish(diag);
  }

  private onStalled(h: RunningHandler, elapsedMs: number): void {
    this.host.stalled(h.topic, h.partition);
    this.logger
      .child({ topic: h.topic, partition: h.partition, generation: h.generation })
      .warn(
        { offset: h.offset, elapsedMs, stallThresholdMs: this.stalls.thresholdMs },
        "handler stalled: running longer than stallThresholdMs; it holds back its partition's commits, and a revoke waits for it up to drainTimeoutMs before the next owner processes the message again (duplicates)",
      );
    this.publishStall('stalled', h, elapsedMs);
  }

  private onStallCompleted(h: RunningHandler, elapsedMs: number): void {
    this.logger
      .child({ topic: h.topic, partition: h.partition, generation: h.generation })
      .info({ offset: h.offset, elapsedMs }, 'stalled handler completed');
    this.publishStall('completed', h, elapsedMs);
  }

  private publishStall(phase: 'stalled' | 'completed', h: RunningHandler, elapsedMs: number): void {
    publish(channels.handlerStall, () => ({
      group: this.settings.groupId,
      clientId: this.clientId,
      phase,
      topic: h.topic,
      partition: h.partition,
      offset: h.offset,
      generation: h.generation,
      elapsedMs,
      thresholdMs: this.stalls.thresholdMs,
    }));
  }
}

/**
 * One handler invocation: the stall detector's record of it (start-ordered list node) and what its
 * end needs, in one object of fixed shape.
 */
class HandlerCall extends RunningHandler {
  ended = false;
  /** The diagnostics payload, when a handler channel had subscribers at the start. */
  diag: HandlerDiagnostics | undefined = undefined;

  constructor(message: HandledMessage, startedAt: number) {
    super(message.topic, message.partition, message.offset, message.generation, startedAt);
  }
}
