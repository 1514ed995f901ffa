// What a Smolfile boots (docs/engine.md, "Base snapshots"): the VM options, and for an image the key its base
// snapshot is found by and the commands that bake it.
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { ProgressCallback } from '../guest-build/build-progress.js';
import {
  debianRecipeOf,
  ensureDebianImage,
  imagesDir,
  locateDebianImage,
  type DebianImageRecipe,
} from '../guest-build/debian-image.js';
import {
  findGuestAssets,
  GUEST_HVC_CMDLINE,
  GUEST_IP_CMDLINE,
  GUEST_ROOT_CMDLINE,
  namesHvcConsole,
} from '../guest-build/guest-assets.js';
import { ensureOciImage, locateOciImage, OCI_INIT } from '../guest-build/oci-image.js';
import { workloadOf } from '../guest-build/oci-run.js';
import type { ImageRunConfig } from '../guest-build/oci-source.js';
import type { Smolfile } from '../smolfile/smolfile.js';
import type { VmOptions } from '../vmm/vm.js';
import { ApiFailure } from '../api/engine-api.js';
import { SNAPSHOT_FORMAT } from '../vmm/snapshot-format.js';
import { mountCommand, planVolumes, prepareVolumes, type PlannedVolume } from './volume-plan.js';

export interface BootPlan {
  options: VmOptions;
  /** Identifies the base snapshot of this Smolfile on these guest assets; null for a bare kernel (no base). */
  baseKey: string | null;
  /** Shell commands that bake the base, run on the console after the guest is ready. */
  init: string[];
  /** The guest has the agent (an image): the VM gets a vsock device for it. */
  agent: boolean;
  /** Its volumes (docs/disks.md, "Volumes"): options.volumes in this order, without their layers. */
  volumes: PlannedVolume[];
}

/** A file's identity for the base key: path, size and modification time (the guest assets' names carry hashes). */
function fileStamp(file: string): string {
  const info = statSync(file);
  return `${file}:${info.size}:${info.mtimeMs}`;
}

export function planBoot(smolfile: Smolfile, env: NodeJS.ProcessEnv = process.env): BootPlan {
  const common = { memoryMiB: smolfile.memoryMiB, cpus: smolfile.cpus };
  if (!smolfile.image) {
    // parseSmolfile guarantees a kernel when there is no image.
    const options: VmOptions = { kernel: smolfile.kernel!, cmdline: smolfile.cmdline, ...common };
    if (smolfile.initrd) options.initrd = smolfile.initrd;
    if (namesHvcConsole(smolfile.cmdline)) options.virtioConsole = true;
    return { options, baseKey: null, init: [], agent: false, volumes: [] };
  }
  const assets = findGuestAssets(env);
  const kernel = smolfile.kernel ?? assets.kernel;
  const recipe = debianRecipeOf(smolfile);
  const debian = recipe ? debianImage(smolfile, recipe, env) : null;
  const oci = smolfile.image.kind === 'oci' ? ociImage(smolfile, smolfile.image.reference, env) : null;
  const rootDisk = debian ? debian.file : oci ? oci.file : assets.rootfs;
  if (!kernel || !rootDisk) {
    throw new ApiFailure(
      409,
      'the builtin image needs the Linux guest and its root disk, which are not built: ' +
        'run `npx --no-install smol guest build`',
    );
  }
  // The root disk's image is the base of every VM's disk chain; the engine gives each instance its layer over it.
  // An OCI image boots our init from /.smol, not whatever the image has at /init (docs/images.md, "Where init runs").
  const rootArgs = oci ? GUEST_ROOT_CMDLINE.replace('init=/init', `init=${OCI_INIT}`) : GUEST_ROOT_CMDLINE;
  const net = smolfile.network.enabled;
  if (net && !smolfile.kernel) requireVirtioNet(kernel);
  // With a network, the kernel configures eth0 itself from ip= before init runs (no DHCP, no wait): docs/network.md.
  const root = `${GUEST_HVC_CMDLINE} ${rootArgs}${net ? ` ${GUEST_IP_CMDLINE}` : ''}`;
  const cmdline = smolfile.cmdline ? `${root} ${smolfile.cmdline}` : root;
  const options: VmOptions = { kernel, cmdline, disk: { base: rootDisk }, rng: true, virtioConsole: true, ...common };
  // A Debian image ran the Smolfile's init when it was built (with the host's network); the base only takes the
  // console's env and workdir.
  // An OCI image's Env and WorkingDir are the console's unless the Smolfile sets them.
  const init = bakeCommands(oci ? withImageDefaults(smolfile, oci.config) : smolfile, { withInit: !debian });
  // The resolver first, so the Smolfile's init commands (pip install, git clone) can resolve names.
  if (net) init.unshift(RESOLV_CONF_COMMAND);
  // The volumes are mounted before anything else, so that `init` can use them; the base is baked with them mounted.
  const volumes = planVolumes(smolfile, env);
  if (volumes.length > 0) options.volumes = volumes.map((volume) => ({ base: volume.image }));
  init.unshift(...volumes.map(mountCommand));
  const baseKey = createHash('sha256')
    .update(
      JSON.stringify({
        format: 3, // 2: the VM has a vsock device for the agent; 3: it boots from its root disk, with virtio-rng
        snapshot: SNAPSHOT_FORMAT, // a base of another snapshot format cannot be restored: bake a new one
        kernel: fileStamp(kernel),
        rootfs: path.basename(rootDisk), // named by its content's hash
        cmdline,
        ...common,
        init,
        net, // the base's device set: a base with a network device is never restored for a VM without one
        // Their images are named by the folders' content: a changed folder bakes a new base, never another's.
        ...(volumes.length > 0 && {
          volumes: volumes.map((v) => [path.basename(v.image), v.guest, v.readOnly]),
        }),
      }),
    )
    .digest('hex')
    .slice(0, 32);
  return { options, baseKey, init, agent: true, volumes };
}

/**
 * Run first when a networked base is baked: /etc/resolv.conf names the stack's DNS. Images built for containers
 * leave it empty or a symlink (Docker bind-mounts its own), so it is replaced, not edited.
 */
export const RESOLV_CONF_COMMAND =
  "mkdir -p /etc && rm -f /etc/resolv.conf && printf 'nameserver 10.0.2.3\\n' > /etc/resolv.conf";

/**
 * A guest kernel from `smol guest build` records its configuration next to it; one built before virtio-net was in
 * resources/guest-kernel/smol.config would boot without eth0, silently. A kernel the Smolfile names is its own.
 */
function requireVirtioNet(kernel: string): void {
  const config = path.join(path.dirname(kernel), 'config');
  let text: string;
  try {
    text = readFileSync(config, 'utf8');
  } catch {
    return; // not one of ours (a kernel cache without its config): nothing to check against
  }
  if (!/^CONFIG_VIRTIO_NET=y$/m.test(text)) {
    throw new ApiFailure(
      409,
      `\`net = true\`: the guest kernel ${kernel} was built without a virtio-net driver (an older ` +
        '`smol guest build`): run `npx --no-install smol guest build` for a kernel with one',
    );
  }
}

const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/**
 * The console commands that bake a base: each `init` command in a subshell with the Smolfile's `env`, then the
 * console shell itself takes `env` and `workdir`, so a console opened later starts where the Smolfile says.
 */
function bakeCommands(smolfile: Smolfile, { withInit = true } = {}): string[] {
  const exports = Object.entries(smolfile.env).map(([key, value]) => `export ${key}=${quote(value)}`);
  const prefix = exports.length > 0 ? `${exports.join('; ')}; ` : '';
  const commands = withInit ? smolfile.init.map((command) => `(${prefix}${command})`) : [];
  if (exports.length > 0) commands.push(exports.join('; '));
  if (smolfile.workdir) commands.push(`mkdir -p ${quote(smolfile.workdir)} && cd ${quote(smolfile.workdir)}`);
  return commands;
}

function withImageDefaults(smolfile: Smolfile, config: ImageRunConfig): Smolfile {
  const { env, workdir } = workloadOf(smolfile, config);
  return { ...smolfile, env, workdir };
}

/** Where an OCI image's root disk is; 409 with the command that pulls it when it was never pulled. */
function ociImage(smolfile: Smolfile, reference: string, env: NodeJS.ProcessEnv) {
  const located = locateOciImage(reference, imagesDir(env));
  if (!located) {
    throw new ApiFailure(
      409,
      `${smolfile.path}: its image ${reference} is not pulled: run \`npx --no-install smol image pull ${reference}\``,
    );
  }
  return { file: located.file, config: located.record.config };
}

/** Where a Debian Smolfile's image is; 409 with the command that builds it when it is not built. */
function debianImage(smolfile: Smolfile, recipe: DebianImageRecipe, env: NodeJS.ProcessEnv): { file: string } {
  let located;
  try {
    located = locateDebianImage(recipe, imagesDir(env));
  } catch (error) {
    throw new ApiFailure(400, `${smolfile.path}: ${(error as Error).message}`);
  }
  if (!located.built) {
    throw new ApiFailure(
      409,
      `${smolfile.path}: its image (${located.name}) is not built: run \`npx --no-install smol image build -f ` +
        `${smolfile.path}\``,
    );
  }
  return { file: located.file };
}

/**
 * Builds the image a Smolfile needs when that takes more than reading a cache: a Debian image (mmdebstrap, then
 * the Smolfile's init with the host's network; a minute or more), or an OCI image never pulled (pulled and
 * converted). Nothing for the builtin image or a bare kernel.
 */
export async function prepareImage(
  smolfile: Smolfile,
  onProgress: ProgressCallback,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  await prepareVolumes(smolfile, env);
  if (smolfile.image?.kind === 'oci') {
    try {
      await ensureOciImage({ reference: smolfile.image.reference, dir: imagesDir(env), onProgress });
    } catch (error) {
      throw new ApiFailure(400, `${smolfile.path}: pulling its image failed: ${(error as Error).message}`);
    }
    return;
  }
  const recipe = debianRecipeOf(smolfile);
  if (!recipe) return;
  try {
    await ensureDebianImage({ ...recipe, dir: imagesDir(env), onProgress });
  } catch (error) {
    throw new ApiFailure(400, `${smolfile.path}: building its image failed: ${(error as Error).message}`);
  }
}
