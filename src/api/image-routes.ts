// The image operations of the API (docs/images.md, "The API"): what `smol image ls|pull|rm|prune` do, in the
// engine, on the engine's guest cache and data dir. An engine may bring its own (`EngineApi.images`, a test's fake);
// otherwise these work on the files. A pull's progress goes out as `image.pull` events (the UI's bars); rm refuses an
// image a snapshot or VM needs unless forced, naming what needs it; prune can say first what it would free. The CLI's
// `smol image rm|prune` run these same operations (src/cli/image.ts), so both refuse and free alike.
import { imagesDir } from '../guest-build/debian-image.js';
import { listImages } from '../guest-build/image-list.js';
import {
  ensureOciImage,
  listOciImages,
  locateOciImage,
  pruneImages,
  readRefs,
  removeOciImage,
} from '../guest-build/oci-image.js';
import { describeUsers, imageUsers } from '../engine/images-in-use.js';
import { ApiFailure, type EngineApi, type ImageOperations } from './engine-api.js';
import type { EngineEvent } from './schema.js';

/**
 * An image operation's failure as the API's error: 404 for an image the cache does not have, a full disk (a pull the
 * disk reserve refused, or one that filled the disk) as it is (ENOSPC: 507), else 400.
 */
async function failing<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ApiFailure || (error as NodeJS.ErrnoException).code === 'ENOSPC') throw error;
    const message = (error as Error).message;
    throw new ApiFailure(/^no image /.test(message) ? 404 : 400, message);
  }
}

/** The image rm would take out of the cache: the one a name names, or the one only this reference names. */
function imageRemovedBy(reference: string): string | null {
  if (/^oci-[0-9a-f]{16}$/.test(reference)) return reference;
  const located = locateOciImage(reference);
  if (!located) return null;
  const others = Object.entries(readRefs(imagesDir()).refs).filter(
    ([ref, entry]) => entry.name === located.name && ref !== located.reference,
  );
  return others.length === 0 ? located.name : null;
}

/**
 * The image operations on the files of the data dir `home` and the guest cache. `forceOption` is how the caller's
 * user says force in a refusal (`force=true` over the API, `--force` on the command line).
 */
export function fileImageOperations(
  home: string,
  options: { publish?: (event: EngineEvent) => void; forceOption?: string } = {},
): ImageOperations {
  const publish = options.publish ?? (() => {});
  return {
    list: async () => {
      const users = await imageUsers(home);
      return [...listImages(imagesDir()), ...listOciImages()].map((image) => ({
        ...image,
        usedBy: users.get(`${image.name}.ext4`) ?? [],
      }));
    },
    pull: (request) =>
      failing(() =>
        ensureOciImage({
          reference: request.reference,
          refresh: true,
          force: request.force ?? false,
          onProgress: ({ step, detail }) => publish({ type: 'image.pull', reference: request.reference, step, detail }),
          onLayer: (layer) => publish({ type: 'image.pull', reference: request.reference, layer: { ...layer } }),
        }),
      ),
    remove: (reference, force = false) =>
      failing(async () => {
        const name = imageRemovedBy(reference);
        const users = name ? ((await imageUsers(home)).get(`${name}.ext4`) ?? []) : [];
        if (users.length > 0 && !force) {
          throw new ApiFailure(
            409,
            `${reference} is needed by ${describeUsers(users)}: delete ${users.length === 1 ? 'it' : 'them'} first, ` +
              `or remove it anyway with ${options.forceOption ?? 'force=true'} (the engine keeps its copy until prune finds it unused)`,
          );
        }
        return removeOciImage(reference, { home });
      }),
    prune: async (dryRun = false) => ({ removed: await pruneImages({ home, dryRun }) }),
  };
}

export const imageOperations = (api: EngineApi): ImageOperations =>
  api.images ?? fileImageOperations(api.health().home, { publish: (event) => api.publish?.(event) });
