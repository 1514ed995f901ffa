// The TCP listener's token in web mode (docs/engine.md, "API"): `smol serve` prints a page URL with `?token=T`. The
// page keeps it in sessionStorage (this tab only, gone when it closes) and takes it out of the address bar, so it
// is not left in the history, bookmarks or a screen share.
const KEY = 'smol_token';

export function takePageToken(location: Location, history: History, storage: Storage): string | null {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl) {
    storage.setItem(KEY, fromUrl);
    url.searchParams.delete('token');
    history.replaceState(history.state, '', url.pathname + url.search + url.hash);
    return fromUrl;
  }
  return storage.getItem(KEY);
}
