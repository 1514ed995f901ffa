// The VMM's debug dump (docs/lab.md, "Debugging a stuck VM"): with SMOL_DEBUG_DUMP=FILE in the environment when
// the process creates its first VM, SIGUSR1 makes the VMM append every live VM's vCPUs (registers, LAPIC, pending
// events, MSRs, page walks of RIP and RSP), IOAPIC, kvmclock and UART to FILE. Tests use it to leave evidence
// when a VM stops answering.
import { existsSync, readFileSync } from 'node:fs';

const END = 'smol-debug: end of dump\n';

/** Turns the dump on for this process, writing to `file`. Call it before the process's first VM: the VMM reads the
 * variable once, when it creates that VM. */
export function enableDebugDump(file: string): void {
  process.env.SMOL_DEBUG_DUMP = file;
}

/** Asks the VMM for a dump and returns it, or a line saying why there is none. */
export async function debugDump(timeoutMs = 30_000): Promise<string> {
  const file = process.env.SMOL_DEBUG_DUMP;
  if (!file || file === '1') return '(no debug dump: SMOL_DEBUG_DUMP does not name a file)';
  const before = existsSync(file) ? readFileSync(file, 'latin1').length : 0;
  process.kill(process.pid, 'SIGUSR1');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const text = existsSync(file) ? readFileSync(file, 'latin1').slice(before) : '';
    if (text.endsWith(END)) return text;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return `(no debug dump in ${timeoutMs / 1000} s: was SMOL_DEBUG_DUMP set before the first VM?)`;
}

/**
 * What a dump says about the lab's known fault (docs/lab.md, "Known problems"): a vCPU of a Linux guest (which has
 * no modules, so no code at 0xffffffffc0000000 and up) running at such an address, or with CR3 outside guest RAM, was
 * handed the lab kernel's own registers by the lab's emulated SVM. Returns a sentence, or '' when the dump does not
 * show it.
 */
export function labFaultDiagnosis(dump: string, guestRamBytes: number): string {
  const found: string[] = [];
  for (const m of dump.matchAll(/^ {2}vcpu (\d+): mp_state=\d+ rip=([0-9a-f]+) .* cr3=([0-9a-f]+) /gm)) {
    const rip = BigInt(`0x${m[2]}`);
    const cr3 = BigInt(`0x${m[3]}`) & 0x000ffffffffff000n;
    if ((rip >= 0xffffffffc0000000n && rip < 0xffffffffff000000n) || cr3 >= BigInt(guestRamBytes)) {
      found.push(`vCPU ${m[1]} (rip ${m[2]}, cr3 ${m[3]})`);
    }
  }
  if (found.length === 0) return '';
  return (
    `${found.join(' and ')} runs with the lab kernel's registers (a module address, page tables outside the ` +
    'guest\'s RAM): the lab\'s emulated SVM swapped host and guest state (docs/lab.md, "Known problems"). ' +
    'Not a fault of our VMM.'
  );
}
