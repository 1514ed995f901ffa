// The layer rules in eslint.config.js (docs/layout.md) fail `npm run lint` on a forbidden import: each case lints a
// one-line file at a real path with the project's own configuration.
import { ESLint } from 'eslint';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const eslint = new ESLint({ cwd: root });

async function problems(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

// Loading the project's ESLint configuration (typescript-eslint) takes seconds on a busy machine.
describe('layers enforced by the linter', { timeout: 60_000 }, () => {
  it('the engine, CLI and SDK may not import Electron', async () => {
    for (const file of ['src/engine/fixture.ts', 'src/cli/fixture.ts', 'sdk/typescript/fixture.ts']) {
      expect(await problems(file, "import { app } from 'electron';\nexport const a = app;\n")).toEqual([
        expect.stringMatching(/^no-restricted-imports: .*no Electron here/),
      ]);
    }
  });

  it('the engine may not import the Electron shell', async () => {
    const code = "import { x } from '../../electron/main/main.js';\nexport const a = x;\n";
    expect(await problems('src/engine/fixture.ts', code)).toEqual([
      expect.stringMatching(/^no-restricted-imports: .*never import the shell/),
    ]);
  });

  it('the renderer may import the API schema but not the engine', async () => {
    const schema = "import type { Vm } from '../../../src/api/schema.js';\nexport type A = Vm;\n";
    expect(await problems('renderer/src/store/fixture.ts', schema)).toEqual([]);
    const operations = "import { OPERATIONS } from '../../../src/api/operations.js';\nexport const a = OPERATIONS;\n";
    expect(await problems('renderer/src/store/fixture.ts', operations)).toEqual([]);
    const engine = "import { Engine } from '../../../src/engine/engine.js';\nexport const a = Engine;\n";
    expect(await problems('renderer/src/store/fixture.ts', engine)).toEqual([
      expect.stringMatching(/^no-restricted-imports: .*only src\/api\/schema\.js, src\/api\/operations\.js/),
    ]);
    const node = "import fs from 'node:fs';\nexport const a = fs;\n";
    expect(await problems('renderer/src/store/fixture.ts', node)).toEqual([
      expect.stringMatching(/^no-restricted-imports: .*browser page/),
    ]);
  });

  it('the Electron shell may import Electron and the engine', async () => {
    const code =
      "import { app } from 'electron';\nimport { x } from '../../src/engine/engine.js';\nexport const a = [app, x];\n";
    expect(await problems('electron/main/fixture.ts', code)).toEqual([]);
  });
});
