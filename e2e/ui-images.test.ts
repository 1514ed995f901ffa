// Tier 4 (TESTING.md): the images view (docs/ui.md, "Images") in Debian's Chromium against a real engine, pulling
// from a real registry on loopback (Debian's docker-registry, two images pushed with skopeo, as tests/images do).
// Pull… names a bad reference and a registry out of reach in words, then pulls with a bar per layer and the image
// lands in the list; Remove of an image a VM's disk sits on is refused with the engine's reason; Prune… says what it
// will free (the other image) and then what it freed, and the image in use stays. The engine's guest cache is a
// throwaway SMOL_CACHE. Screenshots images-*.png in test-results/e2e/.
//
// What keeps the image: a real engine snapshot of an OCI image needs a Linux guest, which runs only in the KVM lab
// (tests/linux/oci-*.test.ts; the API's own usedBy test is tests/images/oci-lifecycle.test.ts). Here the echo tiny
// guest is booted by the project's VMM on the engine's copy of the image (SMOL_HOME/images, adopted as the engine
// adopts a root disk) with its writable layer in SMOL_HOME/disks, as a VM's disk is: the engine sees that layer.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImageSummary } from '../src/api/schema.js';
import { adoptBaseImage, newLayerName } from '../src/engine/disk-layers.js';
import { freePort, push, startRegistry, type Registry } from '../src/bench/loopback-registry.js';
import { busyboxLayers, tarOf, writeLayout } from '../tests/images/oci-fixtures.js';
import { startGuest, type RunningGuest } from '../tests/vmm/guests.js';
import { startUiSession, storySteps, until, visible, type UiSession } from './ui-page.js';

let ui: UiSession;
let registry: Registry;
let guest: RunningGuest | null = null;
const step = storySteps(() => ui, it);
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-e2e-images-'));
const cache = path.join(scratch, 'cache');

beforeAll(async () => {
  registry = await startRegistry(path.join(scratch, 'registry'));
  // "app": busybox, a layer deleting a file, and 24 MiB of random bytes (so the bars have something to show);
  // "other": busybox alone, pulled to be pruned.
  const big = await tarOf([{ header: { name: 'data/blob.bin', mode: 0o644 }, data: randomBytes(24 << 20) }]);
  const app = writeLayout(path.join(scratch, 'app'), [...(await busyboxLayers()), big], 'v1');
  const other = writeLayout(path.join(scratch, 'other'), (await busyboxLayers()).slice(0, 1), 'v1');
  push(`oci:${app.dir}:v1`, registry.host, 'smol-e2e/app:v1');
  push(`oci:${other.dir}:v1`, registry.host, 'smol-e2e/other:v1');
  ui = await startUiSession({ SMOL_CACHE: cache });
}, 180_000);
afterAll(async () => {
  await guest?.vm.kill().catch(() => undefined);
  await ui?.close();
  await registry?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

const images = async () => (await ui.engine.api.request<{ images: ImageSummary[] }>('GET', '/api/v1/images')).images;

async function pullInDialog(reference: string) {
  const { page } = ui;
  await page.getByRole('button', { name: 'Pull…' }).first().click();
  const dialog = page.getByRole('dialog', { name: 'Pull image' });
  await dialog.getByLabel('Image reference').fill(reference);
  await dialog.getByRole('button', { name: 'Pull', exact: true }).click();
  return dialog;
}

describe('the images view', { timeout: 240_000 }, () => {
  const app = () => `${registry.host}/smol-e2e/app:v1`;
  const other = () => `${registry.host}/smol-e2e/other:v1`;

  step('opens from the top bar, empty, and names a bad reference and a registry out of reach', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    await page.getByRole('button', { name: 'Images', exact: true }).click();
    await visible(page.getByRole('region', { name: 'Images' }));
    expect(page.url()).toMatch(/#\/images$/);
    await visible(page.getByText('No images yet'));
    await ui.shot('images-01-empty');

    const bad = await pullInDialog('Not A Reference!');
    const badAlert = bad.getByRole('alert');
    await visible(badAlert);
    expect(await badAlert.innerText()).toMatch(/Not A Reference!/);
    await ui.shot('images-02-bad-reference');
    await bad.getByRole('button', { name: 'Cancel' }).click();

    // A loopback port nothing listens on: refused at once.
    const nobody = `127.0.0.1:${await freePort()}`;
    const away = await pullInDialog(`${nobody}/smol-e2e/app:v1`);
    const awayAlert = away.getByRole('alert');
    await visible(awayAlert);
    expect(await awayAlert.innerText()).toMatch(new RegExp(`^cannot reach the registry ${nobody} .*ECONNREFUSED`));
    await ui.shot('images-03-registry-unreachable');
    await away.getByRole('button', { name: 'Cancel' }).click();
    expect(await images()).toEqual([]);
  });

  step('pulls with a bar per layer, and the image lands in the list', async () => {
    const { page } = ui;
    const dialog = await pullInDialog(app());
    const bars = dialog.getByRole('status', { name: 'Pull progress' }).locator('progress');
    // The engine reports each of the three layers; the dialog shows them until the pull answers.
    await until(
      'three layer bars',
      () => bars.count(),
      (n) => n === 3,
    );
    await ui.shot('images-04-pulling');
    const row = page.getByRole('row', { name: `Image ${registry.host}/smol-e2e/app:v1` });
    await visible(row);
    expect(await dialog.isVisible()).toBe(false);
    await visible(page.getByRole('status').filter({ hasText: `Pulled ${app()}` }));
    const listed = (await images()).find((i) => i.references?.includes(app()));
    expect(listed).toBeTruthy();
    expect(await row.innerText()).toContain(listed!.digest!.slice(0, 19));
    expect(await row.innerText()).toContain('unused');
    await ui.shot('images-05-pulled');

    const second = await pullInDialog(other());
    await visible(page.getByRole('row', { name: `Image ${registry.host}/smol-e2e/other:v1` }));
    expect(await second.isVisible()).toBe(false);
  });

  step('refuses to remove the image a VM’s disk sits on, saying what needs it', async () => {
    const { page } = ui;
    const home = (await ui.engine.api.call('health')).home;
    const image = (await images()).find((i) => i.references?.includes(app()))!;
    const base = await adoptBaseImage(home, image.file);
    const layer = newLayerName();
    guest = await startGuest('echo', { disk: { base, top: path.join(home, 'disks', layer) } });
    await page.getByRole('button', { name: 'Refresh' }).click();
    const row = page.getByRole('row', { name: `Image ${registry.host}/smol-e2e/app:v1` });
    await until(
      'the row in use',
      () => row.innerText(),
      (text) => text.includes('in use'),
    );
    expect(await row.innerText()).toContain(layer);
    await row.getByRole('button', { name: /^Remove / }).click();
    const dialog = page.getByRole('dialog', { name: `Remove image ${registry.host}/smol-e2e/app:v1` });
    await dialog.getByRole('button', { name: 'Remove', exact: true }).click();
    const alert = dialog.getByRole('alert');
    await visible(alert);
    expect(await alert.innerText()).toBe(
      `${image.name} is needed by a VM's disk layer ${layer}: delete it first, or remove it anyway with force=true ` +
        '(the engine keeps its copy until prune finds it unused)',
    );
    await ui.shot('images-06-remove-refused');
    await dialog.getByRole('button', { name: 'Done' }).click();
    expect(existsSync(image.file)).toBe(true);
    expect((await images()).length).toBe(2);
  });

  step('prune says what it will free, frees the other image, and keeps the one in use', async () => {
    const { page } = ui;
    const otherImage = (await images()).find((i) => i.references?.includes(other()))!;
    await page.getByRole('button', { name: 'Prune…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Prune images' });
    const plan = dialog.getByRole('status', { name: 'Will free' });
    await visible(plan);
    const planned = await plan.innerText();
    expect(planned).toMatch(/^Will free \d+ files?, [\d.]+ (B|KiB|MiB|GiB)/);
    expect(planned).toContain(otherImage.name);
    expect(planned).not.toContain((await images()).find((i) => i.references?.includes(app()))!.name);
    expect(existsSync(otherImage.file)).toBe(true); // nothing freed yet
    await ui.shot('images-07-prune-plan');
    await dialog.getByRole('button', { name: 'Prune', exact: true }).click();
    const freed = dialog.getByRole('status', { name: 'Pruned' });
    await visible(freed);
    expect(await freed.innerText()).toMatch(/^Freed \d+ files?, [\d.]+ (B|KiB|MiB|GiB)\./);
    expect(await freed.innerText()).toContain(otherImage.name);
    await ui.shot('images-08-pruned');
    await dialog.getByRole('button', { name: 'Done' }).click();
    expect(existsSync(otherImage.file)).toBe(false);
    const left = await images();
    expect(left.map((i) => i.references)).toEqual([[app()]]);
    await visible(page.getByRole('row', { name: `Image ${registry.host}/smol-e2e/app:v1` }));
    expect(await page.getByRole('row', { name: `Image ${registry.host}/smol-e2e/other:v1` }).count()).toBe(0);
    await ui.shot('images-09-after-prune');
    expect(ui.pageErrors).toEqual([]);
  });
});
