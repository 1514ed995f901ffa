// `smol doctor`: is this machine ready to run VMs, and what to do when it is not.
import { buildDoctorReport, type DoctorReport } from '../doctor/report.js';
import { gatherHostFacts } from '../doctor/host-facts.js';
import { gatherJailFacts, jailChecks } from '../doctor/jail-checks.js';
import { cgroupCheck, gatherCgroupFacts } from '../doctor/cgroup-checks.js';
import { parseFlags } from './args.js';

export const DOCTOR_HELP = `Usage: smol doctor [--json]

Checks what Smol Studio needs on this machine: /dev/kvm and what kind of KVM it is, the KVM
capabilities the VMM uses, the native module, guest assets, Electron and Chromium, and what of the
vmhost's jail is in force for an engine you start (seccomp, capabilities, namespaces or why not),
and the cgroup limits (version, controllers, whether the engine can create its cgroups or why not).
Each check is ok, warn or fail, with the command that fixes it.

Options:
  --json       print the full report as JSON
  -h, --help   show this help

Exit status: 0 when nothing failed (warnings allowed), 1 when a check failed, 2 usage error.
`;

export interface DoctorArgs {
  json: boolean;
}

export function parseDoctorArgs(argv: string[]): DoctorArgs | 'help' {
  const flags = parseFlags('doctor', argv, {
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  });
  return flags.help ? 'help' : { json: flags.json };
}

const LABELS = { ok: 'ok  ', warn: 'warn', fail: 'FAIL' } as const;

export function formatDoctorReport(report: DoctorReport): string {
  const width = Math.max(...report.checks.map((check) => check.name.length));
  const lines = report.checks.flatMap((check) => {
    const line = `${LABELS[check.status]}  ${check.name.padEnd(width)}  ${check.message}`;
    return check.fix && check.status !== 'ok' ? [line, `${' '.repeat(width + 8)}fix: ${check.fix}`] : [line];
  });
  const count = (status: string) => report.checks.filter((check) => check.status === status).length;
  lines.push('', `${count('fail')} failed, ${count('warn')} warnings, ${count('ok')} ok`);
  return lines.join('\n') + '\n';
}

export async function runDoctor(argv: string[]): Promise<number> {
  const args = parseDoctorArgs(argv);
  if (args === 'help') {
    process.stdout.write(DOCTOR_HELP);
    return 0;
  }
  const jail = gatherJailFacts();
  const report = buildDoctorReport(gatherHostFacts());
  report.checks.push(...jailChecks(jail));
  const cgroups = gatherCgroupFacts();
  report.checks.push(cgroupCheck(cgroups));
  const json = { ...report, jail, cgroups };
  process.stdout.write(args.json ? JSON.stringify(json, null, 2) + '\n' : formatDoctorReport(report));
  return report.checks.some((check) => check.status === 'fail') ? 1 : 0;
}
