/**
 * The option names each options type takes, and the check that refuses any other: a misspelt name
 * (`comitIntervalMs`) is a {@link ConfigError} naming the closest known one, or the call that takes
 * it (`maxSize` given to `process()`), instead of being silently ignored.
 *
 * Each list is checked by the compiler against its type (`satisfies Record<keyof T, true>`): an
 * option added to a type and not to its list, or a name listed that the type lacks, fails the type
 * check. librdkafka's own settings (`config`, `topicConfig`, `producerConfig`) are not checked by
 * name here: librdkafka refuses unknown ones itself (see librdkafka-settings.ts).
 */
import type { ReactiveConsumerOptions } from '../../config';
import { ConfigError } from '../../errors';
import type { TransactionalOptions } from '../../transactional-options';
import type {
  BatchProcessOptions,
  DeadLetterOptions,
  ProcessOptions,
  RetryOptions,
} from '../../types';
import { showError } from './show-value';

/** The names of {@link ReactiveConsumerOptions}. */
export const CONSUMER_OPTION_NAMES = {
  config: true,
  topicConfig: true,
  topics: true,
  logger: true,
  stallThresholdMs: true,
  metricsIntervalMs: true,
  drainTimeoutMs: true,
  commitIntervalMs: true,
  commitTimeoutMs: true,
  lateCommitWindowMs: true,
  closeTimeoutMs: true,
  signal: true,
  tracing: true,
  connectTimeoutMs: true,
  consumeBatchSize: true,
  consumeTimeoutMs: true,
  maxBufferedMessages: true,
  maxBufferedBytes: true,
  maxBufferedBytesTotal: true,
  resumeThreshold: true,
  onAssign: true,
  onRevoke: true,
  rememberCompleted: true,
  oauthBearerToken: true,
  binding: true,
  sharedBatchBuffers: true,
} as const satisfies Record<keyof ReactiveConsumerOptions, true>;

/** The names of `rememberCompleted`'s object form. */
export const REMEMBER_COMPLETED_OPTION_NAMES = {
  topic: true,
  maxRuns: true,
} as const satisfies Record<
  keyof Exclude<ReactiveConsumerOptions['rememberCompleted'], boolean | undefined>,
  true
>;

/** The names of {@link ProcessOptions}. */
export const PROCESS_OPTION_NAMES = {
  concurrency: true,
  partitionConcurrency: true,
  ordering: true,
  key: true,
  value: true,
  retry: true,
  onFailure: true,
  deadLetter: true,
} as const satisfies Record<keyof ProcessOptions, true>;

/** The names {@link BatchProcessOptions} adds to {@link ProcessOptions}. */
export const BATCH_OPTION_NAMES = {
  maxSize: true,
  maxWaitMs: true,
} as const satisfies Record<Exclude<keyof BatchProcessOptions, keyof ProcessOptions>, true>;

/** The names of {@link RetryOptions}. */
export const RETRY_OPTION_NAMES = {
  count: true,
  initialDelayMs: true,
  maxDelayMs: true,
  factor: true,
  jitter: true,
  when: true,
} as const satisfies Record<keyof RetryOptions, true>;

/** The names of {@link DeadLetterOptions}. */
export const DEAD_LETTER_OPTION_NAMES = {
  topic: true,
  producerConfig: true,
} as const satisfies Record<keyof DeadLetterOptions, true>;

/** The names of {@link TransactionalOptions}. */
export const TRANSACTIONAL_OPTION_NAMES = {
  concurrency: true,
  partitionConcurrency: true,
  ordering: true,
  key: true,
  value: true,
  retry: true,
  onFailure: true,
  producerConfig: true,
  transactionalId: true,
  transactionalIdPrefix: true,
  instanceId: true,
  maxMessages: true,
  maxMs: true,
  binding: true,
} as const satisfies Record<keyof TransactionalOptions, true>;

type Names = Readonly<Record<string, true>>;

/** The calls that take options, and the names each takes. */
const CALLS: readonly { readonly call: string; readonly names: Names }[] = [
  { call: 'the ReactiveConsumer constructor', names: CONSUMER_OPTION_NAMES },
  { call: 'process()', names: PROCESS_OPTION_NAMES },
  { call: 'processBatch()', names: { ...PROCESS_OPTION_NAMES, ...BATCH_OPTION_NAMES } },
  { call: 'processTransactional()', names: TRANSACTIONAL_OPTION_NAMES },
];

/** One options object: the names it takes and how a refusal describes it. */
export interface OptionScope {
  /** The object's dotted path (`retry`), or '' for a call's options. */
  readonly path: string;
  /** What the message calls it: `the ReactiveConsumer options`, `\`retry\``. */
  readonly label: string;
  readonly names: Names;
  /** The calls these are the options of (the other calls' names get a hint; none: nested). */
  readonly calls?: readonly string[];
  /** Where librdkafka settings belong, for a name that looks like one (`group.id`). */
  readonly librdkafka?: string;
}

export const CONSUMER_SCOPE: OptionScope = {
  path: '',
  label: 'the ReactiveConsumer options',
  names: CONSUMER_OPTION_NAMES,
  calls: ['the ReactiveConsumer constructor'],
  librdkafka: 'librdkafka settings go in `config` (topic settings may also go in `topicConfig`)',
};

export const PROCESS_SCOPE: OptionScope = {
  path: '',
  label: 'the options of process() or processBatch()',
  names: PROCESS_OPTION_NAMES,
  // processBatch() takes its own options (maxSize, maxWaitMs) off first: the rest is checked here.
  calls: ['process()'],
  librdkafka:
    "the dead-letter producer's librdkafka settings go in `deadLetter.producerConfig`; the consumer's in the constructor's `config`",
};

export const TRANSACTIONAL_SCOPE: OptionScope = {
  path: '',
  label: 'the processTransactional() options',
  names: TRANSACTIONAL_OPTION_NAMES,
  calls: ['processTransactional()'],
  librdkafka:
    "the transactional producer's librdkafka settings go in `producerConfig`; the consumer's in the constructor's `config`",
};

export const RETRY_SCOPE: OptionScope = {
  path: 'retry',
  label: '`retry`',
  names: RETRY_OPTION_NAMES,
};

export const DEAD_LETTER_SCOPE: OptionScope = {
  path: 'deadLetter',
  label: '`deadLetter`',
  names: DEAD_LETTER_OPTION_NAMES,
};

export const REMEMBER_COMPLETED_SCOPE: OptionScope = {
  path: 'rememberCompleted',
  label: '`rememberCompleted`',
  names: REMEMBER_COMPLETED_OPTION_NAMES,
};

const dotted = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);

/**
 * The own enumerable string-keyed properties of `value`, copied once into a plain object, so that
 * a getter runs once and a throwing one (or a throwing Proxy trap) is a {@link ConfigError} naming
 * the property, like every other bad value.
 */
export function readOwn(value: object, path: string): Record<string, unknown> {
  let keys: string[];
  try {
    keys = Object.keys(value);
  } catch (err) {
    throw new ConfigError(
      `Could not read the properties of \`${path || 'options'}\`: ${showError(err)}`,
      path || 'options',
      { cause: err },
    );
  }
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    let v: unknown;
    try {
      v = (value as Record<string, unknown>)[key];
    } catch (err) {
      const at = dotted(path, key);
      throw new ConfigError(`Reading \`${at}\` threw: ${showError(err)}`, at, { cause: err });
    }
    Object.defineProperty(out, key, {
      value: v,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/**
 * `value`'s options, read once ({@link readOwn}), after checking that it has no name `scope`
 * does not take: an unknown one is a {@link ConfigError} whose `key` is its dotted path, naming
 * the closest known name (or the call that takes it).
 */
export function checkedOptions(value: object, scope: OptionScope): Record<string, unknown> {
  let keys: string[];
  try {
    keys = Object.keys(value);
  } catch {
    keys = [];
  }
  const unknown = keys.filter((key) => !Object.hasOwn(scope.names, key));
  if (unknown.length > 0) throw unknownOption(unknown, scope);
  return readOwn(value, scope.path);
}

function unknownOption(unknown: readonly string[], scope: OptionScope): ConfigError {
  const [name, ...others] = unknown as [string, ...string[]];
  const key = dotted(scope.path, name);
  const also =
    others.length > 0 ? ` (also unknown: ${others.map((o) => `\`${o}\``).join(', ')})` : '';
  return new ConfigError(
    `Unknown option \`${key}\` in ${scope.label}: ${advice(name, scope)}${also}`,
    key,
  );
}

/** What to tell the user about an unknown name. */
function advice(name: string, scope: OptionScope): string {
  const others = CALLS.filter(
    ({ call }) => scope.calls !== undefined && !scope.calls.includes(call),
  );
  const callsTaking = (n: string): string =>
    joinCalls(others.filter(({ names }) => Object.hasOwn(names, n)).map(({ call }) => call));
  if (others.some(({ names }) => Object.hasOwn(names, name))) {
    return `\`${name}\` is an option of ${callsTaking(name)}`;
  }
  const own = closestName(name, Object.keys(scope.names));
  if (own !== undefined) return `did you mean \`${own}\`?`;
  if (scope.librdkafka !== undefined && name.includes('.')) return scope.librdkafka;
  const elsewhere = closestName(name, [
    ...new Set(others.flatMap(({ names }) => Object.keys(names))),
  ]);
  if (elsewhere !== undefined) {
    return `did you mean \`${elsewhere}\` (an option of ${callsTaking(elsewhere)})?`;
  }
  return `the known names are ${Object.keys(scope.names)
    .map((n) => `\`${n}\``)
    .join(', ')}`;
}

function joinCalls(calls: readonly string[]): string {
  if (calls.length <= 1) return calls.join('');
  return `${calls.slice(0, -1).join(', ')} and ${calls[calls.length - 1]}`;
}

/**
 * The candidate closest to `name` (case-insensitive edit distance, a swap of two neighbouring
 * characters counting as one edit), if one is close enough to be the name meant: at most 40% of
 * the name's length changed. Ties go to the first candidate.
 */
export function closestName(name: string, candidates: readonly string[]): string | undefined {
  const wanted = name.toLowerCase();
  const limit = Math.max(1, Math.round(wanted.length * 0.4));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = editDistance(wanted, candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return bestDistance <= limit ? best : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const prev = rows[i - 1]!;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      }
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}
