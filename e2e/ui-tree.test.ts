// Tier 4 (TESTING.md): a fork tree that holds still, in Debian's Chromium against a real engine. The count guest's
// episode checkpoints itself every 2 s, so the tree grows while the person looks at it: after they zoom, new
// snapshots never move the view; Fit fits the whole tree; a named checkpoint is never folded into "+N snapshots";
// automatic checkpoints can be hidden; the tree pane can be maximised and resized.
import { describe, expect } from 'vitest';
import { newEpisode, sleep, type UiSession, uiStory, until, visible } from './ui-page.js';

let ui: UiSession;
const step = uiStory((s) => (ui = s));

describe('the fork tree', () => {
  let episodeId = '';
  const autos = async () => (await ui.snapshots(episodeId)).filter((s) => s.kind === 'auto').length;
  const viewport = () => ui.page.locator('.react-flow__viewport').getAttribute('style');
  const paneHeight = async () => (await ui.page.locator('.tree-pane').boundingBox())!.height;
  /** Waits until the tree's view stands still (a fit animates for a moment). */
  const settled = async () => {
    let last = await viewport();
    for (let i = 0; i < 30; i++) {
      await sleep(300);
      const now = await viewport();
      if (now === last) return now;
      last = now;
    }
    return last;
  };

  step('grows by itself: a named checkpoint among automatic ones stays in view, the automatic ones fold', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    const file = ui.smolfile('growing', 'count', 'cmdline = "hz=4"\n[snapshots]\nauto_checkpoint = "2s"\nkeep = 100');
    episodeId = (await newEpisode(ui, file)).id;
    await until('two automatic checkpoints', autos, (n) => n >= 2);
    await page.getByRole('button', { name: 'Checkpoint…' }).click();
    await page.getByLabel('Checkpoint name').fill('keep-me');
    await page.getByRole('button', { name: 'Save checkpoint' }).click();
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    const before = await autos();
    await until('six more automatic checkpoints', autos, (n) => n >= before + 6, 60_000);
    await visible(page.getByRole('treeitem', { name: /snapshots from .* collapsed$/ }).first());
    await visible(page.getByRole('treeitem', { name: /^Snapshot keep-me/ }));
    await ui.shot('tree-01-named-checkpoint-never-folded');
  });

  step('after the user zooms, new snapshots never move the view', async () => {
    const { page } = ui;
    // The chain opened, each new checkpoint is a card of its own: the tree gains a card every 2 s.
    await page
      .getByRole('treeitem', { name: /snapshots from .* collapsed$/ })
      .first()
      .click();
    await until(
      'the chain open',
      () => page.getByRole('treeitem', { name: /collapsed$/ }).count(),
      (n) => n === 0,
    );
    await settled();
    const tree = page.locator('.react-flow');
    const box = (await tree.boundingBox())!;
    await page.mouse.move(box.x + box.width / 3, box.y + box.height / 2);
    await page.mouse.wheel(0, -300); // zoom in where the pointer is
    const zoomed = await settled();
    // Two more cards in the tree (the open chain keeps growing; cards out of view are not drawn, so counted here).
    const count = await autos();
    await until('two more automatic checkpoints', autos, (n) => n >= count + 2, 30_000);
    await sleep(1000); // past the tree's refit delay and animation
    expect(await viewport()).toBe(zoomed);
    await ui.shot('tree-02-zoom-kept-across-new-snapshots');
  });

  step('Fit fits the whole tree, and keeps it fitted as it grows', async () => {
    const { page } = ui;
    const total = (await ui.snapshots(episodeId)).length;
    await page.getByRole('button', { name: 'Fit the tree' }).click();
    await settled();
    const pane = (await page.locator('.react-flow').boundingBox())!;
    const cards = await page.locator('.react-flow__node').evaluateAll((nodes) =>
      nodes.map((node) => {
        const r = node.getBoundingClientRect();
        return { left: r.left, right: r.right, top: r.top, bottom: r.bottom };
      }),
    );
    // Every snapshot is a card in view (cards out of view are not drawn at all).
    expect(cards.length).toBeGreaterThanOrEqual(total);
    for (const card of cards) {
      expect(card.left).toBeGreaterThanOrEqual(pane.x - 1);
      expect(card.right).toBeLessThanOrEqual(pane.x + pane.width + 1);
      expect(card.top).toBeGreaterThanOrEqual(pane.y - 1);
      expect(card.bottom).toBeLessThanOrEqual(pane.y + pane.height + 1);
    }
    await ui.shot('tree-03-fit');
    // It stays fitted as it grows.
    const count = await autos();
    await until('another automatic checkpoint', autos, (n) => n > count, 30_000);
    await sleep(1000);
    await settled();
    expect(await page.locator('.react-flow__node').count()).toBeGreaterThanOrEqual(total + 1);
  });

  step('hides automatic checkpoints on request, but not the one the VM is on', async () => {
    const { page } = ui;
    await page.getByRole('checkbox', { name: 'Automatic checkpoints' }).uncheck();
    await until(
      'only the VM’s automatic checkpoint left',
      () => page.getByRole('treeitem', { name: /^Snapshot auto-\d+/ }).count(),
      (n) => n <= 1,
    );
    expect(await page.getByRole('treeitem', { name: /collapsed$/ }).count()).toBe(0);
    await visible(page.getByRole('treeitem', { name: /^Snapshot keep-me/ }));
    await ui.shot('tree-04-automatic-hidden');
    await page.getByRole('checkbox', { name: 'Automatic checkpoints' }).check();
    await until(
      'the automatic checkpoints back',
      () => page.getByRole('treeitem', { name: /^Snapshot auto-\d+/ }).count(),
      (n) => n > 2,
    );
  });

  step('the tree pane can be maximised and resized', async () => {
    const { page } = ui;
    const normal = await paneHeight();
    await page.getByRole('button', { name: 'Maximise tree' }).click();
    expect(await paneHeight()).toBeGreaterThan(normal + 200);
    await ui.shot('tree-05-maximised');
    await page.getByRole('button', { name: 'Restore size' }).click();
    expect(Math.abs((await paneHeight()) - normal)).toBeLessThan(2);
    const bar = (await page.getByRole('separator', { name: 'Resize the tree and the console' }).boundingBox())!;
    await page.mouse.move(bar.x + bar.width / 2, bar.y + bar.height / 2);
    await page.mouse.down();
    await page.mouse.move(bar.x + bar.width / 2, bar.y + 150, { steps: 5 });
    await page.mouse.up();
    expect(await paneHeight()).toBeGreaterThan(normal + 100);
    await ui.shot('tree-06-resized');
    expect(ui.pageErrors).toEqual([]);
  });
});
