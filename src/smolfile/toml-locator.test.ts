import TOML from '@iarna/toml';
import { describe, expect, it } from 'vitest';
import { formatKeyPath, locateKeys, locationOf, pathKey, type KeyPath } from './toml-locator.js';

/** The location of `path` in `source`, which must be valid TOML (the locator is only used on documents that are). */
function at(source: string, path: KeyPath) {
  TOML.parse(source);
  return locateKeys(source).get(pathKey(path));
}

/** Every path to a value in a parsed document: tables, arrays and their elements, and leaves. */
function allPaths(value: unknown, prefix: KeyPath = []): KeyPath[] {
  const paths: KeyPath[] = prefix.length > 0 ? [prefix] : [];
  if (Array.isArray(value)) value.forEach((element, i) => paths.push(...allPaths(element, [...prefix, i])));
  else if (typeof value === 'object' && value !== null && !(value instanceof Date)) {
    for (const [key, child] of Object.entries(value)) paths.push(...allPaths(child, [...prefix, key]));
  }
  return paths;
}

describe('the TOML key locator', () => {
  it('finds top-level keys at their line and column', () => {
    const source = 'image = "builtin"\n\n  cpus = 2 # two\nmemory=512\n';
    expect(at(source, ['image'])).toEqual({ line: 1, column: 1, raw: '"builtin"' });
    expect(at(source, ['cpus'])).toEqual({ line: 3, column: 3, raw: '2' });
    expect(at(source, ['memory'])).toEqual({ line: 4, column: 1, raw: '512' });
  });

  it('puts keys under their table header, and the table at its header', () => {
    const source = 'cpus = 1\n\n[health]\nexec = ["true"]\ninterval = "5s"\n\n[snapshots]\nkeep = 3\n';
    expect(at(source, ['health'])).toEqual({ line: 3, column: 1 });
    expect(at(source, ['health', 'interval'])).toMatchObject({ line: 5, column: 1, raw: '"5s"' });
    expect(at(source, ['snapshots', 'keep'])).toMatchObject({ line: 8, raw: '3' });
    expect(at(source, ['interval'])).toBeUndefined();
  });

  it('reads dotted, quoted and spaced keys, and records the tables a dotted key implies', () => {
    const source = [
      'health.interval = "1s"',
      '"quoted key" = 1',
      "'lit.eral' = 2",
      'a . "b\\tc" . d = 3',
      '"\\u00e9t\\u00e9" = 4',
      '[ x . "y z" ]',
      'k = 5',
    ].join('\n');
    expect(at(source, ['health'])).toEqual({ line: 1, column: 1 });
    expect(at(source, ['health', 'interval'])).toMatchObject({ line: 1 });
    expect(at(source, ['quoted key'])).toMatchObject({ line: 2, raw: '1' });
    expect(at(source, ['lit.eral'])).toMatchObject({ line: 3, raw: '2' });
    expect(at(source, ['a', 'b\tc', 'd'])).toMatchObject({ line: 4, raw: '3' });
    expect(at(source, ['été'])).toMatchObject({ line: 5, raw: '4' });
    expect(at(source, ['x', 'y z', 'k'])).toMatchObject({ line: 7, raw: '5' });
  });

  it('finds each element of an array spread over lines, past comments and tricky strings', () => {
    const source = [
      'init = [',
      '  "echo [not, the end]", # a comment with ] and ,',
      "  'C:\\no\\escapes\\',",
      '',
      '  "a \\" quote # not a comment",',
      ']',
      'cpus = 2',
    ].join('\n');
    expect(TOML.parse(source).init).toHaveLength(3);
    expect(at(source, ['init'])).toEqual({ line: 1, column: 1 });
    expect(at(source, ['init', 0])).toEqual({ line: 2, column: 3, raw: '"echo [not, the end]"' });
    expect(at(source, ['init', 1])).toMatchObject({ line: 3, column: 3 });
    expect(at(source, ['init', 2])).toMatchObject({ line: 5, raw: '"a \\" quote # not a comment"' });
    expect(at(source, ['cpus'])).toMatchObject({ line: 7 });
  });

  it('counts lines inside multi-line strings', () => {
    const source = [
      'a = """',
      'line one',
      'with "quotes" and \\"""',
      'ends here""""',
      "b = '''",
      'raw [not = a key]',
      "'''",
      'c = 1',
    ].join('\n');
    expect(at(source, ['b'])).toMatchObject({ line: 5, column: 1 });
    expect(at(source, ['c'])).toMatchObject({ line: 8, raw: '1' });
    expect(at(source, ['raw'])).toBeUndefined();
  });

  it('finds keys inside inline tables and nested arrays', () => {
    const source = 'health = { exec = ["true", "x"], interval = "2s", deep = { k = [[1, 2], [3]] } }\n';
    expect(at(source, ['health', 'exec', 1])).toEqual({ line: 1, column: 28, raw: '"x"' });
    expect(at(source, ['health', 'interval'])).toMatchObject({ column: 34, raw: '"2s"' });
    expect(at(source, ['health', 'deep', 'k', 1, 0])).toMatchObject({ raw: '3' });
  });

  it('numbers arrays of tables, and a sub-table header belongs to the last element', () => {
    const source = ['[[a]]', 'x = 1', '[[a]]', 'x = 2', '[a.sub]', 'y = 3', '[[a.list]]', 'z = 4'].join('\n');
    expect(at(source, ['a'])).toMatchObject({ line: 1 });
    expect(at(source, ['a', 0, 'x'])).toMatchObject({ line: 2, raw: '1' });
    expect(at(source, ['a', 1])).toMatchObject({ line: 3 });
    expect(at(source, ['a', 1, 'x'])).toMatchObject({ line: 4, raw: '2' });
    expect(at(source, ['a', 1, 'sub', 'y'])).toMatchObject({ line: 6 });
    expect(at(source, ['a', 1, 'list', 0, 'z'])).toMatchObject({ line: 8 });
  });

  it('keeps numbers, booleans and dates as written, without the comment after them', () => {
    const source = 'a = 2.0\nb = 0x1F # hex\nc = 1_000\nd = 1979-05-27 07:32:00Z\ne = true\nf = -inf\n';
    expect(at(source, ['a'])?.raw).toBe('2.0');
    expect(at(source, ['b'])?.raw).toBe('0x1F');
    expect(at(source, ['c'])?.raw).toBe('1_000');
    expect(at(source, ['d'])?.raw).toBe('1979-05-27 07:32:00Z');
    expect(at(source, ['e'])?.raw).toBe('true');
    expect(at(source, ['f'])?.raw).toBe('-inf');
  });

  it('handles CRLF line endings', () => {
    const source = 'a = 1\r\n[t]\r\nb = [\r\n  2,\r\n]\r\n';
    expect(at(source, ['a'])).toEqual({ line: 1, column: 1, raw: '1' });
    expect(at(source, ['t', 'b', 0])).toEqual({ line: 4, column: 3, raw: '2' });
  });

  it('gives a location for every value of a document that uses everything', () => {
    const source = [
      '# a comment',
      'title = "x" # trailing',
      'dotted.key."with space" = 1',
      'arr = [ [1, 2], { a = "b" }, """multi',
      'line""" ]',
      '[tbl]',
      'inline = { x = 1, y.z = [ { w = 2 } ] }',
      '[[aot]]',
      'n = 1',
      '[[aot]]',
      'n = 2',
      '[aot.child]',
      "'lit' = 1979-05-27",
    ].join('\n');
    const locations = locateKeys(source);
    for (const path of allPaths(TOML.parse(source))) {
      expect(locations.has(pathKey(path)), formatKeyPath(path)).toBe(true);
    }
  });

  it('never throws, whatever the text', () => {
    const source = 'a = [1, { b = "c\n[[x.y]]\nz = """\n\'q\n= = [\n"\\u00\n[t\n{ , }\n';
    for (let end = 0; end <= source.length; end++) {
      expect(() => locateKeys(source.slice(0, end))).not.toThrow();
      expect(() => locateKeys(source.slice(end))).not.toThrow();
    }
  });

  it('falls back to the nearest located ancestor', () => {
    const locations = locateKeys('[health]\nexec = ["a"]\n');
    expect(locationOf(locations, ['health', 'exec', 5])).toMatchObject({ line: 2 });
    expect(locationOf(locations, ['health', 'missing'])).toMatchObject({ line: 1 });
    expect(locationOf(locations, ['nothing'])).toBeUndefined();
  });

  it('writes paths as a person would', () => {
    expect(formatKeyPath(['health', 'interval'])).toBe('health.interval');
    expect(formatKeyPath(['env', 2])).toBe('env[2]');
    expect(formatKeyPath(['a', 0, 'b'])).toBe('a[0].b');
    expect(formatKeyPath(['odd key', 'x'])).toBe('"odd key".x');
  });
});
