import pino from 'pino';
import type { Logger } from 'pino';

/** One log method: an object of fields and a message, or a message alone (pino's shape). */
export interface LogFn {
  (fields: object, message?: string): void;
  (message: string): void;
}

/**
 * Any pino-compatible logger: pino itself, or anything with pino's calling convention (fields
 * first, then the message) and `child(bindings)`. The library calls only these five methods.
 */
export interface LoggerLike {
  child(bindings: Record<string, unknown>): LoggerLike;
  error: LogFn;
  warn: LogFn;
  info: LogFn;
  debug: LogFn;
}

/** The logger used when the user gives none: pino at level `silent`. */
export function defaultLogger(): Logger {
  return pino({ level: 'silent' });
}

/**
 * The library's internal loggers are typed as pino's `Logger`, but use only the methods of
 * {@link LoggerLike}; a structural logger is accepted as one.
 */
export function asLogger(logger: LoggerLike): Logger {
  return logger as unknown as Logger;
}
