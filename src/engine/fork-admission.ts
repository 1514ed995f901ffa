// Admission of fork children (docs/engine.md, "Bursts"): a fork of n is made in waves of at most FORK_WAVE children
// per vmhost call, and each wave only as large as the vmhost's file descriptors and the host's available memory
// allow, with what one child cost in the wave before. A child that does not fit waits (it shows `creating`) until
// room is made or ADMIT_WAIT_MS pass; a fork is never refused for the number of children it asks for.
import { readFileSync, readdirSync } from 'node:fs';
import { ApiFailure } from '../api/engine-api.js';

/** Children per vmhost fork call (SMOL_FORK_WAVE overrides, 1 to 1024). */
export const FORK_WAVE = waveFromEnv(process.env.SMOL_FORK_WAVE);
/** File descriptors a vmhost keeps free below its soft limit (for its IPC, disk layers and a restore). */
export const FD_RESERVE = 64;
/** Memory the host keeps available (MemAvailable) after a wave. */
export const MEMORY_RESERVE_BYTES = 512 * 2 ** 20;
/** How long children wait for room before the fork fails, naming the budget that was short. */
export const ADMIT_WAIT_MS = 60_000;

function waveFromEnv(value: string | undefined): number {
  if (value === undefined || value === '') return 32;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1024)
    throw new RangeError(`SMOL_FORK_WAVE must be a whole number from 1 to 1024 (got ${JSON.stringify(value)})`);
  return n;
}

/** What one process uses now: open fds, its soft fd limit, resident bytes. */
export interface ProcessUsage {
  fds: number;
  fdLimit: number;
  rssBytes: number;
}

export function processUsage(pid: number): ProcessUsage {
  const fds = readdirSync(`/proc/${pid}/fd`).length;
  const limits = readFileSync(`/proc/${pid}/limits`, 'utf8');
  const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1];
  const fdLimit = soft === undefined || soft === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(soft);
  const rss = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return { fds, fdLimit, rssBytes: Number(rss ?? 0) * 1024 };
}

/** The host's MemAvailable in bytes. */
export function memoryAvailable(): number {
  const kb = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
  return Number(kb ?? 0) * 1024;
}

/** What one child cost: measured over the last wave; before the first, a guess on the safe side. */
export interface ChildCost {
  fds: number;
  bytes: number;
}

/** The first wave's estimate: a tiny VM takes about 10 fds and a few MiB of VMM and guest pages it touches. */
export function firstGuess(guestBytes: number): ChildCost {
  return { fds: 16, bytes: Math.min(guestBytes, 64 * 2 ** 20) };
}

/**
 * How many of `wanted` children the host can take now, at most FORK_WAVE: the pure rule, given what the vmhost uses
 * and what the host has available.
 */
export function roomFor(wanted: number, usage: ProcessUsage, available: number, cost: ChildCost, wave = FORK_WAVE) {
  const byFds = Math.floor((usage.fdLimit - FD_RESERVE - usage.fds) / Math.max(1, cost.fds));
  const byMemory = Math.floor((available - MEMORY_RESERVE_BYTES) / Math.max(1, cost.bytes));
  return Math.max(0, Math.min(wanted, wave, byFds, byMemory));
}

/**
 * Waits until the vmhost `pid` has room for at least one more child and answers how many (up to `wanted`), or fails
 * after `waitMs` saying which budget was short.
 */
export async function admit(
  pid: number,
  wanted: number,
  cost: ChildCost,
  options: { waitMs?: number; wave?: number } = {},
): Promise<number> {
  const deadline = Date.now() + (options.waitMs ?? ADMIT_WAIT_MS);
  for (;;) {
    const usage = processUsage(pid);
    const available = memoryAvailable();
    const room = roomFor(wanted, usage, available, cost, options.wave);
    if (room > 0) return room;
    if (Date.now() >= deadline) {
      throw new ApiFailure(
        503,
        `no room for another fork child: its vmhost has ${usage.fds} of ${usage.fdLimit} file descriptors open ` +
          `(${FD_RESERVE} kept free, a child takes about ${cost.fds}) and the host has ` +
          `${Math.round(available / 2 ** 20)} MiB available (${MEMORY_RESERVE_BYTES / 2 ** 20} MiB kept, a child ` +
          `takes about ${Math.round(cost.bytes / 2 ** 20)} MiB)`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
