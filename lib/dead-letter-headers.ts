/**
 * Header names the library adds to a dead-lettered record (after the original headers), saying
 * where it came from and why it failed.
 */
export const DEAD_LETTER_HEADERS = {
  topic: 'dlq.original.topic',
  partition: 'dlq.original.partition',
  offset: 'dlq.original.offset',
  timestamp: 'dlq.original.timestamp',
  group: 'dlq.consumer.group',
  errorName: 'dlq.error.name',
  errorMessage: 'dlq.error.message',
  errorCode: 'dlq.error.code',
  stage: 'dlq.failure.stage',
  attempts: 'dlq.attempts',
  failedAt: 'dlq.failed.at',
} as const;
