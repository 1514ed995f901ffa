// The Kubernetes set-up in deploy/kubernetes/, checked offline (no cluster here): every YAML document parses (with
// Debian's python3-yaml), has a kind and apiVersion Kubernetes serves and the fields that kind requires, and the
// pieces name each other: the pod's runtimeClassName is the RuntimeClass, whose handler is a runtime in the node's
// containerd config, whose runtime_type is the shim binary that npm run build:shim makes; both systemd units give
// the same SMOL_HOME, so the shims find the engine.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import TOML from '@iarna/toml';
import { describe, expect, it } from 'vitest';

const here = path.dirname(fileURLToPath(import.meta.url));

interface K8sObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

/** Every YAML document under deploy/kubernetes, with the file it came from. */
function documents(): { file: string; doc: K8sObject }[] {
  const files = readdirSync(here, { recursive: true, encoding: 'utf8' }).filter((f) => /\.ya?ml$/.test(f));
  const script = 'import json,sys,yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))';
  return files.sort().flatMap((file) => {
    const parsed = spawnSync('python3', ['-c', script, path.join(here, file)], { encoding: 'utf8' });
    if (parsed.status !== 0) throw new Error(`${file}: ${parsed.stderr}`);
    return (JSON.parse(parsed.stdout) as K8sObject[]).filter(Boolean).map((doc) => ({ file, doc }));
  });
}

// The kinds used here, with the apiVersion Kubernetes 1.25+ serves them under.
const API_VERSIONS: Record<string, string> = { RuntimeClass: 'node.k8s.io/v1', Pod: 'v1' };
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function unitValues(file: string, key: string): string[] {
  return readFileSync(path.join(here, file), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith(`${key}=`))
    .map((line) => line.slice(key.length + 1));
}

describe('deploy/kubernetes', () => {
  const all = documents();
  const runtimeClasses = all.filter(({ doc }) => doc.kind === 'RuntimeClass');

  it('every document has a served kind and apiVersion and a DNS-label name', () => {
    expect(all.length).toBeGreaterThanOrEqual(2);
    for (const { file, doc } of all) {
      expect(API_VERSIONS[doc.kind ?? ''], `${file}: kind ${doc.kind}`).toBeDefined();
      expect(doc.apiVersion, `${file}: ${doc.kind}'s apiVersion`).toBe(API_VERSIONS[doc.kind!]);
      expect(doc.metadata?.name ?? '', `${file}: metadata.name`).toMatch(DNS_LABEL);
    }
  });

  it('the RuntimeClass smol has a handler the node containerd config registers, run by our shim', () => {
    expect(runtimeClasses.map(({ doc }) => doc.metadata?.name)).toEqual(['smol']);
    const handler = runtimeClasses[0]!.doc.handler as string;
    expect(handler).toMatch(DNS_LABEL);
    const config = TOML.parse(readFileSync(path.join(here, 'node', 'containerd-smol.toml'), 'utf8')) as {
      version: number;
      plugins: Record<string, { containerd: { runtimes: Record<string, { runtime_type: string }> } }>;
    };
    expect(config.version).toBe(2);
    const runtime = config.plugins['io.containerd.grpc.v1.cri']!.containerd.runtimes[handler];
    expect(runtime, `runtime ${handler} in containerd-smol.toml`).toBeDefined();
    // containerd runs io.containerd.NAME.vN as containerd-shim-NAME-vN from its PATH.
    const [, name, version] = /^io\.containerd\.([a-z0-9]+)\.(v\d+)$/.exec(runtime!.runtime_type)!;
    expect(`containerd-shim-${name}-${version}`).toBe('containerd-shim-smol-v2');
    const buildShim = readFileSync(path.join(here, '..', '..', 'scripts', 'build-shim.js'), 'utf8');
    expect(buildShim).toContain("'containerd-shim-smol-v2'");
    const shimMain = readFileSync(path.join(here, '..', '..', 'shim', 'main.go'), 'utf8');
    expect(shimMain).toContain(`shim.Run("${runtime!.runtime_type}"`);
  });

  it('pods that use it name the RuntimeClass and have containers with names and images', () => {
    const pods = all.filter(({ doc }) => doc.kind === 'Pod');
    expect(pods.length).toBeGreaterThanOrEqual(1);
    for (const { file, doc } of pods) {
      const spec = doc.spec as { runtimeClassName?: string; containers?: { name?: string; image?: string }[] };
      expect(spec.runtimeClassName, `${file}: spec.runtimeClassName`).toBe('smol');
      expect(spec.containers?.length, `${file}: spec.containers`).toBeGreaterThan(0);
      for (const container of spec.containers!) {
        expect(container.name ?? '', `${file}: a container's name`).toMatch(DNS_LABEL);
        expect(container.image, `${file}: container ${container.name}'s image`).toBeTruthy();
      }
    }
  });

  it("schedules onto the nodes the docs label, and the engine and containerd's shims share SMOL_HOME", () => {
    const scheduling = runtimeClasses[0]!.doc.scheduling as { nodeSelector: Record<string, string> };
    const docs = readFileSync(path.join(here, '..', '..', 'docs', 'kubernetes.md'), 'utf8');
    for (const [key, value] of Object.entries(scheduling.nodeSelector)) {
      expect(docs).toContain(`${key}=${value}`);
    }
    const engineHome = unitValues('node/smol-engine.service', 'Environment');
    const shimHome = unitValues('node/containerd-smol.conf', 'Environment');
    expect(engineHome).toEqual(['SMOL_HOME=/var/lib/smol']);
    expect(shimHome).toEqual(engineHome);
    expect(unitValues('node/smol-engine.service', 'ExecStart')[0]).toMatch(/smol\.js engine$/);
  });
});
