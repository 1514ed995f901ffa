// Which keys a Smolfile may have, which of smolvm's keys Smol Studio does not support yet (and what to do instead),
// and a "did you mean" for typos. docs/smolfile.md is the reference for all of them.

/** The keys of each table we support; the top level is `''`. */
export const KNOWN_KEYS: Readonly<Record<string, readonly string[]>> = {
  '': [
    'image',
    'kernel',
    'initrd',
    'cmdline',
    'cpus',
    'memory',
    'entrypoint',
    'cmd',
    'env',
    'workdir',
    'user',
    'init',
    'volumes',
    'health',
    'snapshots',
    'net',
    'ports',
    'network',
    'dev',
    'service',
  ],
  dev: ['env', 'init', 'workdir', 'ports', 'volumes'],
  service: ['port', 'listen', 'protocol'],
  network: ['allow_hosts', 'allow_cidrs'],
  health: ['exec', 'interval', 'timeout', 'startup_grace', 'retries'],
  snapshots: ['auto_checkpoint', 'keep'],
};

/**
 * smolvm's keys (crates/smolvm-smolfile, docs/smolfile.md) that we do not support yet, by dotted path, with what to
 * do instead where there is something. Each one is an error: accepting them would promise behaviour the VM does not
 * have.
 */
export const UNSUPPORTED_SMOLVM_KEYS: Readonly<Record<string, string>> = {
  gpu: 'guests have no GPU device; remove the key',
  gpu_vram: 'guests have no GPU device; remove the key',
  rosetta: 'guests are x86-64 on x86-64 Linux hosts, so there is nothing to translate; remove the key',
  cuda: 'guests have no GPU access; remove the key',
  auto_graph: 'guests have no GPU access; remove the key',
  docker_socket: 'no guest socket is forwarded to the host; remove the key',
  storage: "the guest's disk is its image; remove the key",
  overlay: "the guest's disk is its image, and every snapshot keeps its changes; remove the key",
  secrets: 'nothing is injected from the host yet; remove the table',
  artifact: 'Smol Studio does not pack machines; remove the table',
  pack: 'Smol Studio does not pack machines; remove the table',
  fork: 'fork any running VM or snapshot with `smol fork`; automatic checkpoints are set in `[snapshots]`',
  restart: 'remove the table (a stopped episode is started again with `smol start`)',
  auth: 'no SSH agent is forwarded into the guest; remove the table',
};

/** Damerau–Levenshtein distance with adjacent transpositions (optimal string alignment), case-insensitive. */
export function editDistance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  const rows: number[][] = Array.from({ length: s.length + 1 }, (_, i) =>
    Array.from({ length: t.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number) => rows[i]?.[j] ?? Infinity;
  for (let i = 1; i <= s.length; i++) {
    const row = rows[i] ?? [];
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      row[j] = best;
    }
  }
  return at(s.length, t.length);
}

/**
 * The closest candidate when it is close enough to be a typo (at most 2 edits, and fewer than half the name), else
 * one that the name contains or is contained in (`memory_mib` → `memory`, `mem` → `memory`), else one that starts
 * with the same four letters (`retry` → `retries`).
 */
export function suggestKey(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  if (best !== undefined && bestDistance <= Math.min(2, Math.floor(name.length / 2))) return best;
  const lower = name.toLowerCase();
  if (lower.length < 3) return undefined;
  return (
    candidates.find((candidate) => lower.includes(candidate) || candidate.includes(lower)) ??
    candidates.find((candidate) => lower.length >= 4 && candidate.startsWith(lower.slice(0, 4)))
  );
}
