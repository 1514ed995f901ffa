// What a 400 says (docs/engine.md, "API"): the field and what it expects, in the API's words rather than zod's
// ("count: expected a number from 1 to 64", "bogus: unknown field (expected smolfile, name)").
import { z } from 'zod';

const unwrap = (schema: z.ZodType): z.ZodType =>
  schema instanceof z.ZodOptional || schema instanceof z.ZodDefault || schema instanceof z.ZodNullable
    ? unwrap(schema.unwrap() as z.ZodType)
    : schema;

function schemaAt(schema: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let at: z.ZodType | undefined = unwrap(schema);
  for (const key of path) {
    if (at instanceof z.ZodObject) at = at.shape[String(key)] as z.ZodType | undefined;
    else if (at instanceof z.ZodArray) at = at.element as z.ZodType;
    else return undefined;
    if (!at) return undefined;
    at = unwrap(at);
  }
  return at;
}

function expected(schema: z.ZodType | undefined, whole: boolean): string {
  if (schema instanceof z.ZodNumber) {
    const [min, max] = [schema.minValue, schema.maxValue];
    const kind = whole ? 'a whole number' : 'a number';
    const hasMin = min !== null && min > Number.MIN_SAFE_INTEGER;
    const hasMax = max !== null && max < Number.MAX_SAFE_INTEGER;
    if (hasMin && hasMax) return `${kind} from ${min} to ${max}`;
    if (hasMin) return `${kind} of at least ${min}`;
    return hasMax ? `${kind} of at most ${max}` : kind;
  }
  if (schema instanceof z.ZodString) {
    const [min, max] = [schema.minLength ?? 0, schema.maxLength];
    if (max === null) return min > 0 ? `a string of at least ${min} characters` : 'a string';
    return min > 0 ? `a string of ${min} to ${max} characters` : `a string of at most ${max} characters`;
  }
  if (schema instanceof z.ZodBoolean) return 'true or false';
  if (schema instanceof z.ZodEnum) return `one of ${schema.options.join(', ')}`;
  if (schema instanceof z.ZodObject) return 'a JSON object';
  if (schema instanceof z.ZodArray) return 'an array';
  return 'a valid value';
}

/** Every problem, each naming its field (`where` for the whole value), joined by "; ": "count: expected …". */
export function explainIssues(schema: z.ZodType, error: z.ZodError, where: string): string {
  return error.issues
    .map((issue) => {
      const field = issue.path.length ? issue.path.join('.') : where;
      const at = schemaAt(schema, issue.path);
      switch (issue.code) {
        case 'unrecognized_keys': {
          const known = at instanceof z.ZodObject ? Object.keys(at.shape) : [];
          const prefix = issue.path.length ? `${field}.` : '';
          const expect = known.length ? `expected ${known.join(', ')}` : `${where} takes none`;
          const noun = where === 'query' ? 'query parameter' : 'field';
          // A name that is empty, has spaces or odd characters (`?=1`, `{"\ufffdO count": 1}`) is quoted, so the
          // message still starts with what is wrong and where that ends.
          const named = (key: string) => (/^[\w.-]+$/.test(key) ? key : JSON.stringify(key));
          return issue.keys.map((key) => `${prefix}${named(key)}: unknown ${noun} (${expect})`).join('; ');
        }
        case 'invalid_format':
          return `${field}: expected ${issue.message}`;
        case 'invalid_type':
          if (issue.input === undefined) return `${field}: missing (expected ${expected(at, false)})`;
          return `${field}: expected ${expected(at, issue.expected === 'int' && typeof issue.input === 'number')}`;
        case 'too_small':
        case 'too_big':
        case 'invalid_value':
        case 'not_multiple_of':
          return `${field}: expected ${expected(at, false)}`;
        default:
          return `${field}: ${issue.message}`;
      }
    })
    .join('; ');
}

/** Validates a request's parts against its schema: the parsed value, or a 400 message. */
export function parseInput<T>(
  schema: z.ZodType<T>,
  value: unknown,
  where: string,
): { ok: true; value: T } | { ok: false; message: string } {
  const result = schema.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, message: explainIssues(schema, result.error, where) };
}
