import { Observable } from 'rxjs';

/**
 * `source` subscribed inside `runIn` (a tracing context), with `ended` called once when it
 * completes, errors (`{ error }`) or is unsubscribed first (`undefined`, as a completion), and each
 * value shown to `seen` on its way.
 */
export function withEnd<T>(
  source: Observable<T>,
  runIn: <R>(subscribe: () => R) => R,
  ended: (failure: { readonly error: unknown } | undefined) => void,
  seen: (value: T) => void = () => undefined,
): Observable<T> {
  return new Observable<T>((subscriber) => {
    let done = false;
    const end = (failure?: { readonly error: unknown }): void => {
      if (done) return;
      done = true;
      ended(failure);
    };
    const sub = runIn(() =>
      source.subscribe({
        next: (value) => {
          seen(value);
          subscriber.next(value);
        },
        error: (error: unknown) => {
          end({ error });
          subscriber.error(error);
        },
        complete: () => {
          end();
          subscriber.complete();
        },
      }),
    );
    return () => {
      sub.unsubscribe();
      end();
    };
  });
}
