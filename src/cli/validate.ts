// `smol validate`: checks a Smolfile and prints its problems the way compilers do (docs/smolfile.md).
import { formatDuration } from '../smolfile/duration.js';
import { formatProblem, loadSmolfile, type Smolfile, type SmolfileResult } from '../smolfile/smolfile.js';
import { parseFlags } from './args.js';
import { CommandError, UsageError } from './errors.js';

export const VALIDATE_HELP = `Usage: smol validate [-f FILE] [--json]

Checks a Smolfile: its TOML syntax, unknown keys (with a suggestion), smolvm keys that Smol Studio
does not support yet, types and ranges, and that kernel and initrd exist. Prints each problem as
FILE:LINE:COL: error: message (or warning), and a one-line summary of the settings when it is valid.
The format is described in docs/smolfile.md.

Options:
  -f, --file FILE  the Smolfile to check (default: ./Smolfile)
  --json           print {"file", "valid", "problems", "smolfile"} as JSON
  -h, --help       show this help

Exit status: 0 valid (warnings allowed), 1 errors in the file or it cannot be read, 2 usage error.
`;

export interface ValidateArgs {
  file: string;
  json: boolean;
}

export function parseValidateArgs(argv: string[]): ValidateArgs | 'help' {
  const flags = parseFlags('validate', argv, {
    file: { type: 'string', short: 'f', default: 'Smolfile' },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h' },
  });
  if (flags.help) return 'help';
  if (flags.file === '') throw new UsageError('validate', '--file needs a file');
  return { file: flags.file, json: flags.json };
}

const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? '' : 's'}`;

/** The settings a valid Smolfile resolves to, on one line. */
export function describeSmolfile(smolfile: Smolfile): string {
  const { image, kernel, initrd } = smolfile;
  const parts = [
    image === null
      ? `bare kernel ${kernel ?? ''}`
      : `image ${image.kind === 'debian' ? `debian:${image.suite}` : image.kind === 'oci' ? image.reference : image.kind}`,
  ];
  if (image !== null && kernel !== null) parts.push(`kernel ${kernel}`);
  if (initrd !== null) parts.push(`initrd ${initrd}`);
  parts.push(plural(smolfile.cpus, 'vCPU'), `${smolfile.memoryMiB} MiB`);
  if (smolfile.cmdline !== '') parts.push(`cmdline ${JSON.stringify(smolfile.cmdline)}`);
  if (smolfile.entrypoint) parts.push(`entrypoint ${JSON.stringify(smolfile.entrypoint)}`);
  if (smolfile.cmd) parts.push(`cmd ${JSON.stringify(smolfile.cmd)}`);
  const envCount = Object.keys(smolfile.env).length;
  if (envCount > 0) parts.push(plural(envCount, 'env variable'));
  if (smolfile.workdir !== null) parts.push(`workdir ${smolfile.workdir}`);
  if (smolfile.user !== null) parts.push(`user ${smolfile.user}`);
  if (smolfile.init.length > 0) parts.push(plural(smolfile.init.length, 'init command'));
  if (smolfile.health) parts.push(`health check every ${formatDuration(smolfile.health.intervalMs)}`);
  const { network } = smolfile;
  if (network.enabled) {
    const policy = [
      network.ports.length > 0 && plural(network.ports.length, 'port'),
      network.allowHosts.length > 0 && `allow ${plural(network.allowHosts.length, 'host')}`,
      network.allowCidrs.length > 0 && `allow ${plural(network.allowCidrs.length, 'CIDR')}`,
    ].filter(Boolean);
    parts.push(policy.length > 0 ? `network (${policy.join(', ')})` : 'network');
  }
  for (const volume of smolfile.volumes) {
    parts.push(`volume ${volume.host} at ${volume.guest}${volume.readOnly ? ' (read-only)' : ''}`);
  }
  const { autoCheckpointMs, keep } = smolfile.snapshots;
  if (autoCheckpointMs !== null) parts.push(`checkpoint every ${formatDuration(autoCheckpointMs)}, keep ${keep}`);
  return parts.join(', ');
}

/** The problems, one per line, then `FILE: ok: settings` or `FILE: N errors, N warnings`. */
export function formatValidation(file: string, result: SmolfileResult): string {
  const lines = result.problems.map((problem) => formatProblem(file, problem));
  const errors = result.problems.filter((problem) => problem.severity === 'error').length;
  const warnings = result.problems.length - errors;
  if (result.smolfile) {
    const noted = warnings > 0 ? ` (${plural(warnings, 'warning')})` : '';
    lines.push(`${file}: ok${noted}: ${describeSmolfile(result.smolfile)}`);
  } else {
    lines.push(`${file}: ${plural(errors, 'error')}${warnings > 0 ? `, ${plural(warnings, 'warning')}` : ''}`);
  }
  return lines.join('\n') + '\n';
}

export async function runValidate(argv: string[]): Promise<number> {
  const args = parseValidateArgs(argv);
  if (args === 'help') {
    process.stdout.write(VALIDATE_HELP);
    return 0;
  }
  let result: SmolfileResult;
  try {
    result = await loadSmolfile(args.file);
  } catch (err) {
    const missing = ((err as Error).cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
    const hint = missing && argv.length === 0 ? ' (smol validate reads ./Smolfile unless -f names another)' : '';
    throw new CommandError(`${(err as Error).message}${hint}`);
  }
  const valid = result.smolfile !== null;
  process.stdout.write(
    args.json
      ? JSON.stringify({ file: args.file, valid, problems: result.problems, smolfile: result.smolfile }, null, 2) + '\n'
      : formatValidation(args.file, result),
  );
  return valid ? 0 : 1;
}
