// Tier 4 (TESTING.md): New episode's Smolfile editor (issue 24, item 6; docs/ui.md, "New episode"), in Debian's
// Chromium against a real engine with the echo tiny guest. An example loads into the editor and checks clean; a
// broken line shows its problem at that line (the gutter and the list) with Start disabled; fixed, Start creates the
// episode from the text, selects it, and its guest echoes on the console. A path on the engine's machine still works.
// Screenshots smolfile-editor.png and smolfile-editor-error.png in test-results/e2e/.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from './ui-engine.js';
import { newEpisode, startUiSession, storySteps, until, visible, type UiSession } from './ui-page.js';

let ui: UiSession;
const step = storySteps(() => ui, it);
beforeAll(async () => {
  ui = await startUiSession();
});
afterAll(async () => {
  await ui?.close();
});

const echoText = readFileSync(path.join(root, 'smolfiles', 'echo.smolfile'), 'utf8');
const memoryLine = echoText.split('\n').findIndex((line) => line.startsWith('memory')) + 1;
const consoleText = () => ui.page.locator('[data-testid=console] .xterm-rows').innerText();

describe('New episode’s Smolfile editor', { timeout: 180_000 }, () => {
  const dialog = () => ui.page.getByRole('dialog', { name: 'New episode' });
  const editor = () => dialog().getByLabel('Smolfile text');
  const problems = () => dialog().getByRole('status', { name: 'Smolfile problems' });
  const start = () => dialog().getByRole('button', { name: 'Start episode' });
  const gutterLine = (line: number) =>
    dialog()
      .locator('.gutter-line')
      .nth(line - 1);

  step('an example loads into the editor and checks clean', async () => {
    const { page } = ui;
    await page.goto(ui.engine.url);
    await visible(page.getByText('connected', { exact: true }));
    await page.getByRole('button', { name: 'New episode' }).first().click();
    await dialog().getByRole('tab', { name: 'Write a Smolfile' }).click();
    await until(
      'the examples in the menu',
      () => dialog().getByLabel('Load an example').locator('option').allInnerTexts(),
      (names) => names.includes('echo.smolfile'),
    );
    await dialog().getByLabel('Load an example').selectOption({ label: 'echo.smolfile' });
    expect(await editor().inputValue()).toBe(echoText);
    // Its relative kernel path starts from the examples' folder on the engine's machine.
    expect(await dialog().getByLabel('Relative paths start from').inputValue()).toBe(path.join(root, 'smolfiles'));
    await visible(problems().getByText('No problems: ready to start.'));
    expect(await start().isEnabled()).toBe(true);
  });

  step('a broken line shows its problem at that line, and Start is disabled', async () => {
    await editor().fill(echoText.replace(/^memory = 16/m, 'memory = "lots"'));
    const problem = problems().getByRole('listitem');
    await visible(problem);
    expect(await problem.innerText()).toMatch(new RegExp(`^Line ${memoryLine} error: \`memory\`: expected`));
    expect(await gutterLine(memoryLine).getAttribute('class')).toContain('error');
    expect(await gutterLine(memoryLine - 1).getAttribute('class')).not.toContain('error');
    expect(await start().isDisabled()).toBe(true);
    await visible(problems().getByText('1 error: fix it to start.'));
    await ui.shot('smolfile-editor-error');
    // A relative path with no folder to start from is refused at its line too.
    await dialog().getByLabel('Relative paths start from').fill('');
    await editor().fill(echoText);
    const kernelLine = echoText.split('\n').findIndex((line) => line.startsWith('kernel')) + 1;
    await until(
      'the relative kernel refused',
      () => problems().innerText(),
      (text) => text.includes(`Line ${kernelLine} error: \`kernel\``) && text.includes('is a relative path'),
    );
    expect(await start().isDisabled()).toBe(true);
  });

  step('fixed, Start creates the episode from the text, selects it, and its guest runs', async () => {
    const { page } = ui;
    await dialog().getByLabel('Relative paths start from').fill(path.join(root, 'smolfiles'));
    await editor().fill(echoText);
    await visible(problems().getByText('No problems: ready to start.'));
    await dialog().getByLabel('Episode name').fill('from-the-editor');
    expect(await gutterLine(memoryLine).getAttribute('class')).not.toContain('error');
    await ui.shot('smolfile-editor');
    await start().click();
    await visible(page.getByRole('heading', { level: 2, name: 'from-the-editor' }));
    expect(await dialog().count()).toBe(0);
    const [episode] = await until(
      'the episode',
      () => ui.episodes(),
      (list) => list.length === 1,
    );
    expect(episode!.smolfile).toMatchObject({ text: echoText, given: 'text' });
    await visible(page.getByRole('tab', { name: `VM ${episode!.vms[0]!.name}` }));
    await until('the echo guest’s banner', consoleText, (text) => text.includes('echo: ready'));
    await page.locator('[data-testid=console]').click();
    await page.keyboard.type('typed-after-the-editor');
    await until('the echo', consoleText, (text) => text.includes('typed-after-the-editor'));
  });

  step('a path on the engine’s machine still starts an episode', async () => {
    await ui.page.goto(ui.engine.url); // back to the list, where New episode is
    await visible(ui.page.getByText('connected', { exact: true }));
    const episode = await newEpisode(ui, ui.smolfile('by-path', 'echo'));
    expect(episode.smolfile.given).toBeUndefined();
    expect(episode.name).toMatch(/^by-path/);
  });
});
