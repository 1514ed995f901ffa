// WorkGate (src/engine/work-gate.ts): at most `atOnce` running, the rest waiting in order up to `maxWaiting`, then a
// 503 that counts both; a failure frees its slot.
import { describe, expect, it } from 'vitest';
import { ApiFailure } from '../api/engine-api.js';
import { WorkGate } from './work-gate.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('WorkGate', () => {
  it('runs two at once, queues two in order, refuses the fifth naming the counts', async () => {
    const gate = new WorkGate('diffs', 2, 2);
    const started: number[] = [];
    const jobs = [0, 1, 2, 3].map(() => deferred());
    const results = jobs.map((job, i) =>
      gate.run(async () => {
        started.push(i);
        await job.promise;
        return i;
      }),
    );
    await tick();
    expect(started).toEqual([0, 1]);
    expect([gate.running, gate.waiting]).toEqual([2, 2]);
    const refused = await gate.run(async () => 'no').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ApiFailure);
    expect(refused).toMatchObject({
      status: 503,
      code: 'EBUSY',
      message:
        '2 diffs are running and 2 waiting, the most this engine takes (2 at once, 2 waiting): try again when one ends',
    });

    jobs[1]!.resolve();
    await tick();
    expect(started).toEqual([0, 1, 2]); // the first waiting takes the freed slot
    jobs[0]!.reject(new Error('export failed'));
    await expect(results[0]).rejects.toThrow('export failed');
    await tick();
    expect(started).toEqual([0, 1, 2, 3]); // a failure frees its slot as well
    jobs[2]!.resolve();
    jobs[3]!.resolve();
    expect(await Promise.all(results.slice(1))).toEqual([1, 2, 3]);
    expect([gate.running, gate.waiting]).toEqual([0, 0]);
    expect(await gate.run(async () => 'again')).toBe('again');
  });
});
