// How an OCI image's config and a Smolfile make the workload (docs/images.md, "What runs"): the Smolfile's
// `entrypoint`, `cmd`, `env`, `workdir` and `user` win; what it leaves out comes from the image's config
// (Entrypoint, Cmd, Env, WorkingDir, User), as `docker run` takes them.
import type { SmolfileWorkload } from '../smolfile/smolfile-workload.js';
import type { ImageRunConfig } from './oci-source.js';

export interface Workload {
  entrypoint: string[];
  cmd: string[];
  env: Record<string, string>;
  workdir: string | null;
  user: string | null;
}

/** An image's `Env` (`NAME=value` strings) as an object; an entry without `=` is left out, as docker does. */
export function envOf(list: readonly string[] | null | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of list ?? []) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

/** The Smolfile's workload over the image's defaults (`config` null: an image with none, builtin or Debian). */
export function workloadOf(smolfile: SmolfileWorkload, config: ImageRunConfig | null): Workload {
  // docker run: a new Entrypoint drops the image's Cmd unless a Cmd is given too.
  const entrypoint = smolfile.entrypoint ?? config?.Entrypoint ?? [];
  const cmd = smolfile.cmd ?? (smolfile.entrypoint ? [] : (config?.Cmd ?? []));
  return {
    entrypoint,
    cmd,
    env: { ...envOf(config?.Env), ...smolfile.env },
    workdir: smolfile.workdir ?? config?.WorkingDir ?? null,
    user: smolfile.user ?? config?.User ?? null,
  };
}

/** The argv `smol run` runs: the entrypoint with the given command as its arguments, else with the workload's cmd. */
export function runArgv(workload: Workload, command: string[]): string[] {
  return [...workload.entrypoint, ...(command.length > 0 ? command : workload.cmd)];
}
