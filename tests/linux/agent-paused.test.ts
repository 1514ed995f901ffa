// Tier 3: the agent of a VM that was paused past the engine's wait for it (docs/engine.md, "The guest agent"). A VM
// suspended while paused starts paused; its agent cannot answer until it runs, so the engine gives up on it
// (`unreachable`, after SMOL_AGENT_READY_MS, short here); resuming the VM asks again, and commands run.
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineHome, eventually, root } from '../engine/engine-home.js';

process.env.SMOL_AGENT_READY_MS = '15000'; // the engine this file starts inherits it
const home = new EngineHome();
afterAll(() => home.destroy(), 180_000);

describe('the agent of a VM resumed after a long pause', () => {
  it('is unreachable while the VM stays paused, and ready again once it is resumed', async () => {
    const smol = await home.client();
    const { vm } = await smol.up(path.join(root, 'smolfiles', 'shell.smolfile'), { name: 'paused' });
    const agentOf = async () => (await smol.vm(vm.id)).agent;
    await eventually('the agent to be ready', async () => ((await agentOf()) === 'ready' ? true : undefined), 300_000);
    await smol.pause(vm.id);
    await smol.stop(vm.id); // suspended while paused: `start` brings it back paused
    expect((await smol.start(vm.id)).state).toBe('paused');
    await eventually(
      'the engine to give up',
      async () => ((await agentOf()) === 'unreachable' ? true : undefined),
      120_000,
    );
    await smol.resume(vm.id);
    await eventually('the agent to answer', async () => ((await agentOf()) === 'ready' ? true : undefined), 300_000);
    const result = await smol.exec(vm.id, ['sh', '-c', 'echo awake']);
    expect(result.stdout.toString()).toBe('awake\n');
  }, 900_000);
});
