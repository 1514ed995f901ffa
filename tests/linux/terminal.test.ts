// Tier 3: a terminal in the Linux guest through the engine (docs/agent.md, "Terminals"): the SDK's terminal() and
// `smol exec -t` run a shell on a pseudo-terminal of the agent's: `tty` names /dev/pts/N, `stty size` follows a
// resize, Ctrl-C (0x03) interrupts `sleep 100` and the shell prompts again, `exit 3` is status 3; absurd sizes and a
// resize of a command without a terminal are refused with what is wrong, and a client that hangs up mid-session
// leaves nothing running.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol, Terminal } from '../../sdk/typescript/smol.js';
import { EngineHome, root } from '../engine/engine-home.js';

const home = new EngineHome();
afterAll(() => home.destroy(), 180_000);
const shell = path.join(root, 'smolfiles', 'shell.smolfile');

/** `smol ARGS` against this test's engine: its status and output (stdin and stdout are pipes, not terminals). */
function smolCli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(root, 'bin', 'smol.js'), ...args], {
      env: { ...process.env, SMOL_HOME: home.dir },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** A shell on a terminal in the guest, with what it shows collected and a way to wait for text on it. */
function openShell(smol: Smol, vm: string, size = { rows: 24, cols: 80 }) {
  let screen = '';
  let seen = 0;
  const terminal: Terminal = smol.terminal(vm, ['sh'], {
    ...size,
    env: { PS1: 'PROMPT$ ' },
    onData: (chunk) => (screen += chunk.toString()),
  });
  let failed: Error | null = null;
  terminal.exit.catch((error: Error) => (failed = error)); // said by expectScreen
  const expectScreen = async (pattern: RegExp, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = screen.slice(seen).match(pattern);
      if (match) {
        seen += (match.index ?? 0) + match[0].length;
        return match;
      }
      if (failed)
        throw new Error(`the terminal ended: ${(failed as Error).message}; it showed:\n${screen.slice(seen)}`);
      if (Date.now() > deadline) throw new Error(`no ${pattern} on the terminal; it shows:\n${screen.slice(seen)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  return { terminal, expectScreen };
}

const settle = (ms = 1500) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a terminal in the Linux guest', () => {
  let smol: Smol;
  let vm: string;

  beforeAll(async () => {
    smol = await home.client();
    vm = (await smol.up(shell, { name: 'terminal' })).vm.id;
  }, 600_000);

  it('tty is /dev/pts/N, stty size follows a resize, Ctrl-C interrupts sleep 100, exit 3 is status 3', async () => {
    const { terminal, expectScreen } = openShell(smol, vm, { rows: 30, cols: 100 });
    await expectScreen(/PROMPT\$ /);
    terminal.write('tty\r');
    await expectScreen(/\/dev\/pts\/\d+\r\n/);
    terminal.write('stty size\r');
    await expectScreen(/\b30 100\r\n/);
    terminal.resize(50, 132);
    await settle(500);
    terminal.write('stty size\r');
    await expectScreen(/\b50 132\r\n/);
    terminal.write('sleep 100\r');
    await settle();
    terminal.write('\x03');
    await expectScreen(/PROMPT\$ /, 20_000); // long before sleep's 100 s
    terminal.write('echo status $?\r');
    await expectScreen(/\bstatus 130\r\n/);
    terminal.write('exit 3\r');
    expect(await terminal.exit).toMatchObject({ exitCode: 3, signal: null, timedOut: false });
  }, 300_000);

  it('smol exec -t runs on a terminal and exits with the status', async () => {
    const result = await smolCli(['exec', '-t', vm, '--', 'sh', '-c', 'tty; stty size; echo $TERM; exit 3']);
    expect(result.stdout, result.stderr).toMatch(/^\/dev\/pts\/\d+\r\n24 80\r\n\S+\r\n$/);
    expect(result.status).toBe(3);
  }, 300_000);

  it('absurd sizes and a resize without a terminal are refused, and a dropped session leaves nothing running', async () => {
    const huge = await smolCli(['exec', vm, '--', 'true']);
    expect(huge.status).toBe(0);
    await expect(smol.api.exec(vm, { argv: ['true'], tty: { rows: 5000, cols: 80 } }, quiet()).exit).rejects.toThrow(
      /rows.*1000|1000.*rows/,
    );
    const plain = smol.api.exec(vm, { argv: ['sleep', '1'] }, quiet());
    expect(() => plain.resize({ rows: 24, cols: 80 })).toThrow(/no terminal/);
    await plain.exit;
    const { terminal, expectScreen } = openShell(smol, vm);
    await expectScreen(/PROMPT\$ /);
    expect(() => terminal.resize(0, 80)).toThrow(/0 rows and 80 columns/);
    terminal.write('sleep 1234\r');
    await settle();
    terminal.close(); // the client hangs up: the shell and its job get SIGHUP and end
    await settle(3000);
    const left = await smol.exec(vm, ['sh', '-c', 'ps | grep -c "[s]leep 1234" || true']);
    expect(left.stdout.toString().trim()).toBe('0');
    const again = openShell(smol, vm);
    await again.expectScreen(/PROMPT\$ /);
    again.terminal.write('exit 0\r');
    expect(await again.terminal.exit).toMatchObject({ exitCode: 0 });
  }, 300_000);
});

function quiet() {
  return { onStdout: () => undefined, onStderr: () => undefined };
}
