// A VM's network host resource (docs/network.md, "Host resource"), written from its Smolfile's `net`, `ports` and
// `[network]`: the file the VMM's virtio-net reads at a boot, a restore and a fork child, one per native instance.
import { writeFileSync } from 'node:fs';
import type { SmolfileNetwork } from '../smolfile/smolfile.js';

/**
 * The file's text. With `freshPorts` (a fork child: its parent still holds the pinned ones) every forward gets a
 * free host port; otherwise a pinned one is asked for as the Smolfile pins it.
 */
export function networkConfigText(network: SmolfileNetwork, { freshPorts = false } = {}): string {
  const lines = ['# written by the engine from the Smolfile (docs/network.md)'];
  for (const host of network.allowHosts) lines.push(`allow_host ${host}`);
  for (const cidr of network.allowCidrs) lines.push(`allow_cidr ${cidr}`);
  for (const { host, guest } of network.ports) lines.push(`forward ${freshPorts ? 0 : (host ?? 0)} ${guest}`);
  return `${lines.join('\n')}\n`;
}

export function writeNetworkConfig(file: string, network: SmolfileNetwork, options: { freshPorts?: boolean }): string {
  writeFileSync(file, networkConfigText(network, options), { mode: 0o600 });
  return file;
}
