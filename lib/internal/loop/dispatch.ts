/**
 * The hot path: each message of a consume batch to its partition's stream — or dropped, when its
 * partition is no longer ours (a late delivery), when librdkafka went back within one assignment,
 * when the application paused the partition, or when a previous owner already finished it.
 */
import type { Logger } from '../../logger';
import type { Message } from '../binding/rdkafka';
import { toKafkaMessage } from '../binding/message-conversion';
import type { EngineObserver } from '../observe/engine-observer';
import type { PartitionLoggers } from '../observe/partition-loggers';
import type { Assignments } from '../rebalance/assignments';
import type { FlowControl } from './flow-control';

export class Dispatcher {
  /** Messages that arrived for partitions not (or no longer) assigned and were dropped. */
  lateDropped = 0;

  constructor(
    private readonly assignments: Assignments,
    private readonly flow: FlowControl,
    private readonly logger: Logger,
    private readonly loggers: PartitionLoggers,
  ) {}

  dispatch(batch: Message[], observer: EngineObserver): void {
    for (const m of batch) {
      const control = this.assignments.ownerOf(m.topic, m.partition);
      if (control === undefined || !control.active) {
        // A late delivery (docs/binding-behaviours.md, "Late messages"): its partition is no longer ours or is being revoked.
        this.lateDropped += 1;
        this.logger.debug(
          { topic: m.topic, partition: m.partition, offset: m.offset },
          'dropped a message of a partition not currently assigned',
        );
        continue;
      }
      if (m.offset <= control.ledger.lastDeliveredOffset) {
        // librdkafka went back within one assignment (offset reset after out-of-range, log
        // truncation). These offsets were handed out already in this assignment.
        this.loggers
          .of(control)
          .warn(
            { offset: m.offset, last: control.ledger.lastDeliveredOffset },
            'partition position moved backwards; dropping offsets already delivered in this assignment',
          );
        continue;
      }
      // A partition the application paused delivers nothing, even if librdkafka dropped the pause.
      if (this.flow.guarding && !this.flow.admit(control, m.offset)) continue;
      if (control.finishedBefore(m.offset)) {
        // A previous owner finished it (completed-offset memory): count it done, don't redo it.
        control.skipCompleted(m.offset);
        continue;
      }
      control.push(toKafkaMessage(m, control.generation, control.signal));
      observer.received(m.topic, m.partition);
      this.flow.afterPush(control);
    }
  }
}
