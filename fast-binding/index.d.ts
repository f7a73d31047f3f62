// node-rdkafka's typings (the build's own copy), and what reactive-rdkafka's `binding` option reads
// to name the module.
export * from './dist/node-rdkafka/index';

declare module './dist/node-rdkafka/index' {
  interface KafkaConsumer {
    /**
     * Values, keys and header values as copies of their own (false, the default) or as views of
     * shared buffers: one per partition and batch (true: a kept view pins its partition's messages
     * of that batch), or buffers of at most that many bytes (a whole number: a kept view pins at
     * most that much beside its own bytes). Shared buffers are untransferable.
     */
    setBatchBufferSharing(shared: boolean | number): this;
  }
  namespace KafkaConsumer {
    /** setBatchBufferSharing() takes a byte bound (0.2.0 and later). */
    const batchBufferBounds: true;
  }
}

export declare const name: string;
export declare const version: string;
/** consume(n) converts its batch natively, off the main thread. */
export declare const batchConversion: true;
/** librdkafka's rd_kafka_err2str. */
export declare function err2str(code: number): string;
