// Named crash points for the torture harness (docs/engine.md, "Crash points"; src/torture/). Only with
// SMOL_TEST_HOOKS=1: SMOL_CRASH_AT=NAME[@K] makes the process (the engine or a vmhost: they share the environment)
// that passes NAME for the K-th time (1 unless given) note it in SMOL_HOME/crash-points.log and die by SIGKILL at
// once, as a power cut or the OOM killer would end it there (a jailed vmhost, the first process of its PID
// namespace, aborts instead: its own SIGKILL does not reach it). Without the hooks every point is a no-op.
import { appendFileSync } from 'node:fs';
import path from 'node:path';

/** Every point, in the order an operation passes them; the harness picks from this list. */
export const CRASH_POINTS = [
  // engine: a checkpoint's files are written by the vmhost, then published (manifest), then the episode saved
  'checkpoint:written',
  'checkpoint:published',
  // engine: the vmhost made the children, before their disk layers and states are recorded
  'fork:children-made',
  // engine: a restore or a reset killed the VM's old instance, before the new one is made
  'restore:old-killed',
  'reset:old-killed',
  // store: a snapshot marked deleted, before collection; collection between removing two snapshots
  'delete:marked',
  'gc:removing',
  // vmhost: the VMM wrote a checkpoint, before the engine hears of it
  'vmhost:checkpoint-written',
  // engine: a .smolmachine partly written
  'pack:writing',
] as const;

export type CrashPoint = (typeof CRASH_POINTS)[number];

const setting = process.env.SMOL_TEST_HOOKS === '1' ? process.env.SMOL_CRASH_AT : undefined;
const [armed, nth] = setting ? [setting.split('@')[0], Number(setting.split('@')[1] ?? 1)] : [undefined, 0];
let passes = 0;

/** Dies here (SIGKILL) when this is the armed point's K-th pass; nothing otherwise. */
export function crashPoint(name: CrashPoint): void {
  if (name !== armed || ++passes !== nth) return;
  try {
    const home = process.env.SMOL_HOME;
    if (home) appendFileSync(path.join(home, 'crash-points.log'), `${name} ${process.pid}\n`);
  } catch {
    // a vmhost in its jail sees SMOL_HOME read-only or not at all: the harness sees it end instead
  }
  process.kill(process.pid, 'SIGKILL');
  // Still here: the first process of its own PID namespace (a jailed vmhost), which its own SIGKILL does not reach.
  // abort() ends it all the same (by its fault, at worst), with no JS or exit handler run.
  process.abort();
}
