// The image operations of the API (docs/images.md, "The API"): what `smol image ls|pull|rm|prune` do, in the
// engine, on the engine's guest cache and data dir. An engine may bring its own (`EngineApi.images`, a test's fake);
// otherwise these work on the files.
import { imagesDir } from '../guest-build/debian-image.js';
import { listImages } from '../guest-build/image-list.js';
import { ensureOciImage, listOciImages, pruneImages, removeOciImage } from '../guest-build/oci-image.js';
import { ApiFailure, type EngineApi, type ImageOperations } from './engine-api.js';

/** An image operation's failure as the API's error: 404 for an image the cache does not have, else 400. */
async function failing<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ApiFailure) throw error;
    const message = (error as Error).message;
    throw new ApiFailure(/^no image /.test(message) ? 404 : 400, message);
  }
}

function fileImages(home: string): ImageOperations {
  return {
    list: () => [...listImages(imagesDir()), ...listOciImages()],
    pull: (request) =>
      failing(() => ensureOciImage({ reference: request.reference, refresh: true, force: request.force ?? false })),
    remove: (reference) => failing(() => removeOciImage(reference, { home })),
    prune: async () => ({ removed: await pruneImages({ home }) }),
  };
}

export const imageOperations = (api: EngineApi): ImageOperations => api.images ?? fileImages(api.health().home);
