// node-rdkafka's typings, and what reactive-rdkafka's `binding` option reads to name the module.
export * from './dist/node-rdkafka';
export declare const name: string;
export declare const version: string;
/** consume(n) converts its batch natively, off the main thread. */
export declare const batchConversion: true;
/** librdkafka's rd_kafka_err2str. */
export declare function err2str(code: number): string;
