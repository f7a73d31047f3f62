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

/** What the library logs through: the five methods of {@link LoggerLike}, nothing pino-specific. */
export type Logger = LoggerLike;

const ignore = (): void => undefined;

/** Logs nothing: the logger when the user gives none (pino is not needed for it). */
const SILENT: LoggerLike = {
  child: () => SILENT,
  error: ignore,
  warn: ignore,
  info: ignore,
  debug: ignore,
};

/** The logger used when the user gives none: it logs nothing. */
export function defaultLogger(): Logger {
  return SILENT;
}

/** The user's logger (pino, or anything with pino's calling convention). */
export function asLogger(logger: LoggerLike): Logger {
  return logger;
}
