// What a Smolfile's volumes boot with (docs/disks.md, "Volumes"): volume i is the VMM's device virtio-blk-<i+1>, its
// image the folder's (volume-image.ts), mounted at its guest path by a console command when the base is baked.
import path from 'node:path';
import { ApiFailure } from '../api/engine-api.js';
import { imagesDir } from '../guest-build/debian-image.js';
import { ensureVolumeImage, takeHashedTree, volumeImageName, volumeTree } from '../guest-build/volume-image.js';
import type { Smolfile } from '../smolfile/smolfile.js';
import type { DiskDevice } from './live-instance.js';

export interface PlannedVolume {
  device: DiskDevice;
  /** Its image in the guest cache's images directory (the engine adopts it into SMOL_HOME/images). */
  image: string;
  guest: string;
  readOnly: boolean;
}

const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/**
 * The volumes' images, located (nothing is built): by the trees prepareVolumes just hashed without holding the event
 * loop, else (a reset's boot) hashed here again.
 */
export function planVolumes(smolfile: Smolfile, env: NodeJS.ProcessEnv = process.env): PlannedVolume[] {
  return smolfile.volumes.map((volume, i) => {
    const tree = takeHashedTree(volume.host) ?? volumeTree(volume.host, env);
    const image = path.join(imagesDir(env), volumeImageName(tree));
    return { device: `virtio-blk-${i + 1}` as DiskDevice, image, guest: volume.guest, readOnly: volume.readOnly };
  });
}

/** Builds the images planVolumes will find (an unchanged folder's is there already). */
export async function prepareVolumes(smolfile: Smolfile, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  for (const volume of smolfile.volumes) {
    try {
      await ensureVolumeImage(volume.host, imagesDir(env), env);
    } catch (error) {
      throw new ApiFailure(400, `${smolfile.path}: volume ${volume.host}: ${(error as Error).message}`);
    }
  }
}

/**
 * The console command that mounts a volume: its disk is the vd* whose serial is smol-volN (the VMM's GET_ID), so the
 * order the guest probed its disks in does not matter. grep, mkdir and mount are the image's, or in an OCI image
 * (which may have none of them) those of our busybox in /.smol; in a subshell, so the console keeps no variables.
 */
export function mountCommand(volume: PlannedVolume): string {
  const serial = `smol-vol${volume.device.slice('virtio-blk-'.length)}`;
  const to = quote(volume.guest);
  return (
    `(b=; [ -x ${OCI_BUSYBOX} ] && b=${OCI_BUSYBOX}; d=$($b grep -lx ${serial} /sys/block/vd*/serial) && ` +
    `d=\${d%/serial} && $b mkdir -p ${to} && $b mount -t ext4${volume.readOnly ? ' -o ro' : ''} /dev/\${d##*/} ${to})`
  );
}

/** Our busybox in an OCI image's root disk (docs/images.md, "Where init runs"). */
const OCI_BUSYBOX = '/.smol/busybox';
