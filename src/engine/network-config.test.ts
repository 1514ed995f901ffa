import { describe, expect, it } from 'vitest';
import { parseSmolfile } from '../smolfile/smolfile.js';
import { networkConfigText } from './network-config.js';

const network = (text: string) => parseSmolfile(text, { path: '/x/Smolfile' }).smolfile!.network;

describe("a VM's network resource", () => {
  const smolfile = [
    'net = true',
    'ports = ["8080:80", "3000", "5173-5174:6173-6174"]',
    '[network]',
    'allow_hosts = ["pypi.org", "host.smol.internal:8000"]',
    'allow_cidrs = ["203.0.113.0/24"]',
  ].join('\n');

  it('carries the allow lists and the forwards, pinned ports as the Smolfile pins them', () => {
    expect(networkConfigText(network(smolfile)).split('\n').slice(1)).toEqual([
      'allow_host pypi.org',
      'allow_host host.smol.internal:8000',
      'allow_cidr 203.0.113.0/24',
      'forward 8080 80',
      'forward 0 3000',
      'forward 5173 6173',
      'forward 5174 6174',
      '',
    ]);
  });

  it('gives a fork child fresh host ports for every forward', () => {
    const lines = networkConfigText(network(smolfile), { freshPorts: true }).split('\n');
    expect(lines.filter((l) => l.startsWith('forward'))).toEqual([
      'forward 0 80',
      'forward 0 3000',
      'forward 0 6173',
      'forward 0 6174',
    ]);
  });
});
