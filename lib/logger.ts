import pino from 'pino';
import type { Logger } from 'pino';

/** The logger used when the user gives none: pino at level `silent`. */
export function defaultLogger(): Logger {
  return pino({ level: 'silent' });
}
