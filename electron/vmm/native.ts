// The Node-API binding of the C VMM (native/binding). The contract is docs/vmm.md; these types mirror it.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { packageRoot } from '../package-root.js';

export type KvmImplementation = 'hardware' | 'pvm' | 'unknown';

export interface KvmProbe {
  present: boolean;
  usable: boolean;
  error?: string;
  apiVersion?: number;
  implementation: KvmImplementation;
  /** Keyed by the KVM_CAP_* name without its prefix: `IRQCHIP`, `PIT2`, `USER_MEMORY`, ... */
  capabilities: Record<string, boolean>;
  /** The capabilities the VMM refuses to run without (a subset of the keys of `capabilities`). */
  required?: string[];
}

export interface NativeVmConfig {
  kernel: string;
  initrd?: string;
  cmdline?: string;
  memoryMiB: number;
  cpus: number;
  consoleBufferBytes?: number;
}

export type VmState = 'created' | 'running' | 'paused' | 'exited';
export type VmExitReason = 'reset' | 'poweroff' | 'shutdown' | 'panic' | 'killed' | 'error';

export interface VmExit {
  reason: VmExitReason;
  code: number;
  message: string;
}

export interface NativeVm {
  start(): void;
  resume(): void;
  pause(): Promise<void>;
  kill(): Promise<void>;
  /** Returns how many bytes the console input queue accepted. */
  writeConsole(data: Buffer): number;
  readonly state: VmState;
}

export interface NativeBinding {
  /** Never throws. */
  kvmProbe(): KvmProbe;
  createVm(
    config: NativeVmConfig,
    onConsole: (chunk: Buffer) => void,
    onExit: (exit: VmExit) => void,
  ): Promise<NativeVm>;
}

export const nativeModulePath = path.join(packageRoot, 'native', 'build', 'Release', 'smol.node');

const BUILD_FIX = 'run npm run build:native';
let binding: NativeBinding | undefined;

/** Loads the addon once; throws an Error that names the file and the fix when it is missing or broken. */
export function loadNative(): NativeBinding {
  if (binding) return binding;
  if (!existsSync(nativeModulePath)) {
    throw new Error(`native module not built: ${nativeModulePath} does not exist; ${BUILD_FIX}`);
  }
  let loaded: Partial<NativeBinding>;
  try {
    loaded = createRequire(import.meta.url)(nativeModulePath) as Partial<NativeBinding>;
  } catch (err) {
    throw new Error(`cannot load native module ${nativeModulePath}: ${(err as Error).message}; ${BUILD_FIX}`, {
      cause: err,
    });
  }
  const missing = (['kvmProbe', 'createVm'] as const).filter((name) => typeof loaded[name] !== 'function');
  if (missing.length > 0) {
    throw new Error(
      `native module ${nativeModulePath} does not export ${missing.join(', ')} (stale build?); ${BUILD_FIX}`,
    );
  }
  binding = loaded as NativeBinding;
  return binding;
}
