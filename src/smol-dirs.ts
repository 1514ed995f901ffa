// Where Smol Studio keeps things on disk.
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from './package-root.js';

/** `$SMOL_CACHE`, else `$XDG_CACHE_HOME/smol-studio`, else `~/.cache/smol-studio`: rebuildable artifacts. */
export function smolCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SMOL_CACHE) return path.resolve(env.SMOL_CACHE);
  const xdg = env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : undefined;
  return path.join(xdg ?? path.join(os.homedir(), '.cache'), 'smol-studio');
}

/** The Linux guest kernel and initramfs built by `smol guest build`. */
export function guestCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(smolCacheDir(env), 'guest');
}

/** The tiny freestanding test guests built by `make -C native guests`. */
export const tinyGuestDir = path.join(packageRoot, 'native', 'out', 'guests');

/** `$SMOL_HOME`, else `$XDG_DATA_HOME/smol-studio`, else `~/.local/share/smol-studio`: the engine's data dir. */
export function smolHomeDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SMOL_HOME) return path.resolve(env.SMOL_HOME);
  const xdg = env.XDG_DATA_HOME && path.isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : undefined;
  return path.join(xdg ?? path.join(os.homedir(), '.local', 'share'), 'smol-studio');
}
