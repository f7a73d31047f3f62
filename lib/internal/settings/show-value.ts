/**
 * A value as a {@link ConfigError}'s message shows it. Never throws, whatever the value: a BigInt
 * (`10n`), a Symbol (`Symbol(x)`), a cyclic object (`[object with a cycle]`), an object whose
 * `toJSON`, getter or `toString` throws, an object without a prototype, a Proxy.
 */

/** The longest a shown value gets (then cut, with `…`). */
const MAX_SHOWN = 200;
/** Wraps a shown value that JSON would put in quotes (a BigInt, a Symbol, a function). */
const MARK = '\u0001';
const MARKED = /"\\u0001((?:[^"\\]|\\.)*?)\\u0001"/g;

/** `value` as an error message shows it; never throws. */
export function showValue(value: unknown): string {
  let shown: string;
  try {
    shown = show(value);
  } catch {
    shown = opaque(value);
  }
  return shown.length > MAX_SHOWN ? `${shown.slice(0, MAX_SHOWN)}…` : shown;
}

/** The message of a thrown value (a user's getter, a Proxy trap); never throws. */
export function showError(err: unknown): string {
  try {
    if (err instanceof Error) return String(err.message);
  } catch {
    // An Error subclass with a throwing message getter: shown as a value below.
  }
  return showValue(err);
}

function show(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'undefined';
    case 'bigint':
      return `${value}n`;
    case 'symbol':
      return value.toString();
    case 'function':
      return 'a function';
    case 'number':
    case 'boolean':
      return String(value);
    case 'string':
      return JSON.stringify(value);
    default:
      break;
  }
  if (value === null) return 'null';
  // A boxed primitive (`new Number(8192)`) is an object, not the number JSON would show.
  if (value instanceof Number || value instanceof String || value instanceof Boolean)
    return `a ${Object.prototype.toString.call(value).slice(8, -1)} object (${JSON.stringify(value.valueOf())})`;
  let cycle = false;
  // The objects on the path from the root to the value being serialised.
  const path: unknown[] = [];
  const json = JSON.stringify(value, function (this: unknown, _key: string, v: unknown) {
    while (path.length > 0 && path[path.length - 1] !== this) path.pop();
    if (typeof v === 'bigint') return `${MARK}${v}n${MARK}`;
    if (typeof v === 'symbol') return `${MARK}${v.toString()}${MARK}`;
    if (typeof v === 'function') return `${MARK}[function]${MARK}`;
    if (typeof v === 'object' && v !== null) {
      if (path.includes(v)) {
        cycle = true;
        return undefined;
      }
      path.push(v);
    }
    return v;
  });
  if (cycle) return '[object with a cycle]';
  if (json === undefined) return opaque(value);
  return json.replace(MARKED, (marked) => (JSON.parse(marked) as string).slice(1, -1));
}

/** What an object that cannot be serialised shows: its tag (`[object Object]`), if even that can be read. */
function opaque(value: unknown): string {
  try {
    return `${Object.prototype.toString.call(value)} (not serialisable)`;
  } catch {
    return 'an object that cannot be shown';
  }
}
