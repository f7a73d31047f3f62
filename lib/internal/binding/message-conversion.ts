import type { KafkaMessage } from '../../types';
import type { Message } from './rdkafka';

const NO_HEADERS: ReadonlyArray<readonly [string, Buffer]> = Object.freeze([]);

/** node-rdkafka gives headers as a list of one-key objects; keep their order and duplicates. */
export function toHeaders(raw: Message['headers']): ReadonlyArray<readonly [string, Buffer]> {
  if (!raw || raw.length === 0) return NO_HEADERS;
  const out: [string, Buffer][] = [];
  for (const h of raw) {
    for (const k in h) {
      const v = h[k];
      out.push([k, Buffer.isBuffer(v) ? v : Buffer.from(String(v ?? ''))]);
    }
  }
  return out;
}

/** A node-rdkafka message's key as the library gives it: a Buffer, or null when it has none. */
export function toKey(raw: Message['key']): Buffer | null {
  if (raw === undefined || raw === null) return null;
  return Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw));
}

/** Converts a node-rdkafka message into the library's message, tagged with its assignment. */
export function toKafkaMessage(m: Message, generation: number, signal: AbortSignal): KafkaMessage {
  const key = toKey(m.key);
  return {
    topic: m.topic,
    partition: m.partition,
    offset: m.offset,
    key,
    value: m.value ?? null,
    headers: toHeaders(m.headers),
    timestamp: m.timestamp,
    size: m.size ?? m.value?.length ?? 0,
    generation,
    signal,
  };
}
