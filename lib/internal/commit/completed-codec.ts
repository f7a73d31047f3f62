/**
 * The compact form of a partition's completed-offset memory: the committed offset it belongs to
 * (`base`) and the offsets above it already finished, as runs.
 *
 * Layout (version 1): `0x01`, varint base, varint run count, then per run varint gap (from the end
 * of the previous run, or from `base`) and varint length. Unsigned LEB128 varints.
 */
export const CODEC_VERSION = 1;

export interface CompletedMemory {
  /** The committed offset this memory belongs to: it only applies while that is the committed offset. */
  readonly base: number;
  /** Finished offsets above `base`, ascending. */
  readonly completed: readonly number[];
}

function writeVarint(out: number[], value: number): void {
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}

function readVarint(buf: Buffer, at: { i: number }): number {
  let result = 0;
  let mul = 1;
  for (;;) {
    if (at.i >= buf.length) throw new RangeError('truncated varint');
    const byte = buf[at.i++] as number;
    result += (byte & 0x7f) * mul;
    if (byte < 0x80) return result;
    mul *= 0x80;
    if (mul > 2 ** 56) throw new RangeError('varint too long');
  }
}

/** Runs of consecutive offsets: `[start, length]`, at most `maxRuns` (the lowest ones kept). */
export function toRuns(sorted: readonly number[], maxRuns: number): [number, number][] {
  const runs: [number, number][] = [];
  for (const o of sorted) {
    const last = runs[runs.length - 1];
    if (last && o === last[0] + last[1]) last[1] += 1;
    else {
      if (runs.length === maxRuns) break;
      runs.push([o, 1]);
    }
  }
  return runs;
}

/** Encodes `completed` (ascending, all above `base`), keeping at most `maxRuns` runs. */
export function encodeCompleted(memory: CompletedMemory, maxRuns: number): Buffer {
  const out: number[] = [CODEC_VERSION];
  writeVarint(out, memory.base);
  const runs = toRuns(memory.completed, maxRuns);
  writeVarint(out, runs.length);
  let previousEnd = memory.base;
  for (const [start, length] of runs) {
    if (start < previousEnd) throw new RangeError(`offset ${start} not above ${previousEnd}`);
    writeVarint(out, start - previousEnd);
    writeVarint(out, length);
    previousEnd = start + length;
  }
  return Buffer.from(out);
}

/** Decodes what {@link encodeCompleted} wrote; throws on anything else. */
export function decodeCompleted(buf: Buffer): CompletedMemory {
  if (buf.length === 0 || buf[0] !== CODEC_VERSION) {
    throw new RangeError(`unknown completed-offsets format version ${String(buf[0])}`);
  }
  const at = { i: 1 };
  const base = readVarint(buf, at);
  const count = readVarint(buf, at);
  const completed: number[] = [];
  let previousEnd = base;
  for (let r = 0; r < count; r++) {
    const start = previousEnd + readVarint(buf, at);
    const length = readVarint(buf, at);
    for (let o = start; o < start + length; o++) completed.push(o);
    previousEnd = start + length;
  }
  if (at.i !== buf.length) throw new RangeError('trailing bytes');
  return { base, completed };
}
