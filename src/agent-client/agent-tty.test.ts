// Terminals through the agent (docs/agent.md, "Terminals"): EXEC with TTY gives the process a pseudo-terminal as its
// controlling terminal, RESIZE changes its size, and Ctrl-C typed into it reaches the shell's foreground job. The
// real agent's code, run on this host with ASan and UBSan (so a stray read in the new paths fails the test), and a
// real bash with job control.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { AgentClient, AgentError, type AgentProcess } from './agent-client.js';
import { encodeFields, encodeFrame, Field, Fields, FrameParser, FrameType, type Frame } from './agent-protocol.js';
import { AGENT_ASAN_BINARY, startHostAgent, type HostAgent } from './host-agent.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-agent-tty-'));
let agent: HostAgent;
let client: AgentClient;

beforeAll(async () => {
  const make = spawnSync('make', ['-C', path.join(packageRoot, 'native'), 'agent'], { encoding: 'utf8' });
  if (make.status !== 0) throw new Error(`make -C native agent failed:\n${make.stdout}${make.stderr}`);
  agent = startHostAgent(dir, { binary: AGENT_ASAN_BINARY });
  client = new AgentClient({ socketPath: agent.socketPath });
  await client.ready();
}, 60_000);

afterAll(async () => {
  client?.close();
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Keys typed into a terminal, as the process's stdin: chunks as they are typed. */
class Keys implements AsyncIterable<Uint8Array> {
  readonly #chunks: Uint8Array[] = [];
  #wake: (() => void) | null = null;

  type(text: string): void {
    this.#chunks.push(Buffer.from(text));
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    for (;;) {
      const chunk = this.#chunks.shift();
      if (chunk) yield chunk;
      else await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }
}

/** An interactive bash on a terminal of the agent's, its screen's bytes collected. */
function openShell(size = { rows: 24, cols: 80 }) {
  const keys = new Keys();
  let screen = '';
  const shell: AgentProcess = client.spawn(['bash', '--norc', '--noprofile', '-i'], {
    env: { PS1: 'PROMPT$ ', TERM: 'xterm' },
    tty: size,
    stdin: keys,
    onStdout: (chunk) => (screen += chunk.toString()),
  });
  shell.result.catch(() => undefined); // a test that fails leaves it to the client's close
  const since = { at: 0 };
  /** Waits for `pattern` in what the terminal showed since the last wait that matched. */
  const expectScreen = async (pattern: RegExp, timeoutMs = 8000): Promise<RegExpMatchArray> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = screen.slice(since.at).match(pattern);
      if (match) {
        since.at += (match.index ?? 0) + match[0].length;
        return match;
      }
      if (Date.now() > deadline) throw new Error(`no ${pattern} on the terminal; it shows:\n${screen.slice(since.at)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  return { shell, keys, expectScreen, screen: () => screen };
}

/** Time for the shell to start what was typed (its job becomes the terminal's foreground group). */
const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

describe('agent terminals', { timeout: 30_000 }, () => {
  it('HELLO offers exec-tty', () => {
    expect(client.hello.features).toContain('exec-tty');
  });

  it('tty names a /dev/pts terminal, the controlling one, and output and errors both come through it', async () => {
    const result = await client.exec(['sh', '-c', 'tty; echo to-err >&2; ps -o tty= -p $$'], {
      tty: { rows: 24, cols: 80 },
    });
    const lines = result.stdout.toString().split('\r\n');
    expect(lines[0]).toMatch(/^\/dev\/pts\/\d+$/);
    expect(lines[1]).toBe('to-err');
    expect(`/dev/${lines[2]!.trim()}`).toBe(lines[0]);
    expect(result.stderr.length).toBe(0);
    expect(result.exitCode).toBe(0);
  });

  it('stty size shows the size asked for, and a resize', async () => {
    const { shell, keys, expectScreen } = openShell({ rows: 30, cols: 100 });
    await expectScreen(/PROMPT\$ /);
    keys.type('stty size\r');
    await expectScreen(/\b30 100\r\n/);
    await shell.resize({ rows: 50, cols: 132 });
    keys.type('stty size\r');
    await expectScreen(/\b50 132\r\n/);
    keys.type('exit 3\r');
    expect(await shell.result).toMatchObject({ exitCode: 3, signal: null });
  });

  it('Ctrl-C (0x03) interrupts the foreground job and the shell prompts again', async () => {
    const { shell, keys, expectScreen } = openShell();
    await expectScreen(/PROMPT\$ /);
    keys.type('sleep 100\r');
    await settle();
    keys.type('\x03');
    await expectScreen(/\^C/);
    await expectScreen(/PROMPT\$ /, 5000);
    keys.type('echo status $?\r');
    await expectScreen(/\bstatus 130\r\n/);
    keys.type('exit 3\r');
    expect(await shell.result).toMatchObject({ exitCode: 3, signal: null });
  });

  it('job control works: Ctrl-Z stops a job, fg brings it back', async () => {
    const { shell, keys, expectScreen } = openShell();
    await expectScreen(/PROMPT\$ /);
    keys.type('sleep 100\r');
    await settle();
    keys.type('\x1a');
    await expectScreen(/Stopped\s+sleep 100/);
    keys.type('jobs\r');
    await expectScreen(/\[1\]\+\s+Stopped\s+sleep 100/);
    keys.type('fg\r');
    await expectScreen(/\bsleep 100\r\n/);
    await settle();
    keys.type('\x03');
    await expectScreen(/PROMPT\$ /);
    keys.type('jobs; exit 0\r');
    expect(await shell.result).toMatchObject({ exitCode: 0 });
  });

  it('a signal from the host reaches the foreground job of the terminal', async () => {
    const { shell, keys, expectScreen } = openShell();
    await expectScreen(/PROMPT\$ /);
    keys.type('sleep 100\r');
    await settle();
    await shell.kill('SIGINT');
    await expectScreen(/PROMPT\$ /);
    keys.type('echo status $?\r');
    await expectScreen(/\bstatus 130\r\n/);
    keys.type('exit 5\r');
    expect(await shell.result).toMatchObject({ exitCode: 5 });
  });

  it('absurd sizes and a resize without a terminal are refused, naming what', async () => {
    await expect(client.exec(['true'], { tty: { rows: 0, cols: 80 } })).rejects.toThrow(
      /a terminal of 0 rows and 80 columns \(each must be 1 to 1000\)/,
    );
    await expect(client.exec(['true'], { tty: { rows: 24, cols: 1e9 } })).rejects.toMatchObject({ code: 'EINVAL' });
    const plain = client.spawn(['sleep', '5']);
    await expect(plain.resize({ rows: 24, cols: 80 })).rejects.toThrow(/runs without a terminal/);
    const { shell, keys, expectScreen } = openShell();
    await expectScreen(/PROMPT\$ /);
    await expect(shell.resize({ rows: 24.5, cols: 80 })).rejects.toBeInstanceOf(AgentError);
    await plain.kill('SIGKILL');
    expect(await plain.result).toMatchObject({ signal: 'SIGKILL' });
    keys.type('exit 0\r');
    expect(await shell.result).toMatchObject({ exitCode: 0 });
  });
});

/** A raw connection, to send the agent what the client never would. */
async function rawPeer(): Promise<{ socket: net.Socket; frames: Frame[]; until(done: () => boolean): Promise<void> }> {
  const socket = net.createConnection(agent.socketPath);
  const frames: Frame[] = [];
  const parser = new FrameParser();
  socket.on('data', (chunk: Buffer) => frames.push(...parser.push(chunk)));
  socket.on('error', () => {});
  const until = async (done: () => boolean) => {
    const deadline = Date.now() + 10_000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out; frames: ${JSON.stringify(frames.map((f) => f.type))}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  await until(() => frames.some((f) => f.type === FrameType.HELLO));
  return { socket, frames, until };
}

describe('agent terminals against a raw peer', { timeout: 30_000 }, () => {
  it('refuses absurd sizes and resizes of what has no terminal; the agent goes on', async () => {
    const peer = await rawPeer();
    const send = (type: number, id: number, fields: [number, number | string][]) =>
      peer.socket.write(encodeFrame(type, id, encodeFields(fields)));
    send(FrameType.EXEC, 1, [
      [Field.ARGV, 'true'],
      [Field.TTY, 1],
      [Field.ROWS, 70000],
    ]);
    send(FrameType.EXEC, 2, [
      [Field.ARGV, 'sleep'],
      [Field.ARGV, '5'],
    ]);
    send(FrameType.RESIZE, 2, [
      [Field.ROWS, 24],
      [Field.COLS, 80],
    ]);
    send(FrameType.EXEC, 3, [
      [Field.ARGV, 'sleep'],
      [Field.ARGV, '5'],
      [Field.TTY, 1],
    ]);
    send(FrameType.RESIZE, 3, [[Field.ROWS, 24]]);
    send(FrameType.RESIZE, 3, [
      [Field.ROWS, 0xffffffff],
      [Field.COLS, 80],
    ]);
    send(FrameType.RESIZE, 9, [
      [Field.ROWS, 24],
      [Field.COLS, 80],
    ]);
    const errors = (id: number) =>
      peer.frames.filter((f) => f.type === FrameType.ERROR && f.id === id).map((f) => new Fields(f.payload));
    await peer.until(() => [1, 2, 9].every((id) => errors(id).length) && errors(3).length === 2);
    expect(errors(1)[0]!.str(Field.MESSAGE)).toBe('EXEC: a terminal of 70000 rows and 80 columns (1 to 1000 each)');
    expect(errors(2)[0]!.str(Field.ERRNAME)).toBe('ENOTTY');
    expect(errors(2)[0]!.str(Field.MESSAGE)).toBe('RESIZE: request 2 runs without a terminal (EXEC had no TTY)');
    expect(errors(3).map((e) => e.str(Field.MESSAGE))).toEqual([
      'RESIZE: 24 rows and 0 columns (1 to 1000 each)',
      'RESIZE: 4294967295 rows and 80 columns (1 to 1000 each)',
    ]);
    expect(errors(9)[0]!.str(Field.ERRNAME)).toBe('ESRCH');
    // Hanging up mid-session kills the terminal's processes; the agent takes the next connection.
    peer.socket.destroy();
    const again = new AgentClient({ socketPath: agent.socketPath });
    await again.ready();
    expect((await again.exec(['echo', 'still here'], { tty: { rows: 5, cols: 20 } })).stdout.toString()).toBe(
      'still here\r\n',
    );
    again.close();
    await client.ready(); // the suite's client was replaced by these connections
    expect(agent.process.exitCode).toBe(null);
  });
});
