// The lab's QEMU command line: a NIC only when ports are forwarded, and then one that reaches nothing outside.
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module without types
import { qemuArgs } from './vm.js';

const base = {
  kernel: { bootImage: '/cache/vmlinux' },
  initrd: '/cache/initramfs.cpio',
  run: { dir: '/tmp/run', stdoutSocket: '/tmp/run/out', stderrSocket: '/tmp/run/err', monitorSocket: '/tmp/run/mon' },
  shares: [],
  nonce: '0123456789abcdef',
  memory: 4096,
  cpus: 1,
};

describe('qemuArgs', () => {
  it('has no network device unless ports are forwarded', () => {
    const args: string[] = qemuArgs({ ...base, forwards: [] });
    expect(args).not.toContain('-netdev');
    expect(args.join(' ')).not.toMatch(/virtio-net/);
  });

  it('forwards each port from the host loopback to the same port in the lab, restricted', () => {
    const args: string[] = qemuArgs({ ...base, forwards: [8080, 9000] });
    const netdev = args[args.indexOf('-netdev') + 1];
    expect(netdev).toBe('user,id=lan,restrict=on,hostfwd=tcp:127.0.0.1:8080-:8080,hostfwd=tcp:127.0.0.1:9000-:9000');
    expect(args[args.indexOf('-netdev') + 3]).toBe('virtio-net-pci,netdev=lan');
  });

  it('has a monitor on a Unix socket in the run directory, for the keep-alive and hang reports', () => {
    const args: string[] = qemuArgs({ ...base, forwards: [] });
    expect(args[args.indexOf('-monitor') + 1]).toBe('unix:/tmp/run/mon,server=on,wait=off');
  });
});
