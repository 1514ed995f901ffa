// Where each key of a TOML document is written: @iarna/toml gives values but no positions, so this scans the
// source once for table headers and `key = value` assignments and records the line and column of every key, table,
// array element and inline-table entry, plus the source text of scalar values.
//
// It is meant for documents that already parsed. It understands comments, bare, quoted and dotted keys, all four
// string forms (escapes and multi-line ones included), arrays and inline tables nested to any depth and spread over
// lines, `[table]` and `[[array.of.tables]]` headers. Limits: on text that is not valid TOML it records what it can
// and never throws; where a path is written more than once (implicit tables), the first place wins; columns count
// UTF-16 code units, so they are off by one after each character outside the Basic Multilingual Plane on that line.

export type KeySegment = string | number;
export type KeyPath = readonly KeySegment[];

export interface KeyLocation {
  /** 1-based line of the key (or of the table header, or of the array element). */
  line: number;
  /** 1-based column of the same. */
  column: number;
  /** The value as written, for a string, number, boolean or date (`2.0`, `"5s"`, `0x10`); not for arrays or tables. */
  raw?: string;
}

export type KeyLocations = ReadonlyMap<string, KeyLocation>;

/** The map key for a path: array indices and dotted strings cannot collide. */
export function pathKey(path: KeyPath): string {
  return JSON.stringify(path);
}

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

/** A path as a person writes it: `health.interval`, `env[2]`, `"odd key".x`. */
export function formatKeyPath(path: KeyPath): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else text += `${text === '' ? '' : '.'}${BARE_KEY.test(segment) ? segment : JSON.stringify(segment)}`;
  }
  return text;
}

/** The location of a path, or of its nearest ancestor that has one. */
export function locationOf(locations: KeyLocations, path: KeyPath): KeyLocation | undefined {
  for (let length = path.length; length > 0; length--) {
    const location = locations.get(pathKey(path.slice(0, length)));
    if (location) return location;
  }
  return undefined;
}

export function locateKeys(source: string): KeyLocations {
  return new Locator(source).run();
}

const ESCAPES: Record<string, string> = { b: '\b', t: '\t', n: '\n', f: '\f', r: '\r', '"': '"', '\\': '\\' };

class Locator {
  private pos = 0;
  private line = 1;
  private lineStart = 0;
  private readonly found = new Map<string, KeyLocation>();
  /** How many elements each array of tables has so far, by path. */
  private readonly tableArrays = new Map<string, number>();

  constructor(private readonly src: string) {}

  run(): KeyLocations {
    let table: KeySegment[] = [];
    while (this.pos < this.src.length) {
      const before = this.pos;
      this.skipBlank();
      const c = this.src[this.pos];
      if (c === undefined) break;
      if (c === '\n' || c === '\r' || c === '#') {
        this.skipLine();
      } else if (c === '[') {
        table = this.header() ?? table;
        this.skipLine();
      } else {
        this.assignment(table);
        this.skipLine();
      }
      if (this.pos === before) this.advance(1); // never loop in place on text this does not understand
    }
    return this.found;
  }

  private here(): KeyLocation {
    return { line: this.line, column: this.pos - this.lineStart + 1 };
  }

  private advance(count: number): void {
    for (let i = 0; i < count && this.pos < this.src.length; i++) {
      if (this.src[this.pos] === '\n') {
        this.line++;
        this.lineStart = this.pos + 1;
      }
      this.pos++;
    }
  }

  private record(path: KeyPath, at: KeyLocation): KeyLocation {
    const key = pathKey(path);
    const existing = this.found.get(key);
    if (existing) return existing;
    const location = { line: at.line, column: at.column };
    this.found.set(key, location);
    return location;
  }

  private skipBlank(): void {
    while (this.src[this.pos] === ' ' || this.src[this.pos] === '\t') this.pos++;
  }

  /** Skips blanks, comments and line breaks (between array elements). */
  private skipBlankLines(): void {
    for (;;) {
      this.skipBlank();
      const c = this.src[this.pos];
      if (c === '#') this.skipToLineEnd();
      else if (c === '\n' || c === '\r') this.advance(1);
      else return;
    }
  }

  private skipToLineEnd(): void {
    while (this.pos < this.src.length && this.src[this.pos] !== '\n') this.pos++;
  }

  private skipLine(): void {
    this.skipToLineEnd();
    this.advance(1);
  }

  /** `[a.b]` or `[[a.b]]`: returns the table's full path, with array-of-tables indices. */
  private header(): KeySegment[] | null {
    const at = this.here();
    const isArray = this.src.startsWith('[[', this.pos);
    this.advance(isArray ? 2 : 1);
    const keys = this.key();
    if (!keys) return null;
    const path: KeySegment[] = [];
    keys.forEach((segment, i) => {
      path.push(segment);
      const key = pathKey(path);
      const count = this.tableArrays.get(key);
      if (isArray && i === keys.length - 1) {
        this.tableArrays.set(key, (count ?? 0) + 1);
        this.record(path, at);
        path.push(count ?? 0);
      } else if (count !== undefined) {
        path.push(count - 1); // `[a.b]` after `[[a]]` belongs to the last `a`
      }
      this.record(path, at);
    });
    return path;
  }

  /** `a.b = value` inside the table at `table` (or an inline table). */
  private assignment(table: KeyPath): void {
    const at = this.here();
    const keys = this.key();
    if (!keys) return;
    this.skipBlank();
    if (this.src[this.pos] !== '=') return;
    this.advance(1);
    this.skipBlank();
    for (let i = 1; i < keys.length; i++) this.record([...table, ...keys.slice(0, i)], at);
    this.value([...table, ...keys], at);
  }

  /** A dotted key: bare, "basic" and 'literal' parts with optional blanks around the dots. */
  private key(): string[] | null {
    const parts: string[] = [];
    for (;;) {
      this.skipBlank();
      const c = this.src[this.pos];
      let part: string | null;
      if (c === '"') part = this.basicKey();
      else if (c === "'") part = this.literalKey();
      else {
        const start = this.pos;
        while (this.pos < this.src.length && /[A-Za-z0-9_-]/.test(this.src[this.pos] ?? '')) this.pos++;
        part = this.pos > start ? this.src.slice(start, this.pos) : null;
      }
      if (part === null) return null;
      parts.push(part);
      this.skipBlank();
      if (this.src[this.pos] !== '.') return parts;
      this.pos++;
    }
  }

  private basicKey(): string | null {
    let text = '';
    this.pos++; // the opening quote
    while (this.pos < this.src.length) {
      const c = this.src[this.pos] ?? '';
      if (c === '"') {
        this.pos++;
        return text;
      }
      if (c === '\n') return null;
      if (c === '\\') {
        const escape = this.src[this.pos + 1] ?? '';
        const hexLength = escape === 'u' ? 4 : escape === 'U' ? 8 : 0;
        if (hexLength > 0) {
          const code = Number.parseInt(this.src.slice(this.pos + 2, this.pos + 2 + hexLength), 16);
          text += Number.isNaN(code) || code > 0x10ffff ? '\ufffd' : String.fromCodePoint(code);
          this.pos += 2 + hexLength;
        } else {
          text += ESCAPES[escape] ?? escape;
          this.pos += 2;
        }
        continue;
      }
      text += c;
      this.pos++;
    }
    return null;
  }

  private literalKey(): string | null {
    const end = this.src.indexOf("'", this.pos + 1);
    const newline = this.src.indexOf('\n', this.pos + 1);
    if (end < 0 || (newline >= 0 && newline < end)) return null;
    const text = this.src.slice(this.pos + 1, end);
    this.pos = end + 1;
    return text;
  }

  /** A value at `path`, whose key (or element) starts at `at`. Records nested keys and elements. */
  private value(path: KeyPath, at: KeyLocation): void {
    const location = this.record(path, at);
    const c = this.src[this.pos];
    if (c === '[') this.array(path);
    else if (c === '{') this.inlineTable(path);
    else {
      const start = this.pos;
      if (c === '"' || c === "'") this.string(c);
      else this.scalar();
      location.raw = this.src.slice(start, this.pos).trimEnd();
    }
  }

  private array(path: KeyPath): void {
    this.advance(1);
    for (let index = 0; ; index++) {
      this.skipBlankLines();
      const c = this.src[this.pos];
      if (c === undefined) return;
      if (c === ']') {
        this.advance(1);
        return;
      }
      const before = this.pos;
      this.value([...path, index], this.here());
      this.skipBlankLines();
      if (this.src[this.pos] === ',') this.advance(1);
      else if (this.src[this.pos] !== ']' && this.pos === before) return; // not TOML; give up on this array
    }
  }

  private inlineTable(path: KeyPath): void {
    this.advance(1);
    for (;;) {
      this.skipBlankLines();
      const c = this.src[this.pos];
      if (c === undefined) return;
      if (c === '}') {
        this.advance(1);
        return;
      }
      const before = this.pos;
      this.assignment(path);
      this.skipBlankLines();
      if (this.src[this.pos] === ',') this.advance(1);
      else if (this.src[this.pos] !== '}' && this.pos === before) return;
    }
  }

  /** A string of any of the four kinds, starting at its opening quote. */
  private string(quote: '"' | "'"): void {
    const triple = quote.repeat(3);
    if (this.src.startsWith(triple, this.pos)) {
      this.advance(3);
      while (this.pos < this.src.length) {
        if (quote === '"' && this.src[this.pos] === '\\') this.advance(2);
        else if (this.src.startsWith(triple, this.pos)) {
          // Up to two quotes right before the closing three belong to the string: `"""a""""` is `a"`.
          let run = 3;
          while (run < 5 && this.src[this.pos + run] === quote) run++;
          this.advance(run);
          return;
        } else this.advance(1);
      }
      return;
    }
    this.advance(1);
    while (this.pos < this.src.length) {
      const c = this.src[this.pos];
      if (c === '\n') return;
      if (quote === '"' && c === '\\') this.pos += 2;
      else if (c === quote) {
        this.pos++;
        return;
      } else this.pos++;
    }
  }

  /** A number, boolean or date: up to a separator, a comment or the end of the line. */
  private scalar(): void {
    while (this.pos < this.src.length && !/[,\]}#\r\n]/.test(this.src[this.pos] ?? '')) this.pos++;
  }
}
