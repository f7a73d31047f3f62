/**
 * What a `processTransactional()` handler returns, checked: an array of output records (or a
 * Promise or Observable of them); anything else fails the message with a TypeError, before any of
 * it reaches the producer.
 */
import { isObservable, map, toArray } from 'rxjs';
import type { Observable } from 'rxjs';
import type { OutputRecord, TransactionalHandler } from '../../transactional-options';
import { isPromiseLike } from '../process/decoding';

/** Checks what a transactional handler returned: an array of records (a throw fails the message). */
export function checkRecords(value: unknown): readonly OutputRecord[] {
  if (!Array.isArray(value)) {
    throw new TypeError(
      `processTransactional(): the handler must return an array of records { topic, value, key?, headers?, partition? }, got ${typeof value}`,
    );
  }
  for (const r of value as unknown[]) {
    const rec = r as Partial<OutputRecord> | null;
    if (
      typeof rec !== 'object' ||
      rec === null ||
      typeof rec.topic !== 'string' ||
      rec.topic === '' ||
      !(rec.value === null || typeof rec.value === 'string' || Buffer.isBuffer(rec.value)) ||
      (rec.partition !== undefined && (!Number.isInteger(rec.partition) || rec.partition < 0)) ||
      !(
        rec.key === undefined ||
        rec.key === null ||
        typeof rec.key === 'string' ||
        Buffer.isBuffer(rec.key)
      ) ||
      !(
        rec.headers === undefined ||
        (Array.isArray(rec.headers) &&
          (rec.headers as unknown[]).every(
            (h) =>
              Array.isArray(h) &&
              h.length === 2 &&
              typeof h[0] === 'string' &&
              (typeof h[1] === 'string' || Buffer.isBuffer(h[1])),
          ))
      )
    ) {
      throw new TypeError(
        'processTransactional(): each record needs a `topic` (string) and a `value` (Buffer, string or null); `key`, when set, a Buffer, string or null; `headers`, when set, `[name, Buffer | string]` pairs; `partition`, when set, an integer ≥ 0',
      );
    }
  }
  return value as readonly OutputRecord[];
}

/** A transactional handler's result as the processor runs it: a checked array of records. */
export function recordsOf(
  result: ReturnType<TransactionalHandler<never, never>>,
):
  readonly OutputRecord[] | Promise<readonly OutputRecord[]> | Observable<readonly OutputRecord[]> {
  if (isObservable(result)) {
    return result.pipe(
      toArray(),
      map((parts) =>
        checkRecords(parts.flatMap((p) => (Array.isArray(p) ? p : [p]) as OutputRecord[])),
      ),
    );
  }
  if (isPromiseLike(result)) return Promise.resolve(result).then(checkRecords);
  return checkRecords(result);
}
