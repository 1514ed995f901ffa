// Everything `smol doctor` looks at, gathered once, as plain data (the report is a pure function of it).
import { existsSync, readdirSync } from 'node:fs';
import { packageRoot } from '../package-root.js';
import { findGuestAssets } from '../guest-build/guest-assets.js';
import { findElectronBinary } from './electron-binary.js';
import { probeKvmFromFiles } from './linux-guests.js';
import { guestCacheDir, tinyGuestDir } from '../smol-dirs.js';
import { loadNative, nativeModulePath, type KvmProbe } from '../vmm/native.js';

export interface HostFacts {
  /** From the native probe when the module loads, else from opening /dev/kvm (implementation then unknown). */
  kvm: KvmProbe & { probedBy: 'native' | 'filesystem' };
  /** /sys/module/kvm_pvm exists: PVM is loaded (without /dev/kvm that means this machine is itself a PVM guest). */
  pvmModule: boolean;
  native: { loaded: boolean; path: string; error?: string };
  tinyGuests: { dir: string; files: string[] };
  /** The current Linux guest build (absolute paths), as smol guest build recorded it; null where missing. */
  linuxGuest: { dir: string; kernel: string | null; initramfs: string | null };
  electron: { installed: boolean; binary?: string; error?: string };
  chromium: { path: string; present: boolean };
}

export { DEV_KVM } from './linux-guests.js';
export const CHROMIUM_PATH = '/usr/bin/chromium';

function listDir(dir: string, keep: (name: string) => boolean = () => true): string[] {
  try {
    return readdirSync(dir).filter(keep).sort();
  } catch {
    return [];
  }
}

function findElectron(): HostFacts['electron'] {
  // Not require('electron'): with the binary missing, that call tries to download it from GitHub on the spot.
  const found = findElectronBinary(packageRoot);
  if ('binary' in found) return { installed: true, binary: found.binary };
  return found.why === 'the electron package is not installed'
    ? { installed: false }
    : { installed: true, error: found.why };
}

export function gatherHostFacts(env: NodeJS.ProcessEnv = process.env): HostFacts {
  let kvm: HostFacts['kvm'];
  let native: HostFacts['native'] = { loaded: true, path: nativeModulePath };
  try {
    kvm = { ...loadNative().kvmProbe(), probedBy: 'native' };
  } catch (err) {
    native = { loaded: false, path: nativeModulePath, error: (err as Error).message };
    kvm = { ...probeKvmFromFiles(), probedBy: 'filesystem' };
  }
  const linuxGuest = findGuestAssets(env);
  return {
    kvm,
    pvmModule: existsSync('/sys/module/kvm_pvm'),
    native,
    tinyGuests: { dir: tinyGuestDir, files: listDir(tinyGuestDir, (name) => name.endsWith('.elf')) },
    linuxGuest: {
      dir: guestCacheDir(env),
      kernel: linuxGuest.kernel ?? null,
      initramfs: linuxGuest.initramfs ?? null,
    },
    electron: findElectron(),
    chromium: { path: CHROMIUM_PATH, present: existsSync(CHROMIUM_PATH) },
  };
}
