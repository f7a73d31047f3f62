import assert from 'node:assert/strict';
import * as Kafka from 'node-rdkafka';
import { startTestCluster } from '../lib/testing';
import type { TestCluster } from '../lib/testing';
import { BROKERS, call } from './helpers/kafka';

/**
 * The testing kit against a real broker (`startTestCluster({ bootstrapServers })`): what the
 * embedded cluster cannot show. librdkafka's mock cluster sends no aborted-transaction list with
 * its fetch answers, so its read_committed readers see aborted records; a real broker does not.
 */
describe('testing kit on a real broker', function () {
  this.timeout(120_000);
  let cluster: TestCluster;
  before(async () => {
    cluster = await startTestCluster({ bootstrapServers: BROKERS });
  });
  after(async () => {
    await cluster?.close();
  });

  /** A connected transactional producer of the cluster, and a Promise form of its calls. */
  async function transactional(id: string) {
    const producer = new Kafka.Producer({
      'bootstrap.servers': cluster.bootstrapServers,
      'transactional.id': `${id}-${Date.now()}`,
      dr_cb: true,
    });
    await new Promise<void>((resolve, reject) =>
      producer.connect({}, (err) => (err ? reject(err) : resolve())),
    );
    await call((cb) => producer.initTransactions(30_000, cb));
    const close = () => new Promise<void>((resolve) => producer.disconnect(() => resolve()));
    return { producer, call, close };
  }

  it('readRecords under read_committed leaves out an aborted transaction, read_uncommitted shows it', async () => {
    const { name: topic } = await cluster.createTopic({ partitions: 1 });
    const { producer, call, close } = await transactional('read-records');
    try {
      await call((cb) => producer.beginTransaction(cb));
      producer.produce(topic, 0, Buffer.from('kept'), 'k');
      await call((cb) => producer.commitTransaction(30_000, cb));
      await call((cb) => producer.beginTransaction(cb));
      producer.produce(topic, 0, Buffer.from('aborted'), 'k');
      await call((cb) => producer.flush(30_000, cb)); // written, then aborted
      await call((cb) => producer.abortTransaction(30_000, cb));
      await call((cb) => producer.beginTransaction(cb));
      producer.produce(topic, 0, Buffer.from('kept too'), 'k');
      await call((cb) => producer.commitTransaction(30_000, cb));
    } finally {
      await close();
    }
    const committed = await cluster.readRecords(topic);
    assert.deepEqual(
      committed.map((r) => r.value?.toString()),
      ['kept', 'kept too'],
    );
    const all = await cluster.readRecords(topic, { isolation: 'read_uncommitted' });
    assert.deepEqual(
      all.map((r) => r.value?.toString()),
      ['kept', 'aborted', 'kept too'],
    );
  });

  it('readRecords under read_committed stops before a transaction still open, read_uncommitted reads it', async () => {
    const { name: topic } = await cluster.createTopic({ partitions: 1 });
    const { producer, call, close } = await transactional('read-records-open');
    try {
      await call((cb) => producer.beginTransaction(cb));
      producer.produce(topic, 0, Buffer.from('open'), 'k');
      await call((cb) => producer.flush(30_000, cb));
      assert.deepEqual(await cluster.readRecords(topic), []);
      const seen = await cluster.readRecords(topic, { isolation: 'read_uncommitted' });
      assert.deepEqual(
        seen.map((r) => r.value?.toString()),
        ['open'],
      );
      await call((cb) => producer.commitTransaction(30_000, cb));
      const after = await cluster.readRecords(topic);
      assert.deepEqual(
        after.map((r) => r.value?.toString()),
        ['open'],
      );
    } finally {
      await close();
    }
  });
});
