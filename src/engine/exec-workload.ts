// What a command run in an episode's VM gets by default (docs/images.md, "What applies where"): the workload's env
// (the OCI image's Env, then the Smolfile's env), workdir and user, as `docker exec` gives a container's. The
// request's env entries win per name, its cwd and user over the workload's. Parsed once per episode.
import { locateOciImage } from '../guest-build/oci-image.js';
import { workloadOf, type Workload } from '../guest-build/oci-run.js';
import { parseSmolfile } from '../smolfile/smolfile.js';
import type { ExecRequest } from '../api/schema.js';
import type { EpisodeRecord } from './episode-registry.js';

const workloads = new WeakMap<EpisodeRecord, Workload | null>();

/** The episode's workload; null when its Smolfile no longer parses (its commands then get only what they ask). */
export function episodeWorkload(episode: EpisodeRecord): Workload | null {
  if (workloads.has(episode)) return workloads.get(episode)!;
  const { smolfile } = parseSmolfile(episode.smolfile.text, { path: episode.smolfile.path });
  let workload: Workload | null = null;
  if (smolfile) {
    const image = smolfile.image;
    let config = null;
    try {
      config = image?.kind === 'oci' ? (locateOciImage(image.reference)?.record.config ?? null) : null;
    } catch {
      // an image cache that cannot be read: the Smolfile's own settings still apply
    }
    workload = workloadOf(smolfile, config);
  }
  workloads.set(episode, workload);
  return workload;
}

/** `request` with the workload's env, workdir and user where it leaves them out. */
export function withWorkload<T extends Omit<ExecRequest, 'stdin'>>(request: T, workload: Workload | null): T {
  if (!workload) return request;
  const env = { ...workload.env, ...request.env };
  const cwd = request.cwd ?? workload.workdir ?? undefined;
  const user = request.user ?? workload.user ?? undefined;
  return {
    ...request,
    ...(Object.keys(env).length > 0 && { env }),
    ...(cwd !== undefined && { cwd }),
    ...(user !== undefined && { user }),
  };
}
