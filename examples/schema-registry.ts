/**
 * A schema-registry decoder as an async deserializer: values in Confluent's wire format (magic
 * byte 0, a 4-byte schema id, then the payload — JSON Schema here), the schema fetched from the
 * registry's REST API (`GET /schemas/ids/{id}`, what Confluent Schema Registry and Apicurio's
 * Confluent-compatible API serve) on first use and cached. A payload the registry cannot explain
 * is a `DeserializationError`: never retried, it follows the failure policy (dead-letter here).
 *
 *   KAFKA_BROKERS=localhost:9092 SCHEMA_REGISTRY_URL=http://localhost:8081 \
 *     node --import tsx examples/schema-registry.ts
 *
 * For Avro or Protobuf use `@kafkajs/confluent-schema-registry` (`registry.decode(buffer)` returns
 * a Promise) or `@confluentinc/schemaregistry` the same way: `value: (data) => registry.decode(data)`.
 */
import { ReactiveConsumer } from 'reactive-rdkafka';
import type { Deserializer } from 'reactive-rdkafka';

/** Checks a decoded value against its schema; throw to reject it. */
export type SchemaCheck = (schema: unknown, value: unknown) => void;

/** Decodes Confluent-framed JSON values, fetching (and caching) each schema id once. */
export function confluentJson(
  registryUrl: string,
  check: SchemaCheck = () => undefined,
): Deserializer<unknown> {
  const schemas = new Map<number, Promise<unknown>>();
  const schemaOf = (id: number): Promise<unknown> => {
    let schema = schemas.get(id);
    if (schema === undefined) {
      schema = fetch(`${registryUrl}/schemas/ids/${id}`).then(async (res) => {
        if (!res.ok) throw new Error(`schema registry answered ${res.status} for schema id ${id}`);
        const body = (await res.json()) as { schema: string };
        return JSON.parse(body.schema) as unknown;
      });
      // A failed lookup is not cached: the next message with this id asks again.
      schema.catch(() => schemas.delete(id));
      schemas.set(id, schema);
    }
    return schema;
  };
  return async (data) => {
    if (data === null) return null;
    if (data.length < 5 || data[0] !== 0) throw new Error('not in the Confluent wire format');
    const schema = await schemaOf(data.readUInt32BE(1));
    const value: unknown = JSON.parse(data.subarray(5).toString('utf8'));
    check(schema, value);
    return value;
  };
}

/** Frames a JSON value in Confluent's wire format (what a producer's serializer does). */
export function frame(schemaId: number, value: unknown): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(schemaId, 1);
  return Buffer.concat([header, Buffer.from(JSON.stringify(value))]);
}

/** A minimal check: the value has the schema's required properties. */
export const requiredProperties: SchemaCheck = (schema, value) => {
  const required = (schema as { required?: string[] }).required ?? [];
  for (const key of required) {
    if (typeof value !== 'object' || value === null || !(key in value)) {
      throw new Error(`missing required property "${key}"`);
    }
  }
};

if (require.main === module) {
  const consumer = new ReactiveConsumer({
    config: {
      'bootstrap.servers': process.env.KAFKA_BROKERS ?? 'localhost:9092',
      'group.id': 'orders-registry',
    },
    topicConfig: { 'auto.offset.reset': 'earliest' },
    topics: ['orders'],
  });
  const value = confluentJson(
    process.env.SCHEMA_REGISTRY_URL ?? 'http://localhost:8081',
    requiredProperties,
  );
  consumer
    .process(
      (message) => {
        console.log(message.partition, message.offset, message.value);
      },
      { value, deadLetter: { topic: 'orders.dlq' } },
    )
    .subscribe({ error: (err: unknown) => console.error(err) });
  process.once('SIGTERM', () => void consumer.close());
  process.once('SIGINT', () => void consumer.close());
}
