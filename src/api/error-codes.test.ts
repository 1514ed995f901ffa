// The kinds of failure and their HTTP statuses (docs/engine.md, "API errors"): a known kind is never a 500, and an
// error keeps its kind across a process boundary.
import { describe, expect, it } from 'vitest';
import { CodedError, codeOf, errorData, statusForCode } from './error-codes.js';

describe('the status of a failure by its errno name', () => {
  it.each([
    ['EBUSY', 409],
    ['EEXIST', 409],
    ['EALREADY', 409],
    ['ENOENT', 404],
    ['ESRCH', 404],
    ['EINVAL', 400],
    ['ENOEXEC', 400],
    ['E2BIG', 400],
    ['ENAMETOOLONG', 400],
    ['ENOMEM', 503],
    ['ENOSPC', 507],
    ['EMFILE', 503],
    ['ENFILE', 503],
    ['EAGAIN', 503],
    ['EDQUOT', 507],
    ['EACCES', 403],
    ['EPERM', 403],
  ])('%s is %i', (code, status) => {
    expect(statusForCode(code)).toBe(status);
  });

  it('has none for a code of no known kind, or none at all (those are 500s)', () => {
    expect(statusForCode('EIO')).toBeUndefined();
    expect(statusForCode('ERR_SOMETHING')).toBeUndefined();
    expect(statusForCode(undefined)).toBeUndefined();
  });

  it('reads only string codes', () => {
    expect(codeOf(Object.assign(new Error('x'), { code: 'EBUSY' }))).toBe('EBUSY');
    expect(codeOf({ code: 16 })).toBeUndefined();
    expect(codeOf(null)).toBeUndefined();
  });
});

describe('an error crossing the vmhost boundary', () => {
  it('keeps its name, message, code and errno', () => {
    const thrown = Object.assign(new RangeError('cannot pause: a checkpoint is in progress'), {
      code: 'EBUSY',
      errno: 16,
    });
    const data = errorData(thrown);
    expect(data).toEqual({
      name: 'RangeError',
      message: 'cannot pause: a checkpoint is in progress',
      code: 'EBUSY',
      errno: 16,
    });
    // What the other side sees, after the structured clone the channel does.
    const again = new CodedError(structuredClone(data));
    expect(again).toBeInstanceOf(Error);
    expect(again).toMatchObject({ name: 'RangeError', message: data.message, code: 'EBUSY', errno: 16 });
  });

  it('carries a thrown non-Error as its text, without a code', () => {
    expect(errorData('the vmhost went away')).toEqual({ name: 'Error', message: 'the vmhost went away' });
  });
});
