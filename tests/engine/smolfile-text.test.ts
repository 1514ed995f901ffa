// Tier 2, end to end: a Smolfile given as text (the app's editor; docs/smolfile.md, "A Smolfile as text") is checked
// with every problem at its line, and starts an episode whose relative paths start from the directory given, on a
// real engine with the tiny echo guest.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import { ApiClientError } from '../../src/api/api-client.js';
import { EngineHome, root } from './engine-home.js';

const examples = path.join(root, 'smolfiles');
const echoText = readFileSync(path.join(examples, 'echo.smolfile'), 'utf8');
const home = new EngineHome();
let smol: Smol;
beforeAll(async () => {
  smol = await home.client();
});
afterAll(() => home.destroy(), 120_000);

/** The error the engine answered with. */
async function refusal(promise: Promise<unknown>): Promise<ApiClientError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiClientError);
  return error as ApiClientError;
}

describe('a Smolfile given as text', () => {
  it('an example checks clean against its own folder', async () => {
    const answer = await smol.checkSmolfile(echoText, { directory: examples });
    expect(answer).toEqual({ ok: true, problems: [] });
  });

  it('a broken line is an error at that line, with the key named', async () => {
    const lines = echoText.split('\n');
    const at = lines.findIndex((line) => line.startsWith('cpus'));
    lines[at] = 'cpuss = 1';
    const answer = await smol.checkSmolfile(lines.join('\n'), { directory: examples });
    expect(answer.ok).toBe(false);
    expect(answer.problems).toEqual([
      expect.objectContaining({ severity: 'error', key: 'cpuss', line: at + 1, column: 1 }),
    ]);
    expect(answer.problems[0]!.message).toContain('did you mean `cpus`?');
  });

  it('a TOML syntax error names its line', async () => {
    const answer = await smol.checkSmolfile('cpus = 1\nmemory = = 16\n');
    expect(answer.ok).toBe(false);
    expect(answer.problems[0]).toMatchObject({ severity: 'error', line: 2 });
    expect(answer.problems[0]!.message).toMatch(/^TOML syntax error/);
  });

  it('without a directory a relative path is refused at its line; an absolute one is fine', async () => {
    const relative = await smol.checkSmolfile('# pasted\nkernel = "../native/out/guests/echo.elf"\n');
    expect(relative.ok).toBe(false);
    expect(relative.problems).toEqual([expect.objectContaining({ key: 'kernel', line: 2 })]);
    expect(relative.problems[0]!.message).toContain('is a relative path, and this Smolfile was given as text');
    const volume = await smol.checkSmolfile('volumes = ["data:/data"]\n');
    expect(volume.problems).toEqual([expect.objectContaining({ key: 'volumes[0]', line: 1 })]);
    expect(volume.problems[0]!.message).toContain('is a relative path');
    const absolute = path.join(root, 'native/out/guests/echo.elf');
    expect(await smol.checkSmolfile(`kernel = "${absolute}"\nmemory = 16\n`)).toEqual({ ok: true, problems: [] });
  });

  it('a directory that is not absolute, text with a path, or a directory without text are refused', async () => {
    const notAbsolute = await refusal(smol.checkSmolfile(echoText, { directory: 'smolfiles' }));
    expect(notAbsolute.status).toBe(400);
    expect(notAbsolute.message).toContain('absolute');
    const both = await refusal(
      smol.api.call('createEpisode', { body: { smolfile: path.join(examples, 'echo.smolfile'), text: echoText } }),
    );
    expect(both.status).toBe(400);
    expect(both.message).toContain('either smolfile');
    const stray = await refusal(
      smol.api.call('createEpisode', { body: { smolfile: path.join(examples, 'echo.smolfile'), directory: '/' } }),
    );
    expect(stray.message).toContain('directory goes with text');
  });

  it('up with broken text is refused with the line, and starts nothing', async () => {
    const before = (await smol.episodes()).length;
    const error = await refusal(
      smol.upText(echoText.replace('memory = 16', 'memory = "lots"'), { directory: examples }),
    );
    expect(error.status).toBe(400);
    const line = echoText.split('\n').findIndex((l) => l.startsWith('memory')) + 1;
    expect(error.message).toContain(`the Smolfile text:${line}:`);
    expect((await smol.episodes()).length).toBe(before);
  });

  it('up with an example’s text runs its guest, keeps the text, and reset boots it again from the text', async () => {
    const { episode, vm } = await smol.upText(echoText, { directory: examples });
    expect(episode.name).toMatch(/^pasted(-\d+)?$/);
    expect(episode.smolfile).toEqual({ path: path.join(examples, 'pasted.smolfile'), text: echoText, given: 'text' });
    const echoed = smol.waitForOutput(vm.id, /typed-into-text/, 60_000);
    await smol.write(vm.id, 'typed-into-text');
    await echoed;
    // No file is behind it: reset reads the text the episode keeps.
    const reset = await smol.reset(vm.id);
    expect(reset.state).toBe('running');
    const again = smol.waitForOutput(vm.id, /after-text-reset/, 60_000);
    await smol.write(vm.id, 'after-text-reset');
    await again;
    await smol.destroy(episode.id);
  });
});
