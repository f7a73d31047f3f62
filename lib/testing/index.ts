/**
 * `reactive-rdkafka/testing`: a Kafka cluster for your own tests (librdkafka's embedded mock, no
 * broker needed), topics, records, group members that force rebalances, and committed offsets.
 * See docs/testing.md.
 */
export { startTestCluster, newGroupId, TestCluster, EMBEDDED_PARTITIONS } from './test-cluster';
export type {
  TestClusterOptions,
  TestRecord,
  ProducedRecord,
  TestTopic,
  OffsetsByPartition,
} from './test-cluster';
export { GroupMember } from './group-member';
export type { JoinGroupOptions, TestGroupProtocol } from './group-member';
export { waitFor, nextRebalance, DEFAULT_WAIT_MS } from './wait';
export type { WaitOptions, NextRebalanceOptions } from './wait';
export type { ReadRecord, ReadRecordsOptions } from './read-records';
export { MockKafka } from './mock-kafka';
export type { MockKafkaOptions, MockProduceOptions, MockCommitFailure } from './mock-kafka';
export { VirtualClock } from './virtual-clock';
