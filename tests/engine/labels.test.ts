// Tier 2: labels on VMs and checkpoints (docs/labels.md) through the real `smol` CLI and the engine's HTTP API, with
// the echo guest in a real VM: set and removed, shown by smol ls and smol snapshots, kept across an engine restart.
import { afterAll, describe, expect, it } from 'vitest';
import type { Episode, Snapshot, Vm } from '../../src/api/schema.js';
import { ApiClientError } from '../../src/api/api-client.js';
import { EngineHome } from './engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 120_000);

describe('labels and rewards', () => {
  it('are set on a VM and a checkpoint, shown in the lists, and survive an engine restart', async () => {
    const smolfile = home.smolfile('echo', 'kernel = "@guests@/echo.elf"\nmemory = 16\n');
    const { vm } = await home.json<{ vm: Vm }>(['up', '-f', smolfile, '--name', 'lab']);
    const labelled = await home.json<{ vm: Vm }>(['label', vm.id, 'reward=0.83', 'task=fix-1234', 'n=-2']);
    expect(labelled.vm.labels).toEqual({ reward: 0.83, task: 'fix-1234', n: -2 });
    const { snapshot: checkpoint } = await home.json<{ snapshot: Snapshot }>(['checkpoint', vm.id, '--name', 'try-1']);
    expect(checkpoint.labels).toEqual({}); // a checkpoint's labels are its own
    const onSnapshot = await home.json<{ snapshot: Snapshot }>(['label', 'try-1', 'reward=1', 'best=yes']);
    expect(onSnapshot.snapshot.labels).toEqual({ reward: 1, best: 'yes' });
    expect((await home.json<{ vm: Vm }>(['label', vm.id, 'n-'])).vm.labels).toEqual({ reward: 0.83, task: 'fix-1234' });

    const ls = await home.smol(['ls']);
    expect(ls.stdout).toMatch(/LABELS\n.*reward=0\.83,task=fix-1234/s);
    const snapshots = await home.smol(['snapshots', 'lab']);
    expect(snapshots.stdout).toMatch(/try-1 .*best=yes,reward=1/);

    // Through the API: a bad key is refused with its name; an unknown VM is a 404.
    const smol = await home.client();
    const refused = await smol.api
      .call('updateVm', { params: { vm: vm.id }, body: { labels: { 'a b': 1 } } })
      .catch((error: unknown) => error as ApiClientError);
    expect(refused).toBeInstanceOf(ApiClientError);
    expect((refused as ApiClientError).status).toBe(400);
    expect((refused as ApiClientError).message).toMatch(/a b: a label key takes/);
    const missing = await smol.api
      .call('updateVm', { params: { vm: 'vm-zzzzzzzzzz' }, body: { labels: { a: 1 } } })
      .catch((error: unknown) => error as ApiClientError);
    expect((missing as ApiClientError).status).toBe(404);
    const bad = await home.smol(['label', vm.id, 'nothing']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/nothing: expected key=value \(set\) or key- \(remove\)/);

    // The TypeScript SDK's own calls.
    expect((await smol.labelVm(vm.id, { score: 7, task: null })).labels).toEqual({ reward: 0.83, score: 7 });
    expect((await smol.labelSnapshot(checkpoint.id, { best: null })).labels).toEqual({ reward: 1 });

    // Kept in the episode record and the snapshot's manifest: the next engine has them.
    expect((await home.smol(['engine', 'stop'])).status).toBe(0);
    const { episodes } = await home.json<{ episodes: Episode[] }>(['ls']);
    expect(episodes[0]!.vms[0]!.labels).toEqual({ reward: 0.83, score: 7 });
    const after = await home.json<{ snapshots: Snapshot[] }>(['snapshots', 'lab']);
    expect(after.snapshots.find((s) => s.name === 'try-1')!.labels).toEqual({ reward: 1 });
  });
});
