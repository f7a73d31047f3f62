// node-rdkafka's typings (the build's own copy), and what reactive-rdkafka's `binding` option reads
// to name the module.
export * from './dist/node-rdkafka/index';

declare module './dist/node-rdkafka/index' {
  interface KafkaConsumer {
    /**
     * How values, keys and header values are given: copies of their own (false, the default),
     * copies from Node's Buffer pool ('pool': a kept value pins at most its 8 KiB slab, its
     * byteOffset may be non-zero, its buffer is untransferable), or views of their partition's
     * batch buffer (true: a kept view pins its partition's messages of that batch; the buffer is
     * untransferable).
     */
    setBatchBufferSharing(shared: boolean | 'pool'): this;
  }
  namespace KafkaConsumer {
    /** The modes setBatchBufferSharing() takes in this build. */
    const batchBufferSharingModes: readonly (boolean | 'pool')[];
  }
}

export declare const name: string;
export declare const version: string;
/** consume(n) converts its batch natively, off the main thread. */
export declare const batchConversion: true;
/** librdkafka's rd_kafka_err2str. */
export declare function err2str(code: number): string;
