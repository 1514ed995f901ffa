// Tier 2, end to end: portable machines (docs/smolmachine.md). A counting guest packed in one data dir goes on
// counting in another; `inspect` prints the manifest; damaged, truncated and lying files are refused with what is
// wrong, leaving the store as it was; and a bounded fuzz loop mutates the real file and checks every mutant is
// either refused cleanly or unpacks to exactly the original files.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Smol } from '../../sdk/typescript/smol.js';
import type { PackMachineResponse } from '../../src/api/machine-schema.js';
import { openMachine } from '../../src/engine/smolmachine-file.js';
import { FOOTER_BYTES, layoutText, type MachineManifest } from '../../src/engine/smolmachine-format.js';
import { EngineHome, eventually, root } from './engine-home.js';

const a = new EngineHome();
const b = new EngineHome();
const scratch = mkdtempSync(path.join(tmpdir(), 'smol-machine-'));
afterAll(async () => {
  await a.destroy();
  await b.destroy();
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

const counts = (text: string) => [...text.matchAll(/(?<=^|\n)count=(\d+)\r?\n/g)].map((m) => Number(m[1]));

/** Whole-line counts a VM printed after the last recording marker matching `marker` (and the last before it). */
async function around(smol: Smol, vm: string, marker: RegExp): Promise<{ before: number[]; after: number[] }> {
  const recording = await smol.api.call('recording', { params: { vm } });
  let before = '';
  let after = '';
  for (const line of recording.split('\n').slice(1)) {
    if (!line) continue;
    const [, kind, data] = JSON.parse(line) as [number, string, string];
    if (kind === 'm' && marker.test(data)) [before, after] = [before + after, ''];
    else if (kind === 'o') after += data;
  }
  return { before: counts(before), after: counts(after) };
}

/** The file's parts, to make mutants whose digest (and manifest offsets) are right again. */
function parts(file: Buffer) {
  const footer = file.subarray(file.length - FOOTER_BYTES);
  const offset = Number(footer.readBigUInt64LE(0));
  const length = Number(footer.readBigUInt64LE(8));
  const manifest = JSON.parse(file.subarray(offset, offset + length).toString()) as MachineManifest;
  return { offset, manifest };
}

/** `body` (everything before the footer's digest, or before the manifest) with a correct footer after it. */
function sealed(head: Buffer, manifest: unknown): Buffer {
  const text = Buffer.from(JSON.stringify(manifest));
  const fields = Buffer.alloc(16);
  fields.writeBigUInt64LE(BigInt(head.length), 0);
  fields.writeBigUInt64LE(BigInt(text.length), 8);
  const body = Buffer.concat([head, text, fields]);
  return Buffer.concat([body, createHash('sha256').update(body).digest()]);
}

/** A copy of `file` with its manifest changed by `change`, sealed again so only the manifest's checks can catch it. */
function withManifest(file: Buffer, change: (m: MachineManifest) => void): Buffer {
  const { offset, manifest } = parts(file);
  change(manifest);
  return sealed(file.subarray(0, offset), manifest);
}

/** What a consistent liar does after changing chunks: every file's layout digest made to match again. */
function relayout(m: MachineManifest): void {
  const files = [...m.snapshots.flatMap((s) => [s.state, s.memory]), ...m.boot.map((x) => x.file)];
  for (const f of files) {
    const text = layoutText(
      f.size,
      f.pieces.map((p) => ({ at: p.at, ...m.chunks[p.chunk]! })),
    );
    f.layout = createHash('sha256').update(text).digest('hex');
  }
}

/** Re-seals a file whose bytes before the manifest were changed (the digest is made right again). */
function resealed(file: Buffer): Buffer {
  const body = file.subarray(0, file.length - 32);
  return Buffer.concat([body, createHash('sha256').update(body).digest()]);
}

describe('a counting guest packed in one data dir and opened in another', { timeout: 300_000 }, () => {
  let smolA: Smol;
  let smolB: Smol;
  let packed: PackMachineResponse;
  let machine: Buffer;
  const file = path.join(scratch, 'counter.smolmachine');
  let beforePack = 0;

  beforeAll(async () => {
    const smolfile = a.smolfile('count', `kernel = "@guests@/count.elf"\ncmdline = "hz=50"\nmemory = 16\n`);
    await a.json(['up', '-f', smolfile, '--name', 'counter']);
    smolA = await a.client();
    await eventually('count=20', async () =>
      (counts((await smolA.logs('counter')).text).at(-1) ?? 0) >= 20 ? true : undefined,
    );
    await smolA.checkpoint('counter', { name: 'first' }); // so the packed chain has a diff layer over a full one
    await eventually('count=40', async () =>
      (counts((await smolA.logs('counter')).text).at(-1) ?? 0) >= 40 ? true : undefined,
    );
    beforePack = counts((await smolA.logs('counter')).text).at(-1)!;
    packed = await a.json<PackMachineResponse>(['pack', 'counter', '-o', file]);
    machine = readFileSync(file);
    await b.json(['ls']); // starts B's engine
    smolB = await b.client();
  });

  it('pack checkpoints the running VM and writes the whole memory chain', () => {
    expect(packed.path).toBe(file);
    expect(packed.bytes).toBe(machine.length);
    expect(packed.layers).toBe(2);
    expect(packed.snapshot.note).toBe(`packed into ${file}`);
    expect(packed.memoryData).toBeGreaterThan(0);
    expect(packed.memoryData).toBeLessThan(16 << 20); // zero pages are not in it
  });

  it('pack of a snapshot packs its chain alone, without a screen', async () => {
    const first = path.join(scratch, 'first.smolmachine');
    const result = await a.json<PackMachineResponse>(['pack', 'first', '-o', first]);
    expect(result.snapshot.name).toBe('first');
    expect(result.layers).toBe(1);
    const inspected = await a.json<{ manifest: MachineManifest }>(['inspect', first]);
    expect(inspected.manifest.console).toBeNull();
    expect(inspected.manifest.made.from).toBe('first');
    const missing = await a.smol(['pack', 'no-such-thing', '-o', first]);
    expect(missing.status).toBe(3);
    expect(missing.stderr).toContain('no snapshot no-such-thing');
  });

  it('two packs at once tell their progress apart by the requestId each named; a malformed id is refused', async () => {
    const events: { request?: string; done: number; total: number }[] = [];
    let opened = () => {};
    const open = new Promise<void>((resolve) => (opened = resolve));
    const stream = smolA.api.events(
      (event) => {
        if (event.type === 'progress' && event.operation === 'pack') events.push(event);
      },
      { onOpen: opened },
    );
    try {
      await open;
      const [one, two] = await Promise.all([
        smolA.pack('first', path.join(scratch, 'one.smolmachine'), { requestId: 'one' }),
        smolA.pack('counter', path.join(scratch, 'two.smolmachine'), { requestId: 'two' }),
      ]);
      for (const [id, result] of [
        ['one', one],
        ['two', two],
      ] as const) {
        const own = events.filter((e) => e.request === id);
        expect(own.length, `progress events of ${id}`).toBeGreaterThan(0);
        expect(own.at(-1)!.done).toBe(own.at(-1)!.total);
        expect(own.map((e) => e.done)).toEqual([...own.map((e) => e.done)].sort((x, y) => x - y));
        expect(result.bytes).toBeGreaterThan(0);
      }
      expect(events.every((e) => e.request === 'one' || e.request === 'two')).toBe(true);
    } finally {
      stream.close();
    }
    await expect(
      smolA.pack('first', path.join(scratch, 'bad.smolmachine'), { requestId: 'no spaces' }),
    ).rejects.toThrow(/requestId/);
    expect(existsSync(path.join(scratch, 'bad.smolmachine'))).toBe(false);
  });

  it('inspect checks the file and prints its manifest, for people and as JSON', async () => {
    const text = await b.smol(['inspect', file]);
    expect(text.status).toBe(0);
    expect(text.stdout).toContain('.smolmachine format 2');
    expect(text.stdout).toContain('every chunk verified');
    expect(text.stdout).toContain(`snapshot:  ${packed.snapshot.id}`);
    expect(text.stdout).toMatch(/boot: +kernel count\.elf/);
    expect(text.stdout).toContain('kernel = "');
    const json = await b.json<{ verified: boolean; manifest: MachineManifest }>(['inspect', file]);
    expect(json.verified).toBe(true);
    expect(json.manifest.snapshot).toBe(packed.snapshot.id);
    expect(json.manifest.snapshots.map((s) => s.manifest.layerParent)).toEqual([
      null,
      json.manifest.snapshots[0]!.manifest.id,
    ]);
    expect(json.manifest.cpu.source).toBe('/proc/cpuinfo');
    expect(json.manifest.console?.screen).toMatch(/count=\d+/);
  });

  it('the API inspects a file before it is opened, writing nothing, and names the CPU features this host lacks', async () => {
    const episodes = (await smolB.episodes()).length;
    const seen = await smolB.inspect(file);
    expect(seen).toMatchObject({ path: file, bytes: machine.length, format: 2, layers: 2, console: true });
    expect(seen.snapshot).toMatchObject({ id: packed.snapshot.id, cpus: 1, memoryBytes: 16 << 20 });
    expect(seen.made).toMatchObject({ from: 'counter' });
    expect(seen.boot).toEqual([{ role: 'kernel', name: 'count.elf', bytes: expect.any(Number) as number }]);
    expect(seen.cpu.missing).toEqual([]);
    expect(seen.cpu.features).toBeGreaterThan(0);
    expect(seen.smolfile.text).toContain('memory = 16');
    // A file packed where the CPU had more is shown with what is missing (opening it is refused, below).
    const richer = path.join(scratch, 'richer.smolmachine');
    writeFileSync(
      richer,
      withManifest(machine, (m) => m.cpu.flags.push('smol_imaginary_feature')),
    );
    expect((await smolB.inspect(richer)).cpu.missing).toEqual(['smol_imaginary_feature']);
    const damaged = Buffer.from(machine);
    damaged[100]! ^= 1;
    writeFileSync(richer, damaged);
    await expect(smolB.inspect(richer)).rejects.toThrow(/its sha256 is not the one its footer records/);
    rmSync(richer);
    expect((await smolB.episodes()).length).toBe(episodes);
    const imports = path.join(b.dir, 'import');
    expect(existsSync(imports) ? readdirSync(imports) : []).toEqual([]);
  });

  it('up --from in the other data dir counts on from where it was packed, with the screen it had', async () => {
    const atPack = (await around(smolA, 'counter', /^checkpoint .*: packed into /)).before.at(-1)!;
    const opened = await b.json<{ id: string; name: string; vm: { id: string; state: string } }>([
      'up',
      '--from',
      file,
    ]);
    expect(opened.vm.state).toBe('running');
    const after = await eventually('counts after the open', async () => {
      const since = (await around(smolB, opened.vm.id, /^opened from counter\.smolmachine$/)).after;
      return since.length >= 3 ? since : undefined;
    });
    // The checkpoint was captured between the last count before `pack` and the one at its marker (+2: a line the
    // capture split is whole on neither side).
    expect(after[0]).toBeGreaterThan(beforePack);
    expect(after[0]).toBeLessThanOrEqual(atPack + 2);
    expect(after[1]).toBe(after[0]! + 1);
    // Its console begins with the packed screen: the counts before the marker are A's.
    const screen = (await around(smolB, opened.vm.id, /^opened from /)).before;
    expect(screen.at(-1)).toBeLessThanOrEqual(atPack);
    // The episode has the packed snapshot; the layer below is kept but not in its timeline.
    const snapshots = await smolB.snapshots(opened.id);
    expect(snapshots.map((s) => s.id)).toEqual([packed.snapshot.id]);
    // Reset boots the unpacked kernel afresh: the count starts again.
    await smolB.reset(opened.vm.id);
    const fresh = await eventually('counts after reset', async () => {
      const since = (await around(smolB, opened.vm.id, /^reset$/)).after;
      return since.length >= 1 ? since : undefined;
    });
    expect(fresh[0]).toBeLessThan(5);
    await smolB.removeVm(opened.vm.id);
  });

  it('up --from in the data dir it was packed in uses the snapshots it has', async () => {
    const opened = await smolA.upFrom(file);
    const after = await eventually('counts in the same store', async () => {
      const since = (await around(smolA, opened.vm.id, /^opened from /)).after;
      return since.length >= 2 ? since : undefined;
    });
    expect(after[0]).toBeGreaterThan(beforePack);
    await smolA.removeVm(opened.vm.id);
  });

  describe('damaged, truncated and lying files are refused with what is wrong, and nothing is kept', () => {
    const cases: Array<[string, () => Buffer, RegExp]> = [
      [
        'not a machine at all',
        () => randomBytes(4096),
        /is not a \.smolmachine file \(it does not start with SMOLMACH\)/,
      ],
      [
        'truncated',
        () => machine.subarray(0, Math.floor(machine.length / 2)),
        /the file is truncated, extended or damaged/,
      ],
      [
        'a layout that lies',
        () => withManifest(machine, (m) => (m.snapshots[1]!.memory.pieces[0]!.at += 4096)),
        /memory: its layout digest does not match its size and pieces/,
      ],
      ['shorter than a header', () => machine.subarray(0, 50), /shorter than any \.smolmachine/],
      [
        'a flipped bit in a chunk',
        () => {
          const copy = Buffer.from(machine);
          copy[100]! ^= 0x10;
          return copy;
        },
        /is corrupt: its sha256 is not the one its footer records/,
      ],
      [
        'a newer format',
        () => {
          const copy = Buffer.from(machine);
          copy.writeUInt32LE(3, 8);
          return resealed(copy);
        },
        /has \.smolmachine format version 3; this Smol reads versions 1 and 2 \(written by a newer Smol\)/,
      ],
      [
        'a newer manifest format',
        () => withManifest(machine, (m) => ((m as { format: number }).format = 7)),
        /its manifest has format 7; this Smol reads formats 1 and 2/,
      ],
      [
        'a disk layer on a file it does not hold',
        () =>
          withManifest(machine, (m) => {
            const empty = { size: 0, pieces: [], layout: createHash('sha256').update(layoutText(0, [])).digest('hex') };
            m.disks = [
              { kind: 'layer', name: '0123456789abcdef0123.layer', was: '/a/b.layer', below: 'c.img', file: empty },
            ];
          }),
        /disk layer 0123456789abcdef0123\.layer sits on c\.img, which the file does not hold/,
      ],
      [
        'a disk image with something below it',
        () =>
          withManifest(machine, (m) => {
            const empty = { size: 0, pieces: [], layout: createHash('sha256').update(layoutText(0, [])).digest('hex') };
            m.disks = [{ kind: 'image', name: 'root.img', was: '/a/root.img', below: 'root.img', file: empty }];
          }),
        /disk image root\.img has something below it/,
      ],
      [
        'a chunk at the wrong offset',
        () => withManifest(machine, (m) => (m.chunks[1]!.offset += 1)),
        /chunk 1 starts at \d+; the chunk before it ends at \d+/,
      ],
      [
        'a chunk of the wrong size',
        () => withManifest(machine, (m) => (m.chunks[0]!.size += 1)),
        /the totals .* are not the chunks'/,
      ],
      [
        'a chunk whose size and totals both lie',
        () =>
          withManifest(machine, (m) => {
            // A liar that keeps everything consistent: the totals and the state's layout digest follow the change.
            m.chunks[0]!.size -= 1;
            m.totals.raw -= 1;
            relayout(m);
          }),
        /decompresses to more than the \d+ bytes its manifest gives/,
      ],
      [
        'a wrong chunk checksum',
        () =>
          withManifest(machine, (m) => {
            m.chunks[0]!.sha256 = '0'.repeat(64);
            relayout(m);
          }),
        /chunk 0 .* does not have the sha256 its manifest records/,
      ],
      [
        'a piece past the end of its file',
        () => withManifest(machine, (m) => (m.snapshots[0]!.state.size = 100)),
        /snapshot sn-\w+'s state: a piece ends at \d+, past the file's 100 bytes/,
      ],
      [
        'a chunk used twice',
        () =>
          withManifest(
            machine,
            (m) => (m.snapshots[0]!.memory.pieces[1]!.chunk = m.snapshots[0]!.memory.pieces[0]!.chunk),
          ),
        /chunk \d+ is used twice/,
      ],
      [
        'a huge memory size',
        () =>
          withManifest(machine, (m) => {
            for (const s of m.snapshots) {
              s.manifest.memoryBytes = 2 ** 52;
              s.memory.size = 2 ** 52 + 4096;
            }
          }),
        /its manifest is invalid at snapshots\.0\.(manifest\.memoryBytes|memory\.size)/,
      ],
      [
        'a broken layer chain',
        () => withManifest(machine, (m) => (m.snapshots[1]!.manifest.layerParent = null)),
        /layer parent is null; the chain has sn-\w+ before it/,
      ],
      [
        'a CPU feature this host lacks',
        () => withManifest(machine, (m) => m.cpu.flags.push('smol_imaginary_feature', 'avx9000')),
        /packed on a CPU with features this host lacks .*: smol_imaginary_feature avx9000/,
      ],
      [
        'a manifest that is not JSON',
        () => {
          const copy = Buffer.from(machine);
          copy[parts(machine).offset] = 0x78; // its opening brace
          return resealed(copy);
        },
        /its manifest is not JSON/,
      ],
    ];

    it.each(cases)('%s', async (_what, make, message) => {
      const bad = path.join(scratch, `bad-${randomBytes(4).toString('hex')}.smolmachine`);
      writeFileSync(bad, make());
      const before = readdirSync(path.join(b.dir, 'snapshots')).sort();
      const episodes = (await smolB.episodes()).length;
      await expect(smolB.upFrom(bad)).rejects.toThrow(message);
      expect(readdirSync(path.join(b.dir, 'snapshots')).sort()).toEqual(before);
      expect((await smolB.episodes()).length).toBe(episodes);
      const imports = path.join(b.dir, 'import');
      expect(existsSync(imports) ? readdirSync(imports) : []).toEqual([]);
      rmSync(bad);
    });
  });

  it('mutants of the real file are either refused with a message or unpack to exactly the same files', async () => {
    // What the engine checks before anything reaches a store (machines.ts unpackMachine, less the CPU and space).
    const unpack = async (bytes: Buffer): Promise<string[] | Error> => {
      const f = path.join(scratch, 'mutant.smolmachine');
      const out = mkdtempSync(path.join(scratch, 'out-'));
      writeFileSync(f, bytes);
      try {
        const m = await openMachine(f);
        try {
          await m.checkSnapshotHeaders();
          const digests: string[] = [];
          const all = [
            ...m.manifest.snapshots.flatMap((s) => [
              [`${s.manifest.id}.state`, s.state] as const,
              [`${s.manifest.id}.memory`, s.memory] as const,
            ]),
            ...m.manifest.boot.map((x) => [x.name, x.file] as const),
          ];
          for (const [name, packedFile] of all) {
            await m.extractFile(packedFile, path.join(out, name), name);
            digests.push(
              createHash('sha256')
                .update(readFileSync(path.join(out, name)))
                .digest('hex'),
            );
          }
          return digests.sort(); // the files' contents; a boot file's name may change without harm
        } finally {
          await m.close();
        }
      } catch (error) {
        return error as Error;
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    };
    const original = await unpack(machine);
    // The real file unpacks to exactly the files it was packed from: A's snapshots and the kernel.
    const sources = [
      ...parts(machine).manifest.snapshots.flatMap((s) =>
        ['state', 'memory'].map((name) => path.join(a.dir, 'snapshots', s.manifest.id, name)),
      ),
      path.join(root, 'native', 'out', 'guests', 'count.elf'),
    ];
    const sha = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex');
    expect(original).toEqual(sources.map(sha).sort());
    const { offset } = parts(machine);
    let refused = 0;
    let identical = 0;
    // A fixed seed: a failure names the mutant, and running again makes the same ones.
    let seed = 20;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 150; i++) {
      let mutant: Buffer = Buffer.from(machine);
      const how = random(5);
      if (how === 0)
        mutant[random(mutant.length)]! ^= 1 << random(8); // a flipped bit anywhere
      else if (how === 1)
        mutant = mutant.subarray(0, random(mutant.length)); // truncated
      else if (how === 2) {
        mutant[random(offset)]! ^= 1 << random(8); // in the chunks, digest made right again
        mutant = resealed(mutant);
      } else {
        // In the manifest's text, sealed again: only the manifest's own checks stand between it and the store.
        const text = Buffer.from(machine.subarray(offset, machine.length - FOOTER_BYTES));
        const at = random(text.length);
        text[at] = how === 3 ? '0123456789'.charCodeAt(random(10)) : text[at]! ^ (1 << random(7));
        let json: unknown;
        try {
          json = JSON.parse(text.toString());
        } catch {
          json = undefined;
        }
        mutant =
          json === undefined
            ? resealed(
                Buffer.concat([machine.subarray(0, offset), text, machine.subarray(machine.length - FOOTER_BYTES)]),
              )
            : sealed(machine.subarray(0, offset), json);
      }
      const result = await unpack(mutant);
      if (result instanceof Error) {
        expect(result.message.length, `mutant ${i} (${how})`).toBeGreaterThan(10);
        expect(result.message, `mutant ${i} (${how})`).not.toMatch(/NaN|\[object|at Object\./);
        refused++;
      } else {
        expect(result, `mutant ${i} (${how}) was accepted`).toEqual(original);
        identical++;
      }
    }
    expect(refused).toBeGreaterThan(50);
    expect(refused + identical).toBe(150);
  });
});
