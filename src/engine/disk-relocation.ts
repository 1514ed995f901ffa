// Moving a VM's disk chains to another data dir (a .smolmachine unpacked elsewhere, docs/smolmachine.md "Disks"):
// the VMM names the layer below by absolute path in every layer's header (docs/disks.md, "The layer file") and the
// frozen layer (or read-only image) of each disk in the state blob's `virtio-blk*` sections (docs/snapshots.md,
// "Device sections"), each under a CRC-64/XZ. This module reads those paths and writes them anew, checksums
// included; ids, sizes and data never change, so the VMM's own checks (layer ids, sizes, the chain) still hold.
import { open } from 'node:fs/promises';

// ---- CRC-64/XZ: ECMA-182 polynomial, reflected, init and final xor all ones (as native/vmm/snapfile.c) ----

const POLY = 0xc96c5795d7870f42n;
const TABLE = (() => {
  const table = new BigUint64Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = BigInt(i);
    for (let bit = 0; bit < 8; bit++) crc = crc & 1n ? (crc >> 1n) ^ POLY : crc >> 1n;
    table[i] = crc;
  }
  return table;
})();

export function crc64(bytes: Uint8Array): bigint {
  let crc = 0xffffffffffffffffn;
  for (const byte of bytes) crc = TABLE[Number((crc ^ BigInt(byte)) & 0xffn)]! ^ (crc >> 8n);
  return crc ^ 0xffffffffffffffffn;
}

// ---- the state blob ----

const STATE_MAGIC = 'SMOLSNAP';
const STATE_HEADER = 64;
const KIND_DEVICE = 64;
/** virtio_dev_state's encoded size, then writable (1), 7 zeros, the disk size (8), the layer id (16). */
const BLK_PATH_LENGTH_AT = 144 + 1 + 7 + 8 + 16;
const PATH_MAX = 3968;

/** A disk a state blob names: its device (`virtio-blk` is the root disk, `virtio-blk-N` volumes). */
export interface StateDisk {
  device: string;
  writable: boolean;
  /** The frozen layer, or the read-only image, the disk restores from. */
  path: string;
}

interface Section {
  kind: number;
  index: number;
  body: Buffer;
}

function parseState(state: Buffer, what: string): Section[] {
  const bad = (why: string) => new Error(`${what}: ${why}`);
  if (state.length < STATE_HEADER + 8 || state.toString('latin1', 0, 8) !== STATE_MAGIC) {
    throw bad('not a snapshot state blob');
  }
  if (Number(state.readBigUInt64LE(16)) !== state.length) throw bad('its size field is not its length');
  if (crc64(state.subarray(0, state.length - 8)) !== state.readBigUInt64LE(state.length - 8)) {
    throw bad('its CRC-64 does not match (a damaged state)');
  }
  const sections: Section[] = [];
  let at = STATE_HEADER;
  for (let n = state.readUInt32LE(56); n > 0; n--) {
    if (at + 16 > state.length - 8) throw bad(`section ${sections.length} runs past the end`);
    const kind = state.readUInt32LE(at);
    const index = state.readUInt32LE(at + 4);
    const length = Number(state.readBigUInt64LE(at + 8));
    if (at + 16 + length > state.length - 8) throw bad(`section ${sections.length} runs past the end`);
    sections.push({ kind, index, body: state.subarray(at + 16, at + 16 + length) });
    at += 16 + length + ((8 - (length % 8)) % 8);
  }
  return sections;
}

function deviceName(body: Buffer): string {
  return body.toString('latin1', 1, 1 + body[0]!);
}

const isDisk = (name: string) => name === 'virtio-blk' || /^virtio-blk-[1-9]$/.test(name);

/** The disks a state blob restores from. */
export function stateDisks(state: Buffer, what = 'state'): StateDisk[] {
  const disks: StateDisk[] = [];
  for (const { kind, body } of parseState(state, what)) {
    if (kind !== KIND_DEVICE || !isDisk(deviceName(body))) continue;
    const at = 1 + body[0]!;
    const length = body.readUInt16LE(at + BLK_PATH_LENGTH_AT);
    disks.push({
      device: deviceName(body),
      writable: body[at + 144] === 1,
      path: body.toString('utf8', at + BLK_PATH_LENGTH_AT + 4, at + BLK_PATH_LENGTH_AT + 4 + length),
    });
  }
  return disks;
}

/** The state blob with each disk's path replaced by `relocate(path)`; sizes and the CRC written anew. */
export function relocateState(state: Buffer, relocate: (path: string, device: string) => string, what = 'state') {
  const sections = parseState(state, what).map((section) => {
    if (section.kind !== KIND_DEVICE || !isDisk(deviceName(section.body))) return section;
    const at = 1 + section.body[0]!;
    const lengthAt = at + BLK_PATH_LENGTH_AT;
    const old = section.body.toString('utf8', lengthAt + 4, lengthAt + 4 + section.body.readUInt16LE(lengthAt));
    const path = Buffer.from(relocate(old, deviceName(section.body)), 'utf8');
    if (path.length < 1 || path.length > PATH_MAX) throw new Error(`${what}: a disk path of ${path.length} bytes`);
    const body = Buffer.concat([section.body.subarray(0, lengthAt + 4), path]);
    body.writeUInt16LE(path.length, lengthAt);
    return { ...section, body };
  });
  const parts: Buffer[] = [Buffer.from(state.subarray(0, STATE_HEADER))];
  for (const { kind, index, body } of sections) {
    const head = Buffer.alloc(16);
    head.writeUInt32LE(kind, 0);
    head.writeUInt32LE(index, 4);
    head.writeBigUInt64LE(BigInt(body.length), 8);
    parts.push(head, body, Buffer.alloc((8 - (body.length % 8)) % 8));
  }
  const out = Buffer.concat([...parts, Buffer.alloc(8)]);
  out.writeBigUInt64LE(BigInt(out.length), 16);
  out.writeBigUInt64LE(crc64(out.subarray(0, out.length - 8)), out.length - 8);
  return out;
}

// ---- a layer's header ----

const LAYER_MAGIC = 'SMOLDISK';
const LAYER_HEADER = 4096;
const BELOW_LENGTH_AT = 88;
const BELOW_PATH_AT = 96;
const LAYER_CRC_AT = 4088;

/** Rewrites the path of what is below the layer `file` (its header's CRC too); nothing else of the file changes. */
export async function relocateLayer(file: string, below: string): Promise<void> {
  const handle = await open(file, 'r+');
  try {
    const header = Buffer.alloc(LAYER_HEADER);
    const { bytesRead } = await handle.read(header, 0, LAYER_HEADER, 0);
    if (bytesRead !== LAYER_HEADER || header.toString('latin1', 0, 8) !== LAYER_MAGIC) {
      throw new Error(`${file} is not a disk layer`);
    }
    if (crc64(header.subarray(0, LAYER_CRC_AT)) !== header.readBigUInt64LE(LAYER_CRC_AT)) {
      throw new Error(`${file}: its header's CRC-64 does not match (a damaged layer)`);
    }
    const path = Buffer.from(below, 'utf8');
    if (path.length < 1 || path.length > LAYER_CRC_AT - BELOW_PATH_AT) {
      throw new Error(`${file}: the path below would be ${path.length} bytes`);
    }
    header.fill(0, BELOW_PATH_AT, LAYER_CRC_AT);
    path.copy(header, BELOW_PATH_AT);
    header.writeUInt32LE(path.length, BELOW_LENGTH_AT);
    header.writeBigUInt64LE(crc64(header.subarray(0, LAYER_CRC_AT)), LAYER_CRC_AT);
    await handle.write(header, 0, LAYER_HEADER, 0);
    await handle.sync();
  } finally {
    await handle.close();
  }
}
