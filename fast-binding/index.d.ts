// node-rdkafka's typings (the build's own copy), and what reactive-rdkafka's `binding` option reads
// to name the module.
export * from './dist/node-rdkafka/index';

declare module './dist/node-rdkafka/index' {
  interface KafkaConsumer {
    /**
     * Values, keys and header values as views of their partition's batch buffer (true) instead
     * of copies of their own (false, the default). A kept view pins its partition's messages of
     * that batch; the buffer is untransferable.
     */
    setBatchBufferSharing(shared: boolean): this;
  }
}

export declare const name: string;
export declare const version: string;
/** consume(n) converts its batch natively, off the main thread. */
export declare const batchConversion: true;
/** librdkafka's rd_kafka_err2str. */
export declare function err2str(code: number): string;
