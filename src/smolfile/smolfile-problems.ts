// Problems found in a Smolfile: each one names the key, where it is written, and what was expected.
import { formatKeyPath, locationOf, pathKey, type KeyLocations, type KeyPath } from './toml-locator.js';

export interface SmolfileProblem {
  /** An error makes the Smolfile unusable; a warning points at something that is probably a mistake. */
  severity: 'error' | 'warning';
  /** The dotted key path (`health.interval`, `env[2]`); empty for problems with the file as a whole. */
  key: string;
  /** 1-based line and column in the file. */
  line: number;
  column: number;
  /** A complete sentence naming the key: what was expected and what was found. */
  message: string;
}

/** Collects problems, placing each at its key's line and column. */
export class ProblemList {
  private readonly items: SmolfileProblem[] = [];

  constructor(private readonly locations: KeyLocations) {}

  error(path: KeyPath, message: string): void {
    this.add('error', path, message);
  }

  warning(path: KeyPath, message: string): void {
    this.add('warning', path, message);
  }

  /** Adds a problem that is not about one key (a TOML syntax error, unreadable text). */
  atPosition(severity: SmolfileProblem['severity'], line: number, column: number, message: string): void {
    this.items.push({ severity, key: '', line, column, message });
  }

  /** The value's source text at `path` (numbers as written: `2.0`, `0x10`), when it is a scalar. */
  raw(path: KeyPath): string | undefined {
    return this.locations.get(pathKey(path))?.raw;
  }

  /** Where `path` is written: its own place, else its nearest ancestor's; `line: 1` if nothing is known. */
  where(path: KeyPath): { line: number; column: number } {
    return locationOf(this.locations, path) ?? { line: 1, column: 1 };
  }

  hasErrors(): boolean {
    return this.items.some((problem) => problem.severity === 'error');
  }

  /** In file order. */
  list(): SmolfileProblem[] {
    return [...this.items].sort((a, b) => a.line - b.line || a.column - b.column);
  }

  private add(severity: SmolfileProblem['severity'], path: KeyPath, message: string): void {
    const { line, column } = this.where(path);
    this.items.push({ severity, key: formatKeyPath(path), line, column, message });
  }
}

/** `FILE:LINE:COL: error: message`, as compilers print it, so editors and terminals can jump to it. */
export function formatProblem(file: string, problem: SmolfileProblem): string {
  return `${file}:${problem.line}:${problem.column}: ${problem.severity}: ${problem.message}`;
}
