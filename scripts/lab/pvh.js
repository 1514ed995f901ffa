// Debian's vmlinuz is a bzImage whose kernel is xz-compressed; under TCG the decompressor alone takes ~3 s of every
// boot. The uncompressed ELF inside carries a PVH entry note (CONFIG_PVH), so QEMU can boot it directly: we unpack
// it once into the cache. When that is not possible the lab boots the bzImage, just more slowly.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { spawnSync } from 'node:child_process';
import { progress } from './errors.js';

const XEN_ELFNOTE_PHYS32_ENTRY = 18;

/** The compressed payload of a bzImage (boot protocol ≥ 2.08: payload_offset/length in the setup header). */
function bzImagePayload(image) {
  if (image.readUInt32LE(0x202) !== 0x53726448) return null; // "HdrS"
  const setupSectors = image[0x1f1] || 4;
  const start = (setupSectors + 1) * 512 + image.readUInt32LE(0x248);
  return image.subarray(start, start + image.readUInt32LE(0x24c));
}

function decompress(payload) {
  const magic = payload.subarray(0, 6).toString('hex');
  if (magic.startsWith('1f8b')) return zlib.gunzipSync(payload);
  const tool = magic === 'fd377a585a00' ? 'xz' : magic.startsWith('28b52ffd') ? 'zstd' : null;
  if (!tool) return null;
  const result = spawnSync(tool, ['-dc', '--single-stream'], { input: payload, maxBuffer: 1 << 30 });
  return result.status === 0 ? result.stdout : null;
}

/** True when an ELF64 has a PT_NOTE with the Xen PHYS32_ENTRY note QEMU needs for a PVH boot. */
export function hasPvhNote(elf) {
  if (elf.length < 64 || elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2) return false;
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const [phentsize, phnum] = [elf.readUInt16LE(0x36), elf.readUInt16LE(0x38)];
  for (let i = 0; i < phnum; i++) {
    const ph = phoff + i * phentsize;
    if (elf.readUInt32LE(ph) !== 4) continue; // PT_NOTE
    const [offset, size] = [Number(elf.readBigUInt64LE(ph + 8)), Number(elf.readBigUInt64LE(ph + 32))];
    for (let at = offset; at + 12 <= offset + size;) {
      const [namesz, descsz, type] = [elf.readUInt32LE(at), elf.readUInt32LE(at + 4), elf.readUInt32LE(at + 8)];
      const name = elf
        .subarray(at + 12, at + 12 + namesz)
        .toString()
        .replace(/\0+$/, '');
      if (name === 'Xen' && type === XEN_ELFNOTE_PHYS32_ENTRY) return true;
      at += 12 + Math.ceil(namesz / 4) * 4 + Math.ceil(descsz / 4) * 4;
    }
  }
  return false;
}

/** Writes `vmlinux` next to `vmlinuz` when the bzImage holds a PVH-bootable ELF; returns the image to boot. */
export function ensurePvhImage(kernelDir) {
  const vmlinux = path.join(kernelDir, 'vmlinux');
  const marker = path.join(kernelDir, 'vmlinux.unavailable');
  if (fs.existsSync(vmlinux)) return vmlinux;
  if (fs.existsSync(marker)) return path.join(kernelDir, 'vmlinuz');
  progress('unpacking the kernel for a PVH boot…');
  const payload = bzImagePayload(fs.readFileSync(path.join(kernelDir, 'vmlinuz')));
  const elf = payload && decompress(payload);
  if (!elf || !hasPvhNote(elf)) {
    fs.writeFileSync(marker, 'the bzImage holds no PVH-bootable ELF; booting the bzImage instead\n');
    return path.join(kernelDir, 'vmlinuz');
  }
  const tmp = `${vmlinux}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, elf);
  fs.renameSync(tmp, vmlinux);
  return vmlinux;
}
