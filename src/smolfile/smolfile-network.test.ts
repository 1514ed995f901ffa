import { describe, expect, it } from 'vitest';
import { cidrProblem, hostPatternProblem, parsePortEntry } from './smolfile-network.js';
import { parseSmolfile } from './smolfile.js';

/** Each problem as `LINE:COL severity: message`; any error means no Smolfile. */
function problemsIn(text: string): string[] {
  const { smolfile, problems } = parseSmolfile(text, { path: '/nowhere/Smolfile' });
  if (problems.some((problem) => problem.severity === 'error')) expect(smolfile).toBeNull();
  return problems.map((p) => `${p.line}:${p.column} ${p.severity}: ${p.message}`);
}

describe('the network keys', () => {
  it('are off by default and on with net = true', () => {
    expect(parseSmolfile('', { path: '/x/Smolfile' }).smolfile?.network.enabled).toBe(false);
    expect(parseSmolfile('net = true\n', { path: '/x/Smolfile' }).smolfile?.network).toEqual({
      enabled: true,
      ports: [],
      allowHosts: [],
      allowCidrs: [],
    });
  });

  it('forward a lone guest port from a free host port, and ranges port by port', () => {
    expect(parsePortEntry('3000')).toEqual([{ host: null, guest: 3000 }]);
    expect(parsePortEntry('8080:80')).toEqual([{ host: 8080, guest: 80 }]);
    expect(parsePortEntry('5173-5175:5173-5175')).toEqual([
      { host: 5173, guest: 5173 },
      { host: 5174, guest: 5174 },
      { host: 5175, guest: 5175 },
    ]);
  });

  it('name the entry, the line and what is wrong with a malformed port or range', () => {
    const text = [
      'net = true',
      'ports = [',
      '  "8080:80",',
      '  "http",',
      '  "70000:80",',
      '  "10-12:20-21",',
      '  "9-5",',
      '  "1:2:3",',
      '  "8080:81",',
      ']',
    ].join('\n');
    expect(problemsIn(text)).toEqual([
      '4:3 error: `ports[1]` "http": "http" is not a port (1 to 65535) or a range of them ("5173-5180")',
      '5:3 error: `ports[2]` "70000:80": port 70000 is outside 1 to 65535',
      '6:3 error: `ports[3]` "10-12:20-21": the host range has 3 ports and the guest range 2; they must match',
      '7:3 error: `ports[4]` "9-5": the range 9-5 ends before it starts',
      '8:3 error: `ports[5]` "1:2:3": expected "GUEST", "HOST:GUEST" or ranges "A-B:C-D" (ports bind on 127.0.0.1)',
      '9:3 error: `ports[6]` "8080:81": host port 8080 is forwarded already by `ports[0]` (line 3)',
    ]);
  });

  it('allow at most 64 forwards, ranges counted port by port', () => {
    expect(problemsIn('net = true\nports = ["1000-1064:1000-1064"]\n')).toEqual([
      '2:1 error: `ports`: at most 64 forwards, ranges counted port by port; found 65',
    ]);
  });

  it('name a malformed host pattern or CIDR at its line', () => {
    const text = [
      'net = true',
      '[network]',
      'allow_hosts = ["pypi.org", "bad host", "x.org:0", "*.", "host.smol.internal:8080"]',
      'allow_cidrs = [',
      '  "203.0.113.0/24",',
      '  "10.0.0.1/8",',
      '  "10.0.0.0/33",',
      '  "not-an-address",',
      '  "2001:db8::1/32",',
      '  "::ffff:10.0.0.0/104",',
      ']',
    ].join('\n');
    expect(problemsIn(text)).toEqual([
      '3:28 error: `network.allow_hosts[1]` "bad host": expected a host name ("example.org"), a pattern ' +
        '("*.example.org"), either with ":PORT"',
      '3:40 error: `network.allow_hosts[2]` "x.org:0": the port after \':\' must be 1 to 65535, found "0"',
      '3:51 error: `network.allow_hosts[3]` "*.": expected a host name ("example.org"), a pattern ' +
        '("*.example.org"), either with ":PORT"',
      '6:3 error: `network.allow_cidrs[1]` "10.0.0.1/8": the address has bits set past the /8 prefix',
      '7:3 error: `network.allow_cidrs[2]` "10.0.0.0/33": the prefix length must be 0 to 32',
      '8:3 error: `network.allow_cidrs[3]` "not-an-address": expected an IPv4 or IPv6 address with an optional ' +
        '/PREFIX ("203.0.113.0/24")',
      '9:3 error: `network.allow_cidrs[4]` "2001:db8::1/32": the address has bits set past the /32 prefix',
    ]);
  });

  it('check host patterns and CIDRs as the VMM reads them', () => {
    for (const good of ['example.org', '*.example.com', 'api.example.net:443', 'Example.ORG.', 'host.smol.internal']) {
      expect(hostPatternProblem(good)).toBeNull();
    }
    for (const bad of ['', 'a..b', '-a.org', 'foo:', 'foo:8x', 'foo:70000', 'a b']) {
      expect(hostPatternProblem(bad)).not.toBeNull();
    }
    for (const good of ['0.0.0.0/0', '10.9.0.0/16', '198.51.100.50', '::/0', 'fe80::/10', '::ffff:10.0.0.0/104']) {
      expect(cidrProblem(good)).toBeNull();
    }
    for (const bad of ['10.0.0.0/', '1.2.3.4/-1', '::/129', '1.2.3.4/08x', 'fe80::1/10']) {
      expect(cidrProblem(bad)).not.toBeNull();
    }
  });

  it('need net = true for ports and [network]', () => {
    expect(problemsIn('ports = ["3000"]\n[network]\nallow_hosts = ["pypi.org"]\n')).toEqual([
      '1:1 error: `ports` needs a network, and this Smolfile has none (`net` is false by default); add net = true',
      '2:1 error: `network` needs a network, and this Smolfile has none (`net` is false by default); add net = true',
    ]);
    expect(problemsIn('net = "yes"\n')).toEqual(['1:1 error: `net`: expected true or false, found a string "yes"']);
  });

  it('know only allow_hosts and allow_cidrs in [network]', () => {
    expect(problemsIn('net = true\n[network]\nallow_host = ["pypi.org"]\n')).toEqual([
      '3:1 error: unknown key `network.allow_host` in [network]; did you mean `network.allow_hosts`?',
    ]);
  });
});
