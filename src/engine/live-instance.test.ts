// One object per live native instance (docs/engine.md, "Live instances"): what it owns goes when it ends, once.
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AgentClient } from '../agent-client/agent-client.js';
import { LiveInstance } from './live-instance.js';
import type { ConsoleHub } from './console-hub.js';
import type { VmHost } from './vmhost.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'smol-live-'));
const host = {} as VmHost; // never called here
const hub = {} as ConsoleHub;

describe('a live instance', () => {
  it('names its VM, and its disk goes on in the layer a checkpoint gave it', () => {
    const live = new LiveInstance('vm-abcdefgh23#7', 'vm-abcdefgh23', host, hub, {
      'virtio-vsock': { path: path.join(dir, 'a.vsock') },
      'virtio-blk': { path: path.join(dir, 'top-1') },
    });
    expect(LiveInstance.vmOf(live.name)).toBe('vm-abcdefgh23');
    expect(live.diskTop).toBe(path.join(dir, 'top-1'));
    live.writes(path.join(dir, 'top-2'));
    expect(live.diskTop).toBe(path.join(dir, 'top-2'));
    expect(live.resources['virtio-blk']).toEqual({ path: path.join(dir, 'top-2') });
  });

  it('removes the disk layer it writes and closes its agent when it ends, once', () => {
    const top = path.join(dir, 'unfrozen');
    writeFileSync(top, 'a layer nobody froze');
    let closed = 0;
    const live = new LiveInstance('vm-abcdefgh23#8', 'vm-abcdefgh23', host, hub, { 'virtio-blk': { path: top } });
    live.agent = {
      client: { close: () => void closed++ } as unknown as AgentClient,
      settled: Promise.resolve(),
      remint: async () => {},
      check: async () => {},
    };
    expect(live.ended).toBe(false);
    live.end();
    live.end();
    expect(live.ended).toBe(true);
    expect(existsSync(top)).toBe(false);
    expect(closed).toBe(1);
    expect(live.agent).toBeUndefined();
  });

  it('has no disk to remove when it has none', () => {
    const live = new LiveInstance('vm-abcdefgh23#9', 'vm-abcdefgh23', host, hub, {});
    expect(live.diskTop).toBeUndefined();
    expect(() => live.end()).not.toThrow();
  });
});
