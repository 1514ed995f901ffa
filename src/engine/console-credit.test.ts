// The vmhost's bound on console output in flight to its engine (console-credit.ts).
import { describe, expect, it } from 'vitest';
import { ConsoleCredit } from './console-credit.js';

describe('console output in flight to the engine', () => {
  it('stops reading past the limit and reads again once half of it is free, losing nothing it read', () => {
    const sent: string[] = [];
    const holds: boolean[] = [];
    const credit = new ConsoleCredit(
      (vm, data) => sent.push(`${vm}:${data.length}`),
      (held) => holds.push(held),
      100,
    );
    credit.output('a', Buffer.alloc(60));
    credit.output('b', Buffer.alloc(60)); // 120 in flight: over the limit, reading stops
    expect(holds).toEqual([true]);
    expect(sent).toEqual(['a:60', 'b:60']); // what was read already still goes
    credit.taken(60); // 60 in flight: more than half the limit
    expect(holds).toEqual([true]);
    credit.taken(20); // 40: reading resumes
    expect(holds).toEqual([true, false]);
    expect(credit.inFlight).toBe(40);
    credit.taken(1000);
    expect(credit.inFlight).toBe(0);
  });

  it('refuses a limit that is not a positive integer, naming the variable', () => {
    expect(
      () =>
        new ConsoleCredit(
          () => undefined,
          () => undefined,
          Number('lots'),
        ),
    ).toThrow(/SMOL_CONSOLE_IN_FLIGHT/);
  });
});
