/**
 * One child logger per partition stream, bound to its topic, partition and generation, made once
 * and kept as long as the stream is.
 */
import type { Logger } from '../../logger';
import type { PartitionControl } from '../partition/partition-control';

export class PartitionLoggers {
  private readonly loggers = new WeakMap<PartitionControl, Logger>();

  constructor(private readonly logger: Logger) {}

  /** The stream's logger. */
  of(control: PartitionControl): Logger {
    let logger = this.loggers.get(control);
    if (logger === undefined) {
      logger = this.logger.child({
        topic: control.topic,
        partition: control.partition,
        generation: control.generation,
      });
      this.loggers.set(control, logger);
    }
    return logger;
  }
}
