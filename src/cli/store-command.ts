// `smol store check [--repair] [--quick] [--json]`: the data dir's store checked as `git fsck` checks a repository
// (docs/engine.md, "Checking the store"); --repair moves what is broken into SMOL_HOME/quarantine/ and says what was
// lost. It reads the files directly, so it works with no engine, and repairs only with none running.
import path from 'node:path';
import { connectEngine } from '../../sdk/typescript/engine-connection.js';
import { checkStore, repairStore, type StoreProblem, type StoreReport } from '../engine/store-check.js';
import { smolHomeDir } from '../smol-dirs.js';
import { EXIT, helpOr, JSON_FLAG, parseCommand, printJson } from './engine-cli.js';
import { CommandError } from './errors.js';

export const STORE_HELP = `Usage: smol store check [--repair] [--quick] [--home DIR] [--json]

Checks every snapshot (its manifest, its state's and memory layer's checksums, its memory and disk layer chains),
every disk layer (its header, who owns it) and every episode record in the data dir, and names each problem with its
path. --quick skips what needs the native module (checksums, opening chains as a VM would). --repair moves what is
broken (and what needs it), set aside or orphaned into SMOL_HOME/quarantine/<time>/ with a REPORT.txt, removes
interrupted writes, and lists what was lost; stop the engine first (smol engine stop). Exits 0 when the store is
clean (or was repaired), 1 when it has problems.
`;

const LABEL: Record<StoreProblem['kind'], string> = {
  broken: 'broken',
  dangling: 'dangling',
  leftover: 'leftover',
  orphan: 'orphan',
  'set-aside': 'set aside',
};

async function engineRunning(home: string): Promise<boolean> {
  try {
    (await connectEngine({ home, start: false })).close();
    return true;
  } catch {
    return false;
  }
}

function printReport(report: StoreReport, running: boolean): void {
  const counts = `${report.snapshots} snapshots, ${report.layers} disk layers, ${report.episodes} episodes`;
  process.stdout.write(`${report.home}: ${counts} (${report.form} check${running ? ', an engine is running' : ''})\n`);
  for (const p of report.problems) process.stdout.write(`  ${LABEL[p.kind].padEnd(9)} ${p.path}: ${p.problem}\n`);
  process.stdout.write(report.problems.length ? `${report.problems.length} problems\n` : 'no problems\n');
}

export async function runStore(argv: string[]): Promise<number> {
  const { flags, args, help } = parseCommand(
    'store',
    argv,
    { ...JSON_FLAG, home: { type: 'string' }, repair: { type: 'boolean' }, quick: { type: 'boolean' } },
    { min: 1, max: 1, names: 'check' },
  );
  if (helpOr(help, STORE_HELP)) return 0;
  if (args[0] !== 'check') throw new CommandError(`store: unknown action ${args[0]} (check)`, EXIT.usage);
  const home = path.resolve(flags.home ?? smolHomeDir());
  const running = await engineRunning(home);
  if (flags.repair && running) {
    throw new CommandError(`store: an engine is running for ${home}; stop it first (smol engine stop)`, EXIT.conflict);
  }
  const native = flags.quick ? undefined : (await import('../vmm/native.js')).loadNative();
  const report = await checkStore(home, { native, engineRunning: running });
  if (!flags.repair) {
    if (flags.json) printJson(report);
    else printReport(report, running);
    return report.problems.length ? 1 : 0;
  }
  const repaired = await repairStore(report);
  const after = await checkStore(home, { native });
  if (flags.json) printJson({ before: report, repaired, after });
  else {
    printReport(report, false);
    for (const action of repaired.actions) process.stdout.write(`  ${action}\n`);
    if (repaired.lost.length) process.stdout.write(`lost: ${repaired.lost.join('; ')}\n`);
    const left = after.problems.filter((p) => p.kind !== 'dangling');
    const dangling = after.problems.length - left.length;
    process.stdout.write(
      left.length
        ? `${left.length} problems remain\n`
        : `repaired${dangling ? ` (${dangling} records still name what is gone: see smol store check)` : ''}\n`,
    );
  }
  return after.problems.some((p) => p.kind !== 'dangling') ? 1 : 0;
}
