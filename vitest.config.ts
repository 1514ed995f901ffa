import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';
// @ts-expect-error: a plain JavaScript module without types
import { balanceShards, labAfterLastShard, labSeconds } from './scripts/lab/shards.js';

/**
 * `--shard=I/N` splits the files by their measured lab time (tests/linux/lab-seconds.json, scripts/lab/shards.js)
 * instead of into equal counts: scripts/test.js shards only the Linux guest tests, whose files take 20 s to 10 min,
 * and runs the Python SDK's agent tests after the last shard (so that shard gets less).
 */
class MeasuredShards extends BaseSequencer {
  override async shard(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { index, count } = this.ctx.config.shard!;
    const relative = (spec: TestSpecification) =>
      path.relative(this.ctx.config.root, spec.moduleId).split(path.sep).join('/');
    const shards: Array<{ files: string[] }> = balanceShards(
      files.map(relative),
      count,
      labSeconds(),
      labAfterLastShard(),
    );
    const mine = new Set(shards[index - 1]!.files);
    return files.filter((spec) => mine.has(relative(spec)));
  }
}

// Inside the KVM lab (nested SVM emulated by TCG), a VM now and then dies early or hangs in ways never seen on
// hardware KVM (docs/lab.md, "Known problems"). There, and only there, a failed VM test runs once more;
// scripts/test.js lists every test that passed only on its retry, with its first failure, so nothing is hidden.
const labRetry = process.env.SMOL_IN_LAB === '1' ? 1 : 0;

export default defineConfig({
  test: {
    sequence: { sequencer: MeasuredShards },
    projects: [
      {
        test: {
          name: 'unit',
          // Renderer tests that need a DOM say so in their first line (`// @vitest-environment happy-dom`).
          include: [
            'electron/**/*.test.ts',
            'src/**/*.test.ts',
            'sdk/**/*.test.ts',
            'scripts/**/*.test.ts',
            // The Kubernetes set-up, checked offline (docs/kubernetes.md).
            'deploy/**/*.test.ts',
            // OCI image pulls and conversions on this host (docs/images.md): no VM, a loopback registry at most.
            'tests/images/**/*.test.ts',
            'renderer/**/*.test.{ts,tsx}',
          ],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'vmm',
          // The engine's end-to-end tests run tiny guests too, so they belong with the VMM tests.
          include: ['tests/vmm/**/*.test.ts', 'tests/engine/**/*.test.ts'],
          environment: 'node',
          // VMs are heavy, and the native module installs a process-wide signal handler (SIGUSR2):
          // one file at a time, each in its own child process.
          pool: 'forks',
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 120_000,
          retry: labRetry,
        },
      },
      {
        test: {
          // Real Linux guests (the kernel and initramfs `smol guest build` made) on our VMM: the KVM lab runs them.
          name: 'linux',
          include: ['tests/linux/**/*.test.ts'],
          environment: 'node',
          pool: 'forks',
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 180_000,
          retry: labRetry,
        },
      },
      {
        test: {
          // The UI in Chromium against a real engine with real tiny VMs (e2e/README.md): `npm test` runs it on this
          // machine's /dev/kvm when it is usable (PVM is fine), else with SMOL_E2E_LAB=1 (the engine in the KVM lab).
          name: 'e2e',
          include: ['e2e/**/*.test.ts'],
          environment: 'node',
          pool: 'forks',
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 600_000,
        },
      },
    ],
  },
});
