import { describe, expect, it } from 'vitest';
import { bootPhases, formatBootTrace, parseKernelLog, summarizeTrace, type TraceSample } from './boot-trace.js';

// What `dmesg | grep -e ' returned ' -e ' as init process'` prints over the serial console (CRLF line ends), in the
// forms Linux 6.1 writes with initcall_debug and printk.time=1.
const DMESG = [
  '[    0.003000] initcall init_hw_perf_events+0x0/0x5e0 returned 0 after 1000 usecs',
  '[    0.412345] initcall acpi_init+0x0/0x3b0 returned 0 after 48000 usecs',
  '[    0.500000] initcall vsock_init [vsock] returned 0 after 20903 usecs',
  '[    0.600000] initcall serial8250_init+0x0/0x1a0 returned -19 after 47155 usecs',
  '[    0.700000] Run /init as init process',
  'some line without a timestamp returned nothing',
].join('\r\n');

describe('boot trace', () => {
  it('reads each initcall (name without offset, µs, kernel time) and the hand-over to /init', () => {
    const log = parseKernelLog(DMESG);
    expect(log.initcalls).toEqual([
      { fn: 'init_hw_perf_events', us: 1000, at: 0.003 },
      { fn: 'acpi_init', us: 48000, at: 0.412345 },
      { fn: 'vsock_init', us: 20903, at: 0.5 },
      { fn: 'serial8250_init', us: 47155, at: 0.6 },
    ]);
    expect(log.runInitAt).toBe(0.7);
  });

  it('splits a boot into phases, placing kernel time on the host clock by the first console line', () => {
    const sample: TraceSample = { firstByte: 1500, ready: 2400, firstLineAt: 0.5, log: parseKernelLog(DMESG) };
    const phases = bootPhases(sample);
    expect(phases['start to kernel clock 0 (VMM, entry; est.)']).toBe(1000);
    expect(phases['kernel: clock 0 to first initcall']).toBeCloseTo(2);
    expect(phases['kernel: first initcall to /init']).toBeCloseTo(698);
    expect(phases['  time inside initcalls (sum)']).toBeCloseTo(117.058);
    expect(phases['/init to ready line (est.)']).toBeCloseTo(700);
    // Without a timestamped first line, the host-side estimates are unknown rather than made up.
    const unplaced = bootPhases({ ...sample, firstLineAt: undefined });
    expect(unplaced['start to kernel clock 0 (VMM, entry; est.)']).toBeUndefined();
    expect(unplaced['/init to ready line (est.)']).toBeUndefined();
  });

  it('puts both sides next to each other: medians, slowest initcalls first, one side missing shown as -', () => {
    const log = parseKernelLog(DMESG);
    const ours: TraceSample[] = [1, 3].map((k) => ({ firstByte: 1000 * k, ready: 2000 * k, log }));
    const qemuLog = { ...log, initcalls: log.initcalls.filter((c) => c.fn !== 'vsock_init') };
    const qemu: TraceSample[] = [{ firstByte: 900, ready: 1900, log: qemuLog }];
    const trace = summarizeTrace('quiet initcall_debug', ours, qemu);
    expect(trace.phases.find((p) => p.phase === 'first console byte')).toEqual({
      phase: 'first console byte',
      ours: 2000,
      qemu: 900,
    });
    expect(trace.slowest.map((s) => s.fn)).toEqual([
      'acpi_init',
      'serial8250_init',
      'vsock_init',
      'init_hw_perf_events',
    ]);
    expect(trace.slowest[2]).toEqual({ fn: 'vsock_init', ours: 20903, qemu: null });
    expect(trace.initcalls).toEqual({ ours: 4, qemu: 3 });
    const text = formatBootTrace(trace).join('\n');
    expect(text).toMatch(/^ {2}vsock_init +20903 +-$/m);
    expect(text).toMatch(/^first console byte +2000\.0 +900\.0$/m);
  });
});
