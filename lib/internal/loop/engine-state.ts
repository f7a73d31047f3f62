/**
 * The engine's lifecycle; each state carries what is true only in it. While `closing`, the
 * {@link Shutdown} says how far the close got (`closing`: the loop still polls, so revokes and
 * commits are served; `disconnecting`: the loop stopped, only unassign works,
 * docs/binding-behaviours.md, "Closing") and by when each step must be done.
 */
export type EngineState =
  | { readonly kind: 'idle' }
  | { readonly kind: 'connecting' }
  | { readonly kind: 'running'; readonly since: number; readonly loop: Promise<void> }
  | {
      readonly kind: 'closing';
      readonly since: number;
      /** Why the consumer ends, when it ends with an error. */
      failure: Error | undefined;
      readonly loop: Promise<void> | undefined;
      readonly runningSince: number;
    }
  | { readonly kind: 'closed'; readonly failure: Error | undefined };
