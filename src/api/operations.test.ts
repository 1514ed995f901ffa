// Clients call the API's operations by name (operations.ts): the request is built from the route table, and the
// types come from it, so a renamed operation, a missing path parameter or a changed response fails to compile.
// The @ts-expect-error lines are checked by `npm run typecheck`: each fails it the day the mistake compiles.
import { describe, expect, expectTypeOf, it } from 'vitest';
import { OPERATIONS, operationRequest, type CallArgs, type ResponseOf } from './operations.js';
import { ROUTES } from './routes.js';
import type { Snapshot, Vm } from './schema.js';

describe('operations typed from the route table', () => {
  it('fills in path parameters, encoded, and the query, leaving out what is undefined', () => {
    expect(operationRequest('logs', { params: { vm: 'a b/c' }, query: { tail: 5 } })).toEqual({
      method: 'GET',
      path: '/api/v1/vms/a%20b%2Fc/logs?tail=5',
      body: undefined,
    });
    expect(operationRequest('logs', { params: { vm: 'vm-1' }, query: { tail: undefined } }).path).toBe(
      '/api/v1/vms/vm-1/logs',
    );
    expect(operationRequest('forkVm', { params: { vm: 'vm-1' }, body: { count: 3 } })).toEqual({
      method: 'POST',
      path: '/api/v1/vms/vm-1/fork',
      body: { count: 3 },
    });
    expect(operationRequest('listEpisodes')).toEqual({ method: 'GET', path: '/api/v1/episodes', body: undefined });
  });

  it('names the operation and the parameter when a path parameter is missing', () => {
    expect(() => operationRequest('getVm', { params: {} })).toThrow('getVm: the path parameter vm is missing');
    expect(() => operationRequest('getVm', { params: { vm: '' } })).toThrow(/path parameter vm/);
  });

  it('the server serves every operation, in the table’s order', () => {
    expect(ROUTES.map((route) => route.operation)).toEqual(Object.keys(OPERATIONS));
  });

  it('types each call from its operation', () => {
    expectTypeOf<ResponseOf<'getVm'>>().toEqualTypeOf<Vm>();
    expectTypeOf<ResponseOf<'checkpoint'>>().toEqualTypeOf<Snapshot>();
    expectTypeOf<ResponseOf<'deleteSnapshot'>>().toEqualTypeOf<undefined>();
    const ok: CallArgs<'restore'> = [{ params: { vm: 'vm-1' }, body: { snapshot: 'sn-1' } }];
    const none: CallArgs<'listVms'> = [];
    // @ts-expect-error: there is no operation of that name
    const unknown: CallArgs<'getVmm'> = [];
    // @ts-expect-error: getVm needs its `vm` path parameter
    const missing: CallArgs<'getVm'> = [{}];
    // @ts-expect-error: the fork body's field is `count`
    const wrong: CallArgs<'forkVm'> = [{ params: { vm: 'vm-1' }, body: { n: 2 } }];
    expect([ok, none, unknown, missing, wrong]).toHaveLength(5);
  });
});
