/**
 * Which inputs of `processTransactional()` keep making their transaction fail, and what to do
 * with them. A record the broker refuses after produce() took it (larger than the topic's
 * `max.message.bytes`, a null key on a compacted topic, not authorized) fails its delivery report
 * and the commit: the transaction is aborted and its inputs redone, and redone the same way the
 * record is refused again — without a bound, forever.
 *
 * - A failed delivery names its input (the opaque produce() was given). In a transaction of many
 *   inputs it may also hit innocent records (a whole batch is refused), so a failure there only
 *   makes the input a *suspect*: its redo goes into a transaction of its own.
 * - A failure attributable to the input alone (it was alone in its transaction, or produce()
 *   refused its record locally), for a cause that lies in the record itself
 *   ({@link RECORD_FAULT_CODES}), with the cause of its previous failure makes it *poison*; so
 *   does the {@link MAX_ATTRIBUTED_FAILURES}th such failure, whatever the causes. A transient
 *   cause (a delivery timeout, a broker down, too few in-sync replicas) never does: `skip` would
 *   drop output a later attempt writes. Then the
 *   failure policy applies: `stop` (a TransactionError naming it) or `skip` (its redo counts with
 *   no output).
 * - A skip holds until a transaction carrying it commits: when that transaction is aborted, the
 *   redo is skipped at once (its records are not produced again), and the skip is announced once.
 * - A judgement is this member's for one assignment (the stream's generation, which a seek keeps):
 *   failures of another assignment do not count toward it, and a skip judged in another one is
 *   forgotten (the input is judged afresh).
 * - A suspect whose transaction commits is cleared. At most {@link MAX_TRACKED} inputs are
 *   tracked (the oldest is forgotten: it is redone alone again at worst, never lost).
 */
import type { KafkaClientError } from '../../errors';

/** An input message, as the faults key it. */
export interface InputCoordinates {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
}

/** One record refused by the producer or the broker. */
export interface RecordFailure {
  readonly input: InputCoordinates;
  /** The generation of the input's stream: the assignment the failure happened in. */
  readonly generation: number;
  readonly outputTopic: string;
  readonly error: KafkaClientError;
}

/** What to do with an input that failed its transaction. */
export type FaultVerdict =
  { readonly kind: 'suspect' } | { readonly kind: 'poison'; readonly failures: number };

interface Fault {
  /** The assignment its failures happened in. */
  generation: number;
  cause: number;
  /** Failures attributable to this input alone. */
  attributed: number;
  failures: number;
  /** Poison under `onFailure: 'skip'`: each redo counts with no output, until one commits. */
  skip: boolean;
  /** The skip was reported (log, event, counter). */
  announced: boolean;
  last: RecordFailure;
}

export const MAX_ATTRIBUTED_FAILURES = 3;

/**
 * librdkafka and broker codes that say what is wrong with the record (or with writing it to its
 * topic), so the same record fails the same way when redone.
 */
export const RECORD_FAULT_CODES: ReadonlySet<number> = new Set([
  2, // CORRUPT_MESSAGE
  3, // UNKNOWN_TOPIC_OR_PARTITION (past metadata propagation)
  10, // MESSAGE_TOO_LARGE
  17, // INVALID_TOPIC_EXCEPTION
  18, // RECORD_LIST_TOO_LARGE
  29, // TOPIC_AUTHORIZATION_FAILED
  32, // INVALID_TIMESTAMP
  87, // INVALID_RECORD (a null key on a compacted topic…)
  -154, // local: invalid type
  -186, // local: invalid argument
  -188, // local: unknown topic
  -190, // local: unknown partition
]);
export const MAX_TRACKED = 1000;

export const inputKey = (i: InputCoordinates): string => `${i.topic}[${i.partition}]@${i.offset}`;

export class InputFaults {
  private readonly faults = new Map<string, Fault>();

  /** Records a failure of `f.input`; `attributable`: nothing else could have caused it. */
  fail(f: RecordFailure, attributable: boolean): FaultVerdict {
    const key = inputKey(f.input);
    const seen = this.faults.get(key);
    const cause = f.error.kafkaCode;
    if (seen === undefined || seen.generation !== f.generation) {
      this.faults.delete(key); // another assignment's: judged afresh
      this.faults.set(key, {
        generation: f.generation,
        cause,
        attributed: attributable && RECORD_FAULT_CODES.has(cause) ? 1 : 0,
        failures: 1,
        skip: false,
        announced: false,
        last: f,
      });
      while (this.faults.size > MAX_TRACKED) {
        this.faults.delete(this.faults.keys().next().value as string);
      }
      return { kind: 'suspect' };
    }
    const again = seen.cause === cause;
    seen.failures += 1;
    seen.cause = cause;
    seen.last = f;
    if (!attributable || !RECORD_FAULT_CODES.has(cause)) return { kind: 'suspect' };
    seen.attributed += 1;
    return again || seen.attributed >= MAX_ATTRIBUTED_FAILURES
      ? { kind: 'poison', failures: seen.failures }
      : { kind: 'suspect' };
  }

  /**
   * Whether `input` failed a transaction before: its redo goes alone. Not one to be skipped: it
   * writes no record.
   */
  suspect(input: InputCoordinates): boolean {
    const f = this.faults.get(inputKey(input));
    return f !== undefined && !f.skip;
  }

  /** Marks a poison input to count with no output when it is redone (`onFailure: 'skip'`). */
  skip(input: InputCoordinates): void {
    const f = this.faults.get(inputKey(input));
    if (f !== undefined) f.skip = true;
  }

  /**
   * When `input`, redone in the assignment `generation`, is to be skipped: the failure that made
   * it poison, and `first` the first time it is asked (the skip is announced then, once); else
   * undefined. The skip holds until a transaction carrying the input commits ({@link clear}): a
   * redo after an abort is skipped at once. One judged in another assignment is forgotten.
   */
  skipped(
    input: InputCoordinates,
    generation: number,
  ): (RecordFailure & { failures: number; first: boolean }) | undefined {
    const key = inputKey(input);
    const f = this.faults.get(key);
    if (f?.skip !== true) return undefined;
    if (f.generation !== generation) {
      this.faults.delete(key);
      return undefined;
    }
    const first = !f.announced;
    f.announced = true;
    return { ...f.last, failures: f.failures, first };
  }

  /** A transaction carrying `input` committed: it is no suspect (nor skipped) any more. */
  clear(input: InputCoordinates): void {
    this.faults.delete(inputKey(input));
  }

  get size(): number {
    return this.faults.size;
  }
}
