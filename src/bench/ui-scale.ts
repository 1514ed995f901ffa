// The `ui` benchmark's scale stage (issue 23, "Measure"): a real episode of the echo guest with SCALE_SNAPSHOTS
// snapshots and SCALE_VMS VMs, made through the engine's API (one VM up, forked from a snapshot, checkpointed by
// hand up to the count) with automatic checkpoints every AUTO_EVERY_S seconds per VM. It is measured opening (click
// in the list → its tree drawn) and then panned while the VMs run and their automatic checkpoints arrive (each one a
// snapshot event the page applies, and a new card in the tree). Between runs the VMs are paused (no checkpoints
// arrive) and the automatic ones deleted, so every run opens the same 89 snapshots.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Smol } from '../../sdk/typescript/smol.js';
import { openTreeInPage, panTreeInPage, type Page } from './ui-page.js';

export const SCALE_SNAPSHOTS = 89;
export const SCALE_VMS = 23;
export const AUTO_EVERY_S = 5;

export interface ScaleEpisode {
  id: string;
  name: string;
  vmIds: string[];
  snapshots: number;
}

const autosOf = async (smol: Smol, episode: string) =>
  (await smol.snapshots(episode)).filter((s) => s.kind === 'auto').map((s) => s.id);

/** Makes the episode, all of its VMs paused (so no automatic checkpoint arrives until a run resumes them). */
export async function makeScaleEpisode(
  smol: Smol,
  dir: string,
  echoGuest: string,
  progress: (line: string) => void,
): Promise<ScaleEpisode> {
  const file = path.join(dir, 'scale.smolfile');
  writeFileSync(
    file,
    `kernel = ${JSON.stringify(echoGuest)}\ncpus = 1\nmemory = 16\n` +
      `[snapshots]\nauto_checkpoint = "${AUTO_EVERY_S}s"\nkeep = 1000\n`,
  );
  progress(`scale: an echo episode with ${SCALE_VMS} VMs and ${SCALE_SNAPSHOTS} snapshots, through the API`);
  const { episode, vm } = await smol.up(file);
  await smol.pause(vm.id);
  const first = await smol.checkpoint(vm.id, { name: 'scale-1' });
  const forked = await smol.fork(first.id, SCALE_VMS - 1, 'snapshot');
  const vmIds = [vm.id, ...forked.children.map((child) => child.id)];
  await Promise.all(forked.children.map((child) => smol.pause(child.id)));
  // Automatic checkpoints that came before the pauses do not count against the total: they are deleted.
  for (const id of await autosOf(smol, episode.id)) await smol.deleteSnapshot(id);
  let count = (await smol.snapshots(episode.id)).length;
  for (let i = 0; count < SCALE_SNAPSHOTS; i++, count++) {
    await smol.checkpoint(vmIds[i % vmIds.length]!, { name: `scale-${count + 1}` });
  }
  const snapshots = (await smol.snapshots(episode.id)).length;
  if (snapshots !== SCALE_SNAPSHOTS) {
    throw new Error(`the scale episode has ${snapshots} snapshots, not the ${SCALE_SNAPSHOTS} it was made with`);
  }
  return { id: episode.id, name: episode.name, vmIds, snapshots };
}

/**
 * One run: the episode opened from the list and its tree panned once with every VM paused (nothing arrives: the same
 * page's rate without them), then its VMs resumed, the first automatic checkpoint awaited, and the tree panned while
 * more arrive; the VMs paused and the automatic checkpoints deleted after.
 */
export async function scaleInPage(smol: Smol, page: Page, url: string, scale: ScaleEpisode) {
  await page.goto(url);
  await page.getByLabel('Search episodes').waitFor({ timeout: 120_000 });
  const { openMs } = await openTreeInPage(page, scale.name);
  const quiet = await panTreeInPage(page);
  await Promise.all(scale.vmIds.map((id) => smol.resume(id)));
  try {
    const deadline = Date.now() + 10 * AUTO_EVERY_S * 1000;
    while ((await autosOf(smol, scale.id)).length === 0) {
      if (Date.now() > deadline) throw new Error(`no automatic checkpoint within ${10 * AUTO_EVERY_S} s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const before = (await autosOf(smol, scale.id)).length;
    const pan = await panTreeInPage(page);
    const arrived = (await autosOf(smol, scale.id)).length - before;
    return { openMs, quiet, ...pan, arrived };
  } finally {
    await Promise.all(scale.vmIds.map((id) => smol.pause(id).catch(() => undefined)));
    for (const id of await autosOf(smol, scale.id)) await smol.deleteSnapshot(id).catch(() => undefined);
  }
}
