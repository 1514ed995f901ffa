// The agent against hostile and broken peers (raw sockets writing bad frames), connections that drop, the vsock
// muxer's CONNECT handshake, a failing init, and poweroff. The real agent's code, run on this host, built with ASan
// and UBSan: a stray read or a leak that the static build might survive ends this one (and fails its test).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { AgentClient } from './agent-client.js';
import { encodeFields, encodeFrame, Field, Fields, FrameParser, FrameType, type Frame } from './agent-protocol.js';
import { AGENT_ASAN_BINARY, startHostAgent, type HostAgent } from './host-agent.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'smol-agent-robust-'));
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(() => {
  const make = spawnSync('make', ['-C', path.join(packageRoot, 'native'), 'agent'], { encoding: 'utf8' });
  if (make.status !== 0) throw new Error(`make -C native agent failed:\n${make.stdout}${make.stderr}`);
}, 60_000);

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

let count = 0;
function newAgent(): HostAgent {
  const dir = path.join(root, `agent-${++count}`);
  rmSync(dir, { recursive: true, force: true });
  spawnSync('mkdir', ['-p', dir]);
  const agent = startHostAgent(dir, { binary: AGENT_ASAN_BINARY });
  cleanups.push(() => agent.stop());
  return agent;
}

async function readyClient(agent: HostAgent, vsockPort?: number, socketPath = agent.socketPath): Promise<AgentClient> {
  const client = new AgentClient({ socketPath, vsockPort });
  cleanups.push(() => client.close());
  await client.ready();
  return client;
}

/** A raw connection that records every frame the agent sends. */
class RawPeer {
  readonly frames: Frame[] = [];
  closed = false;
  #parser = new FrameParser();
  #waiters: (() => void)[] = [];

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.frames.push(...this.#parser.push(chunk));
      this.#wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.#wake();
    });
    socket.on('error', () => {});
  }

  static async connect(agent: HostAgent): Promise<RawPeer> {
    let socket: net.Socket | null = null;
    for (let tries = 0; !socket; tries++) {
      const attempt = net.createConnection(agent.socketPath);
      try {
        await new Promise((resolve, reject) => attempt.once('connect', resolve).once('error', reject));
        socket = attempt;
      } catch (error) {
        if (tries > 100) throw error; // the agent has not started listening yet: try again
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    const peer = new RawPeer(socket);
    cleanups.push(() => void socket.destroy());
    await peer.until(() => peer.frames.some((f) => f.type === FrameType.HELLO));
    return peer;
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }

  async until(done: () => boolean, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (Date.now() > deadline)
        throw new Error(`timed out; frames: ${JSON.stringify(this.frames.map((f) => f.type))}`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  error(id: number): Fields | undefined {
    const frame = this.frames.find((f) => f.type === FrameType.ERROR && f.id === id);
    return frame && new Fields(frame.payload);
  }
}

function header(len: number, type: number, id: number, flags = 0): Buffer {
  const head = Buffer.alloc(12);
  head.writeUInt32LE(len, 0);
  head.writeUInt16LE(type, 4);
  head.writeUInt16LE(flags, 6);
  head.writeUInt32LE(id, 8);
  return head;
}

describe('hostile frames', () => {
  it('an unknown frame type is answered with an error and the connection goes on', async () => {
    const agent = newAgent();
    const peer = await RawPeer.connect(agent);
    peer.socket.write(encodeFrame(0x7777, 5, Buffer.from('whatever')));
    peer.socket.write(encodeFrame(FrameType.EXEC, 6, encodeFields([[Field.ARGV, 'true']])));
    await peer.until(() => peer.frames.some((f) => f.type === FrameType.EXIT && f.id === 6));
    expect(peer.error(5)?.str(Field.ERRNAME)).toBe('EOPNOTSUPP');
    expect(peer.error(5)?.str(Field.MESSAGE)).toBe('unknown frame type 0x7777 (8 bytes)');
  });

  it('malformed requests are refused, each with its reason', async () => {
    const agent = newAgent();
    const peer = await RawPeer.connect(agent);
    const overrun = Buffer.alloc(10);
    overrun.writeUInt16LE(Field.ARGV, 0);
    overrun.writeUInt32LE(1000, 2); // a field claiming 1000 bytes in a 10-byte payload
    peer.socket.write(encodeFrame(FrameType.EXEC, 1, overrun));
    peer.socket.write(encodeFrame(FrameType.EXEC, 2, encodeFields([[Field.ARGV, 'a\0b']])));
    peer.socket.write(encodeFrame(FrameType.EXEC, 3, Buffer.alloc(0)));
    peer.socket.write(encodeFrame(FrameType.FILE_READ, 4, encodeFields([[Field.PATH, 'etc/passwd']])));
    peer.socket.write(encodeFrame(FrameType.FILE_READ, 12, encodeFields([[Field.PATH, 7]])));
    peer.socket.write(encodeFrame(FrameType.EXEC, 0, encodeFields([[Field.ARGV, 'true']])));
    peer.socket.write(encodeFrame(FrameType.STDOUT, 8, Buffer.from('x')));
    peer.socket.write(encodeFrame(FrameType.STDIN, 9, Buffer.from('x')));
    peer.socket.write(encodeFrame(FrameType.KILL, 10, Buffer.alloc(0)));
    peer.socket.write(
      encodeFrame(
        FrameType.EXEC,
        11,
        encodeFields([
          [Field.ARGV, 'sleep'],
          [Field.ARGV, '5'],
        ]),
      ),
    );
    peer.socket.write(encodeFrame(FrameType.EXEC, 11, encodeFields([[Field.ARGV, 'true']])));
    peer.socket.write(
      encodeFrame(
        FrameType.EXEC,
        13,
        encodeFields([
          [Field.ARGV, 'true'],
          [Field.ENV, ''],
        ]),
      ),
    );
    peer.socket.write(
      encodeFrame(
        FrameType.EXEC,
        14,
        encodeFields([
          [Field.ARGV, 'true'],
          [Field.ENV, '=x'],
        ]),
      ),
    );
    await peer.until(() => [0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14].every((id) => peer.error(id)));
    expect(peer.error(1)?.str(Field.MESSAGE)).toBe('malformed EXEC: a field overruns the frame');
    expect(peer.error(2)?.str(Field.ERRNAME)).toBe('EBADMSG');
    expect(peer.error(3)?.str(Field.MESSAGE)).toBe('EXEC needs at least one argv entry');
    expect(peer.error(4)?.str(Field.MESSAGE)).toBe('FILE_READ needs an absolute path, not etc/passwd');
    expect(peer.error(12)?.str(Field.MESSAGE)).toContain('FILE_READ: malformed request');
    expect(peer.error(0)?.str(Field.MESSAGE)).toBe('EXEC needs a request id other than 0');
    expect(peer.error(8)?.str(Field.MESSAGE)).toBe('STDOUT frames are sent by the agent, not the host');
    expect(peer.error(9)?.str(Field.MESSAGE)).toBe('STDIN for request 9, which takes no such data');
    expect(peer.error(10)?.str(Field.ERRNAME)).toBe('ESRCH');
    expect(peer.error(11)?.str(Field.MESSAGE)).toBe('request id 11 is already in use');
    expect(peer.error(13)?.str(Field.MESSAGE)).toBe("EXEC: env entry '' is not KEY=VALUE"); // found by fuzzing
    expect(peer.error(14)?.str(Field.MESSAGE)).toBe("EXEC: env entry '=x' is not KEY=VALUE");
    expect(peer.closed).toBe(false);
  });

  it('an absurd length closes that connection with a reason; the agent accepts the next one', async () => {
    const agent = newAgent();
    const peer = await RawPeer.connect(agent);
    peer.socket.write(header(0xffffffff, FrameType.EXEC, 1));
    await peer.until(() => peer.closed);
    expect(peer.error(0)?.str(Field.ERRNAME)).toBe('EMSGSIZE');
    expect(peer.error(0)?.str(Field.MESSAGE)).toContain('a frame of 4294967295 bytes exceeds');
    const client = await readyClient(agent);
    expect((await client.exec(['echo', 'still here'])).stdout.toString()).toBe('still here\n');
  });

  it('data beyond the window closes the connection; a truncated frame and garbage do not hurt the agent', async () => {
    const agent = newAgent();
    const peer = await RawPeer.connect(agent);
    peer.socket.write(
      encodeFrame(
        FrameType.EXEC,
        1,
        encodeFields([
          [Field.ARGV, 'cat'],
          [Field.STDIN, 1],
        ]),
      ),
    );
    await peer.until(() => peer.frames.some((f) => f.type === FrameType.STARTED));
    peer.socket.write(encodeFrame(FrameType.STDIN, 1, Buffer.alloc(300 * 1024))); // window is 256 KiB
    await peer.until(() => peer.closed);
    expect(peer.error(0)?.str(Field.MESSAGE)).toContain('exceed its window of 262144');

    const truncated = await RawPeer.connect(agent);
    truncated.socket.end(Buffer.concat([header(100, FrameType.EXEC, 1), Buffer.alloc(40)]));
    await truncated.until(() => truncated.closed);

    // 50 frames of assorted types with junk payloads, each answered with an error (one is a POWEROFF: refused,
    // since its fields overrun).
    const garbage = await RawPeer.connect(agent);
    for (let i = 0; i < 50; i++)
      garbage.socket.write(Buffer.from([i, 0, 0, 0, (i * 7) & 0xff, 0, 0, 0, i, 0, 0, 0, ...Array(i).fill(i)]));
    await garbage.until(() => garbage.frames.filter((f) => f.type === FrameType.ERROR).length === 50);
    expect(garbage.error(48)?.str(Field.MESSAGE)).toBe('malformed POWEROFF: a field overruns the frame');
    garbage.socket.destroy();

    const client = await readyClient(agent);
    expect((await client.exec(['echo', 'alive'])).stdout.toString()).toBe('alive\n');
    expect(agent.log()).toContain('the host hung up in the middle of a frame (52 bytes of it)');
    expect(agent.process.exitCode).toBeNull();
  });
});

/** A small seeded PRNG, so a failing storm can be replayed. */
function prng(seed: number): (n: number) => number {
  return (n) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
}

describe('a storm of random frames', () => {
  it('leaves the agent serving (every request type but POWEROFF and INIT, junk and lying fields)', async () => {
    const agent = newAgent();
    const dir = path.dirname(agent.socketPath);
    const random = prng(20261201);
    const types = Object.values(FrameType).filter((t) => t !== FrameType.POWEROFF && t !== FrameType.INIT);
    const tags = Object.values(Field);
    const strings = ['true', 'echo', 'sleep', '0.01', `${dir}/storm`, '/no/such', 'K=V', '', '=', 'cat'];
    const field = (): Buffer => {
      const tag = tags[random(tags.length)]!;
      const kind = random(3);
      const value =
        kind === 0
          ? encodeFields([[tag, random(2 ** 31)]]).subarray(6)
          : kind === 1
            ? Buffer.from(strings[random(strings.length)]!)
            : Buffer.from(Array.from({ length: random(24) }, () => random(256)));
      const head = Buffer.alloc(6);
      head.writeUInt16LE(tag, 0);
      head.writeUInt32LE(random(16) === 0 ? random(2 ** 31) : value.length, 2); // now and then a lying length
      return Buffer.concat([head, value]);
    };
    for (let round = 0; round < 10; round++) {
      const peer = await RawPeer.connect(agent);
      for (let i = 0; i < 200; i++) {
        const payload = Buffer.concat(Array.from({ length: random(5) }, field));
        peer.socket.write(encodeFrame(types[random(types.length)]!, random(6), payload, random(2)));
      }
      peer.socket.write(encodeFrame(FrameType.EXEC, 1000, encodeFields([[Field.ARGV, 'true']])));
      // Either the agent answered the last request, or it closed the connection over a window violation.
      await peer.until(() => peer.closed || peer.frames.some((f) => f.id === 1000 && f.type !== FrameType.WINDOW));
      peer.socket.destroy();
    }
    const client = await readyClient(agent);
    expect((await client.exec(['echo', 'after the storm'])).stdout.toString()).toBe('after the storm\n');
    expect(agent.process.exitCode).toBeNull();
  }, 60_000);
});

describe('connections', () => {
  it('a dropped connection fails what was in flight, naming it; ready() connects again', async () => {
    const agent = newAgent();
    const client = await readyClient(agent);
    const running = client.exec(['sleep', '30']).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await RawPeer.connect(agent); // the newest connection wins, as after a restore
    expect(await running).toMatchObject({
      code: 'ECONNRESET',
      message: expect.stringContaining('exec sleep 30: the agent at'),
    });
    expect(() => client.exec(['true'])).toThrow(/call ready\(\) to connect again/);
    await client.ready();
    expect((await client.exec(['echo', 'back'])).stdout.toString()).toBe('back\n');
  });

  it('goes through a vsock muxer: CONNECT <port>, OK <host port>, then the protocol', async () => {
    const agent = newAgent();
    const muxerPath = path.join(root, `muxer-${count}.sock`);
    const seen: string[] = [];
    // A stand-in for the VMM's muxer (Firecracker's docs/vsock.md): it answers OK and the HELLO in one write,
    // which the client must split correctly.
    const muxer = net.createServer((host) => {
      host.once('data', (line) => {
        seen.push(line.toString());
        if (line.toString() !== 'CONNECT 52\n') return void host.destroy(); // nothing listens on that port
        const guest = net.createConnection(agent.socketPath);
        guest.on('error', () => host.destroy()); // the agent is not listening yet: the muxer hangs up
        guest.once('data', (hello) => {
          host.write(Buffer.concat([Buffer.from('OK 1073741824\n'), hello]));
          guest.pipe(host);
          host.pipe(guest);
        });
        host.on('close', () => guest.destroy());
        guest.on('close', () => host.destroy());
      });
    });
    await new Promise<void>((resolve) => muxer.listen(muxerPath, resolve));
    cleanups.push(() => new Promise<void>((resolve) => muxer.close(() => resolve())));
    const client = await readyClient(agent, 52, muxerPath);
    expect(client.hello.protocol).toBe(1);
    expect((await client.exec(['echo', 'via muxer'])).stdout.toString()).toBe('via muxer\n');
    expect(seen.length).toBeGreaterThan(0); // more than one when the agent was not listening yet and ready() retried
    expect(new Set(seen)).toEqual(new Set(['CONNECT 52\n']));

    const wrongPort = new AgentClient({ socketPath: muxerPath, vsockPort: 53 });
    await expect(wrongPort.ready({ timeoutMs: 300 })).rejects.toMatchObject({
      code: 'ETIMEDOUT',
      message: expect.stringContaining('nothing listens on guest port 53'),
    });
  });

  it('ready() waits for an agent that starts late, and times out naming the socket when none does', async () => {
    const dir = path.join(root, 'late');
    spawnSync('mkdir', ['-p', dir]);
    const client = new AgentClient({ socketPath: path.join(dir, 'agent.sock') });
    cleanups.push(() => client.close());
    await expect(client.ready({ timeoutMs: 200 })).rejects.toMatchObject({
      code: 'ETIMEDOUT',
      message: expect.stringContaining(`the agent at ${path.join(dir, 'agent.sock')} was not ready within 200 ms`),
    });
    const waiting = client.ready({ timeoutMs: 10_000 });
    setTimeout(() => cleanups.push(startHostAgent(dir, { binary: AGENT_ASAN_BINARY }).stop), 300);
    expect((await waiting).protocol).toBe(1);
  });
});

describe('init failures and poweroff', () => {
  it('init stops at the first failing command and reports it', async () => {
    const agent = newAgent();
    const client = await readyClient(agent);
    const report = await client.initReport(['true', 'echo broke; exit 3', 'echo never']);
    expect(report).toMatchObject({
      state: 'failed',
      alreadyRan: false,
      commands: [
        { command: 'true', exitCode: 0, output: '' },
        { command: 'echo broke; exit 3', exitCode: 3, output: 'broke\n' },
      ],
    });
    client.close();
    const again = await readyClient(agent);
    expect(again.hello.initState).toBe('failed');
  });

  it('init goes on when its connection drops, and the next connection gets its report', async () => {
    const agent = newAgent();
    const first = await readyClient(agent);
    const dropped = first.initReport(['sleep 0.5; echo slow']).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const second = await readyClient(agent); // replaces the first connection, as a restore would
    expect(second.hello.initState).toBe('running');
    const report = await second.initReport(['not run: init is already under way']);
    expect(report).toMatchObject({ state: 'done', commands: [{ command: 'sleep 0.5; echo slow', exitCode: 0 }] });
    expect(report.commands[0]?.output).toBe('slow\n');
    expect(await dropped).toMatchObject({ code: 'ECONNRESET' });
  });

  it('an init command past its timeout is killed and reported as timed out', async () => {
    const agent = newAgent();
    const client = await readyClient(agent);
    const report = await client.initReport(['echo start; sleep 100', 'echo never'], { timeoutMs: 300 });
    expect(report).toMatchObject({
      state: 'failed',
      commands: [{ command: 'echo start; sleep 100', exitCode: null, signal: 9, timedOut: true, output: 'start\n' }],
    });
  });

  it('poweroff outside a guest ends the agent cleanly and removes its socket', async () => {
    const agent = newAgent();
    const client = await readyClient(agent);
    const sleeper = client.exec(['sleep', '30']).catch((error: unknown) => error);
    await client.poweroff();
    expect(await agent.exited).toBe(0);
    expect(await sleeper).toMatchObject({ code: 'ECONNRESET' });
    expect(agent.log()).toContain('poweroff requested: the agent exits');
    expect(spawnSync('test', ['-e', agent.socketPath]).status).toBe(1);
  });
});
