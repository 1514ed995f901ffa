// The engine-side launcher of utility-process vmhosts, over ports that behave like Electron's (an event with
// `data` and `ports`, `start()`, 'close'): the message routing is what is under test, so a pair of in-memory ports
// joined to each other stands in for MessageChannelMain.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { portChannel, type PortLike } from '../../src/engine/vmhost-parent.js';
import type { HostMessageIn, HostMessageOut } from '../../src/engine/vmhost-protocol.js';
import type { EngineToMain } from './engine-host-protocol.js';
import { utilityVmHostLauncher, type EngineParentPort } from './utility-vmhost.js';

class Port extends EventEmitter implements PortLike {
  other: Port | null = null;
  started = false;
  postMessage(message: unknown): void {
    const other = this.other!;
    queueMicrotask(() => other.emit('message', { data: structuredClone(message), ports: [] }));
  }
  start(): void {
    this.started = true;
  }
  close(): void {
    this.emit('close');
    this.other?.emit('close');
  }
}
function channel(): [Port, Port] {
  const a = new Port();
  const b = new Port();
  a.other = b;
  b.other = a;
  return [a, b];
}

class Parent extends EventEmitter implements EngineParentPort {
  readonly toMain: EngineToMain[] = [];
  postMessage(message: EngineToMain): void {
    this.toMain.push(message);
  }
  deliver(data: unknown, ports: PortLike[] = []): void {
    this.emit('message', { data, ports });
  }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('a vmhost launched through the main process', () => {
  it('asks main for the process, queues requests until its port arrives, then talks over the port', async () => {
    const parent = new Parent();
    const host = utilityVmHostLauncher(parent)('ep-abcdefgh23');
    expect(parent.toMain).toEqual([{ type: 'vmhost-launch', id: 1, label: 'ep-abcdefgh23' }]);
    const sent: (Error | null)[] = [];
    host.send({ seq: 1, op: 'start', args: { vm: 'vm-abcdefgh23' } }, (error) => sent.push(error));
    const [enginePort, vmhostPort] = channel();
    // The vmhost side: its channel gets the port as the first parentPort message.
    const vmhostParent = new EventEmitter();
    const vmhost = portChannel(vmhostParent as never);
    const received: HostMessageIn[] = [];
    vmhost.onMessage((message) => received.push(message));
    vmhost.send({ kind: 'ready', pid: 42 }); // before its port: waits
    vmhostParent.emit('message', { data: { type: 'engine-port' }, ports: [vmhostPort] });
    const replies: HostMessageOut[] = [];
    host.on('message', (message) => replies.push(message));
    parent.deliver({ type: 'vmhost-port', id: 1, pid: 4242 }, [enginePort]);
    await tick();
    expect(host.pid).toBe(4242);
    expect(received).toEqual([{ seq: 1, op: 'start', args: { vm: 'vm-abcdefgh23' } }]);
    expect(replies).toEqual([{ kind: 'ready', pid: 42 }]);
    expect(sent).toEqual([null]);
    vmhost.send({ kind: 'console', vm: 'vm-abcdefgh23', data: new Uint8Array([104, 105]) });
    await tick();
    expect(replies[1]).toEqual({ kind: 'console', vm: 'vm-abcdefgh23', data: new Uint8Array([104, 105]) });
  });

  it('reports the exit main saw, and fails requests sent after it', async () => {
    const parent = new Parent();
    const host = utilityVmHostLauncher(parent)('ep-abcdefgh23');
    const exits: (number | null)[] = [];
    host.on('exit', (code) => exits.push(code));
    expect(host.kill()).toBe(true);
    expect(parent.toMain[1]).toEqual({ type: 'vmhost-kill', id: 1 });
    parent.deliver({ type: 'vmhost-exit', id: 1, code: 9 });
    expect(exits).toEqual([9]);
    expect(host.exitCode).toBe(9);
    const error = await new Promise<Error | null>((resolve) =>
      host.send({ seq: 2, op: 'kill', args: { vm: 'vm-x' } }, resolve),
    );
    expect(error?.message).toMatch(/exited/);
    expect(host.kill()).toBe(false);
  });

  it('ends the vmhost when the engine side of its port closes', () => {
    const [enginePort, vmhostPort] = channel();
    const vmhostParent = new EventEmitter();
    const vmhost = portChannel(vmhostParent as never);
    let gone = false;
    vmhost.onGone(() => (gone = true));
    vmhostParent.emit('message', { data: {}, ports: [vmhostPort] });
    expect(vmhostPort.started).toBe(true);
    enginePort.close();
    expect(gone).toBe(true);
  });
});
