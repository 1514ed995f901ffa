// The tiny test guests (native/guests, built by `make -C native guests`) and small helpers to drive them.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Vm, type VmExit, type VmOptions } from '../../src/vmm/vm.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export type GuestName = 'hello' | 'echo' | 'poll' | 'count' | 'smp' | 'dirty' | 'flood' | 'net';

export function guestPath(name: GuestName): string {
  const file = path.join(root, 'native/out/guests', `${name}.elf`);
  if (!existsSync(file)) throw new Error(`${file} is missing: run make -C native guests`);
  return file;
}

/** A VM with its console output collected as text. */
export interface RunningGuest {
  vm: Vm;
  output: () => string;
  /** Resolves with the output once it matches, rejects with what arrived if the VM ends or time runs out first. */
  waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<string>;
}

/** Collects a VM's console output as text and lets a test wait for a pattern in it. Call before `vm.start()`. */
export function watchConsole(vm: Vm): Omit<RunningGuest, 'vm'> {
  let text = '';
  let ended = '';
  let waiters: Array<() => void> = [];
  vm.on('console', (chunk) => {
    text += chunk.toString('latin1');
    for (const w of waiters) w();
  });
  vm.on('exit', (exit: VmExit) => {
    ended = `${exit.reason}${exit.message ? `: ${exit.message}` : ''}`;
    for (const w of waiters) w();
  });
  const waitFor = (pattern: RegExp, timeoutMs = 60_000) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        if (pattern.test(text)) {
          cleanup();
          resolve(text);
        } else if (vm.state === 'exited') {
          cleanup();
          reject(new Error(`the VM ended (${ended}) before ${pattern} appeared; output was:\n${text}`));
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out waiting for ${pattern}; output was:\n${text}`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        waiters = waiters.filter((w) => w !== check);
      };
      waiters.push(check);
      check();
    });
  return { output: () => text, waitFor };
}

export async function startGuest(name: GuestName, options: Partial<VmOptions> = {}): Promise<RunningGuest> {
  const vm = await Vm.create({ kernel: guestPath(name), memoryMiB: 16, ...options });
  const watched = watchConsole(vm);
  vm.start();
  return { vm, ...watched };
}

/**
 * Boots a guest to its end and returns what it printed and how it ended. A guest still running after `timeoutMs`
 * is killed and the call rejects with its output, so a hang fails with evidence rather than a bare test timeout.
 */
export async function runGuest(
  name: GuestName,
  options: Partial<VmOptions> = {},
  input?: string,
  timeoutMs = 90_000,
): Promise<{ output: string; exit: VmExit }> {
  const guest = await startGuest(name, options);
  if (input !== undefined) guest.vm.write(input);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
  const exit = await Promise.race([guest.vm.exited, timedOut]);
  clearTimeout(timer);
  if (exit === 'timeout') {
    await guest.vm.kill();
    throw new Error(`guest ${name} was still running after ${timeoutMs} ms; its output was:\n${guest.output()}`);
  }
  return { output: guest.output(), exit };
}

/** The device names of a state blob's DEVICE sections, in file order (docs/snapshots.md, "state"). */
export function deviceSections(state: Buffer): string[] {
  const names: string[] = [];
  for (let at = 64, n = state.readUInt32LE(56); n > 0; n--) {
    const kind = state.readUInt32LE(at);
    const len = Number(state.readBigUInt64LE(at + 8));
    if (kind === 64) names.push(state.toString('latin1', at + 17, at + 17 + state[at + 16]!));
    at += 16 + len + ((8 - (len % 8)) % 8);
  }
  return names;
}
