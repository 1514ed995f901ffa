#!/usr/bin/env node
// Fan out, score, keep the best: the shape of a best-of-N rollout with Smol Studio's SDK.
//
//   node examples/fanout.mjs [SMOLFILE] [N]      (default: smolfiles/shell.smolfile, 4 forks)
//
// It starts an episode, warms the VM up (here: writes a file every branch will share), checkpoints it, forks N
// children from that point, gives each child a different "attempt" through its console, reads each attempt's score,
// keeps the best branch (checkpointed with its score as the note) and removes the others. The episode stays, so
// `smol snapshots EPISODE --tree` shows what happened. Prints a JSON summary on stdout.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Smol } from 'smol-studio';

const here = path.dirname(fileURLToPath(import.meta.url));
const smolfile = process.argv[2] ?? path.join(here, '..', 'smolfiles', 'shell.smolfile');
const count = Number(process.argv[3] ?? 4);

const smol = await Smol.connect();
const { episode, vm } = await smol.up(smolfile);
console.error(`episode ${episode.name} (${episode.id}): ${vm.name} is running`);

// Warm-up: state every branch starts from.
await smol.write(vm.id, 'echo "task: pick a number" > /tmp/task; echo WARM-$((40 + 2))\n');
await smol.waitForOutput(vm.id, /WARM-42/, 60_000);
const warm = await smol.checkpoint(vm.id, { name: 'warm', note: 'the shared starting point' });

const { children } = await smol.fork(vm.id, count);
console.error(`forked ${children.length} children at ${warm.name}`);

// Each child makes its own attempt; the shell computes the score, so the typed line never matches the pattern.
const attempts = children.map(async (child, i) => {
  await smol.write(child.id, `cat /tmp/task >/dev/null && echo "SCORE-$(( (${i} * 37 + $$) % 100 ))-END"\n`);
  const match = await smol.waitForOutput(child.id, /SCORE-(\d+)-END/, 60_000);
  return { child, score: Number(match[1]) };
});
const results = await Promise.all(attempts);
const best = results.reduce((a, b) => (b.score > a.score ? b : a));

const kept = await smol.checkpoint(best.child.id, { name: 'best', note: `best of ${count}: score ${best.score}` });
for (const { child } of results) if (child.id !== best.child.id) await smol.removeVm(child.id);

console.log(
  JSON.stringify({
    episode: episode.id,
    scores: results.map(({ child, score }) => ({ vm: child.id, score })),
    best: { vm: best.child.id, score: best.score, snapshot: kept.id },
  }),
);
