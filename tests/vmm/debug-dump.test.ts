// Tier 2: the VMM's debug dump (SMOL_DEBUG_DUMP, docs/lab.md "Debugging a stuck VM"), the evidence a test leaves
// when a VM stops answering.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { debugDump, enableDebugDump, labFaultDiagnosis } from './debug-dump.js';
import { startGuest } from './guests.js';

const work = mkdtempSync(path.join(tmpdir(), 'smol-debug-dump-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
enableDebugDump(path.join(work, 'dump.txt')); // before this process's first VM

describe('SMOL_DEBUG_DUMP', () => {
  it('SIGUSR1 dumps every vCPU, the LAPIC, the IOAPIC and the UART of a running VM, which keeps running', async () => {
    const guest = await startGuest('count', { cmdline: 'every=20000', cpus: 2 });
    try {
      await guest.waitFor(/count=3\n/);
      const dump = await debugDump();
      expect(dump).toMatch(/^vm 0x[0-9a-f]+: state=running alive=2 /m);
      for (const cpu of [0, 1]) {
        expect(dump).toMatch(new RegExp(`^ {2}vcpu ${cpu} thread: in_run=[01] runs=\\d+ `, 'm'));
        expect(dump).toMatch(new RegExp(`^ {2}vcpu ${cpu}: mp_state=\\d+ rip=[0-9a-f]+ .* cr3=[0-9a-f]+ `, 'm'));
      }
      expect(dump).toMatch(/^ {4}lapic: id=0 .* IRR=\[[0-9a-f,]*\]$/m);
      expect(dump).toMatch(
        /^ {4}walk rip [0-9a-f]+ \(cr3 9000\): L4=[0-9a-f]+ L3=[0-9a-f]+ L2=[0-9a-f]+ -> [0-9a-f]+:( [0-9a-f]{2}){16}$/m,
      );
      expect(dump).toMatch(/^ {2}com1: IER=[0-9a-f]{2} IIR=[0-9a-f]{2} /m);
      expect(dump).toMatch(/^ {2}ioapic: irr=[0-9a-f]+ /m);
      expect(dump).toContain('(paused for this dump, and resumed)');
      expect(labFaultDiagnosis(dump, 16 << 20), dump).toBe('');
      // It went on counting after the dump.
      const last = Number([...guest.output().matchAll(/count=(\d+)\n/g)].at(-1)![1]);
      await guest.waitFor(new RegExp(`count=${last + 2}\\n`));
    } finally {
      await guest.vm.kill();
    }
  });

  it("recognizes the lab's fault: a vCPU handed the lab kernel's registers", () => {
    // vCPU 1 of a restored 2-vCPU Linux guest that stopped answering in the lab (docs/lab.md, "Known problems").
    const dump = [
      'vm 0x7f1794000d30: state=running alive=2 parked=0 pause_req=0 stop_req=0 busy=0',
      '  vcpu 0: mp_state=3 rip=ffffffff813f8843 rsp=ffffffff81a03ed0 rflags=246 (IF=1) cs=10 cr3=2102000 cr8=1 apic_base=fee00d00',
      '  vcpu 1: mp_state=0 rip=ffffffffc043320c rsp=ffffc9000099bbf0 rflags=10246 (IF=1) cs=10 cr3=100848000 cr8=0 apic_base=fee00c00',
    ].join('\n');
    expect(labFaultDiagnosis(dump, 256 << 20)).toMatch(
      /^vCPU 1 \(rip ffffffffc043320c, cr3 100848000\) runs with the lab kernel's registers/,
    );
    expect(labFaultDiagnosis(dump.split('\n').slice(0, 2).join('\n'), 256 << 20)).toBe('');
  });
});
