import type { KafkaMessage } from '../../types';
import type { Message } from './rdkafka';

const NO_HEADERS: ReadonlyArray<readonly [string, Buffer]> = Object.freeze([]);

/** node-rdkafka gives headers as a list of one-key objects; keep their order and duplicates. */
function toHeaders(raw: Message['headers']): ReadonlyArray<readonly [string, Buffer]> {
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

/** Converts a node-rdkafka message into the library's message, tagged with its assignment. */
export function toKafkaMessage(m: Message, generation: number, signal: AbortSignal): KafkaMessage {
  const key =
    m.key === undefined || m.key === null
      ? null
      : Buffer.isBuffer(m.key)
        ? m.key
        : Buffer.from(String(m.key));
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
