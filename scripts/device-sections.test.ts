// Every device the VMM registers with state to save (DEVICE_REGISTER in native/vmm, a device_type with .save) has
// its section described in docs/snapshots.md ("Device sections"), a decoder in the snapshot fuzzer and a seed
// (docs/devices.md, steps 3 and 5). Read from the C sources themselves, so a new device cannot be missed.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

interface Registered {
  name: string;
  file: string;
  saves: boolean;
}

/** The device types of native/vmm: `static struct device_type X = { .name = "...", ... };` with DEVICE_REGISTER(X, ...). */
export function registeredDevices(): Registered[] {
  const found: Registered[] = [];
  for (const file of readdirSync(path.join(root, 'native/vmm')).filter((f) => f.endsWith('.c'))) {
    const source = read(`native/vmm/${file}`);
    for (const m of source.matchAll(/struct device_type (\w+) = \{([\s\S]*?)\n\};/g)) {
      const [, variable, body] = m;
      if (!new RegExp(`^DEVICE_REGISTER\\(${variable}, DEV_PRIO_\\w+\\)$`, 'm').test(source)) continue;
      const name = /\.name = "([^"]+)"/.exec(body!)?.[1];
      if (!name) throw new Error(`native/vmm/${file}: device type ${variable} has no .name`);
      found.push({ name, file, saves: /\.save = /.test(body!) });
    }
  }
  return found;
}

/** The device names in the first column of docs/snapshots.md's "Device sections" table. */
function documentedSections(): string[] {
  const doc = read('docs/snapshots.md');
  const start = doc.indexOf('### Device sections');
  if (start < 0) throw new Error('docs/snapshots.md has no "### Device sections"');
  const end = doc.indexOf('\n#', start + 1);
  return [...doc.slice(start, end < 0 ? undefined : end).matchAll(/^\| `([\w-]+)` \|/gm)].map((m) => m[1]!);
}

describe('device sections', () => {
  const devices = registeredDevices();
  const saving = devices.filter((d) => d.saves).map((d) => d.name);

  it('finds the registered devices in the C sources', () => {
    // A parser that found nothing would make the checks below pass vacuously.
    expect(devices.map((d) => d.name)).toEqual(expect.arrayContaining(['com1', 'i8042', 'virtio-blk', 'vmgenid']));
    expect(saving.length).toBeGreaterThanOrEqual(6);
  });

  it('docs/snapshots.md describes the section of every device that saves state, and no other', () => {
    expect(documentedSections().sort()).toEqual([...saving].sort());
  });

  it('the snapshot fuzzer decodes every device section and its seeds have one of each', () => {
    const fuzzer = read('native/fuzz/fuzz_snapshot.c');
    const table = /decoders\[\] = \{([\s\S]*?)\n\};/.exec(fuzzer)?.[1] ?? '';
    const fuzzed = [...table.matchAll(/\{ "([\w-]+)", \w+ \}/g)].map((m) => m[1]!);
    expect(fuzzed.sort()).toEqual([...saving].sort());
    const sample = read('native/tests/snap_sample.c');
    const seeded = /sample_device_names\[SAMPLE_NR_DEVICES\] = \{([\s\S]*?)\};/.exec(sample)?.[1] ?? '';
    expect([...seeded.matchAll(/"([\w-]+)"/g)].map((m) => m[1]!).sort()).toEqual([...saving].sort());
  });
});
