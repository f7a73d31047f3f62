/**
 * A deterministic fake of the node-rdkafka Producer subset the dead-letter writer uses: produce()
 * records the record, and its delivery report (success, or the error `deliveryResult` decides)
 * arrives asynchronously — only while a poll interval is set, as with the real binding.
 */
import { EventEmitter } from 'node:events';

export interface ProducedRecord {
  topic: string;
  value: Buffer | null;
  key: Buffer | string | undefined;
  headers: Record<string, string | Buffer>[];
}

export interface FakeProducerOptions {
  /** A librdkafka error code for the delivery report of each record, or undefined for success. */
  deliveryResult?: (record: ProducedRecord) => number | undefined;
  connectError?: string;
}

export class FakeProducer extends EventEmitter {
  readonly records: ProducedRecord[] = [];
  readonly calls: string[] = [];
  private polling: NodeJS.Timeout | undefined;
  private queue: { record: ProducedRecord; opaque: unknown }[] = [];
  private connected = false;

  constructor(
    readonly config: Record<string, unknown>,
    private readonly options: FakeProducerOptions = {},
  ) {
    super();
  }

  connect(_opts: unknown, cb: (err: Error | null) => void): this {
    this.calls.push('connect');
    setImmediate(() => {
      if (this.options.connectError) cb(new Error(this.options.connectError));
      else {
        this.connected = true;
        cb(null);
      }
    });
    return this;
  }

  isConnected(): boolean {
    return this.connected;
  }

  setPollInterval(ms: number): this {
    if (this.polling) clearInterval(this.polling);
    this.polling = ms > 0 ? setInterval(() => this.poll(), ms) : undefined;
    return this;
  }

  produce(
    topic: string,
    _partition: number | null,
    value: Buffer | null,
    key: Buffer | string | undefined,
    _timestamp: number | null,
    opaque: unknown,
    headers: Record<string, string | Buffer>[],
  ): boolean {
    if (!this.connected) throw new Error('Producer not connected');
    const record = { topic, value, key, headers };
    this.calls.push(`produce(${topic})`);
    this.queue.push({ record, opaque });
    return true;
  }

  private poll(): void {
    for (const { record, opaque } of this.queue.splice(0)) {
      const code = this.options.deliveryResult?.(record);
      if (code === undefined) {
        this.records.push(record);
        this.emit('delivery-report', null, { topic: record.topic, opaque });
      } else {
        const err = Object.assign(new Error(`delivery failed ${code}`), { code });
        this.emit('delivery-report', err, { topic: record.topic, opaque });
      }
    }
  }

  flush(_timeout: number, cb: (err?: Error) => void): this {
    this.calls.push('flush');
    this.poll();
    setImmediate(() => cb());
    return this;
  }

  disconnect(cb?: () => void): this {
    this.calls.push('disconnect');
    this.setPollInterval(0);
    this.connected = false;
    setImmediate(() => cb?.());
    return this;
  }
}

/** Builds a producer factory that records the fake it creates. */
export function fakeProducerFactory(options: FakeProducerOptions = {}): {
  factory: (g: Record<string, unknown>) => never;
  producer: () => FakeProducer;
} {
  let created: FakeProducer | undefined;
  return {
    factory: (g) => {
      created = new FakeProducer(g, options);
      return created as never;
    },
    producer: () => {
      if (!created) throw new Error('no producer created yet');
      return created;
    },
  };
}
