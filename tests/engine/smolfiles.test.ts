// Tier 2, end to end: every bare-kernel Smolfile in smolfiles/ boots through the engine, exactly as shipped, and
// its guest does what the file's comment says. shell.smolfile (a Linux image) boots in tests/linux/engine.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { EngineHome, eventually, root } from './engine-home.js';

const dir = path.join(root, 'smolfiles');
const home = new EngineHome();
let smol: Smol;
beforeAll(async () => {
  smol = await home.client();
});
afterAll(() => home.destroy(), 120_000);

/** What each shipped bare-kernel Smolfile must show once it runs. A new file here needs an entry. */
const checks: Record<string, (vm: string) => Promise<void>> = {
  'hello.smolfile': async (vm) => {
    await smol.waitForOutput(vm, /hello from a Smolfile/, 60_000);
    // It resets the VM when done: the engine reports the VM stopped, with the reason.
    const stopped = await eventually('the hello guest to stop', async () => {
      const found = (await smol.vms()).find((v) => v.id === vm);
      return found?.state === 'stopped' ? found : undefined;
    });
    expect(stopped.exit?.reason).toBe('reset');
  },
  'echo.smolfile': async (vm) => {
    const echoed = smol.waitForOutput(vm, /typed-into-echo/, 60_000);
    await smol.write(vm, 'typed-into-echo');
    await echoed;
  },
  'count.smolfile': async (vm) => {
    await smol.waitForOutput(vm, /count=2\n/, 60_000); // a second line: its timer ticks
    expect((await smol.vms()).find((v) => v.id === vm)?.state).toBe('running');
  },
};

const bare = readdirSync(dir).filter(
  (name) => name.endsWith('.smolfile') && /^\s*kernel\s*=/m.test(readFileSync(path.join(dir, name), 'utf8')),
);

describe('the Smolfiles in smolfiles/', () => {
  it('every bare-kernel example has a check here', () => {
    expect(bare.sort()).toEqual(Object.keys(checks).sort());
  });

  it.each(Object.keys(checks))('%s boots through the engine and its guest does what it says', async (name) => {
    const { episode, vm } = await smol.up(path.join(dir, name));
    expect(episode.name).toMatch(new RegExp(`^${name.replace(/\.smolfile$/, '')}-\\d+$`));
    await checks[name]!(vm.id);
    await smol.destroy(episode.id);
  });
});
