#!/usr/bin/env node
// The KVM lab: runs a command from this checkout inside a QEMU VM (TCG, emulated AMD SVM, Debian kernel with
// kvm-amd) where /dev/kvm behaves like hardware KVM. See docs/lab.md.
//
//   npm run lab -- <command> [args...]
//   node scripts/lab.js [--timeout SECONDS] [--stall SECONDS] [--memory MiB] [--cpus N] [--forward PORT]... [--verbose] -- <command...>
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EXIT, LabError, progress } from './lab/errors.js';
import { stageGuestImages } from './lab/guest-images.js';
import { ensureInitramfs } from './lab/initramfs.js';
import { ensureKernel } from './lab/kernel.js';
import { createApt, ensurePackages } from './lab/packages.js';
import { createRunDir, removeStaleRunDirs, writableShares } from './lab/run-dir.js';
import { runInLab } from './lab/vm.js';

const USAGE = `usage: npm run lab -- [options] <command> [args...]
       node scripts/lab.js [options] -- <command> [args...]
options:
  --timeout SECONDS  stop the lab after this long (default 1800)
  --memory MiB       lab VM memory (default 4096)
  --cpus N           lab VM vCPUs (default 1: with 2 the lab kernel freezes or panics under VM churn, docs/lab.md)
  --stall SECONDS    treat a command that writes nothing for this long as hung: ask the lab what it was doing
                     (saved under <cache>/lab/logs), stop it and exit 124 (default: no limit)
  --forward PORT     make a TCP server the command runs on PORT in the lab reachable at 127.0.0.1:PORT on this
                     machine (repeatable; the lab still reaches nothing outside)
  --no-guest-images  do not stage the cache's guest images into the lab's /tmp (saves 10-20 s of boot for a
                     command that boots no image; docs/lab.md, "Guest images in the lab")
  --verbose          show the lab's serial console (boot noise) on stderr`;

const OPTIONS = { '--timeout': 'timeoutSeconds', '--stall': 'stallSeconds', '--memory': 'memory', '--cpus': 'cpus' };

/** Options come first; the first argument that is not one (or everything after `--`) is the command. */
export function parseArgs(args) {
  const options = {
    timeoutSeconds: 1800,
    stallSeconds: 0,
    memory: 4096,
    cpus: 1,
    forwards: [],
    guestImages: true,
    verbose: false,
    argv: [],
  };
  for (let i = 0; i < args.length; i++) {
    const [flag, inline] = args[i].split(/=(.*)/s);
    if (args[i] === '--') return { ...options, argv: args.slice(i + 1) };
    if (args[i] === '--help' || args[i] === '-h') return { ...options, help: true };
    if (args[i] === '--verbose') options.verbose = true;
    else if (args[i] === '--no-guest-images') options.guestImages = false;
    else if (flag === '--forward') {
      const value = inline ?? args[++i];
      if (!/^[1-9][0-9]*$/.test(value ?? '') || Number(value) > 65535)
        throw new LabError(EXIT.usage, `--forward needs a TCP port (1 to 65535), got ${value ?? 'nothing'}`);
      options.forwards.push(Number(value));
    } else if (flag in OPTIONS) {
      const value = inline ?? args[++i];
      if (!/^[1-9][0-9]*$/.test(value ?? ''))
        throw new LabError(EXIT.usage, `${flag} needs a positive whole number, got ${value ?? 'nothing'}`);
      options[OPTIONS[flag]] = Number(value);
    } else if (args[i].startsWith('-')) throw new LabError(EXIT.usage, `unknown option ${args[i]}\n${USAGE}`);
    else return { ...options, argv: args.slice(i) };
  }
  return options;
}

function cacheRoot(env) {
  return env.SMOL_CACHE || path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'smol-studio');
}

/** Everything the VM boots from, downloaded or built on first use and cached under <cache>/lab. */
function prepareLab(labDir) {
  const apt = createApt();
  ensurePackages(apt);
  try {
    fs.mkdirSync(labDir, { recursive: true });
  } catch (error) {
    throw new LabError(
      EXIT.setupFailed,
      `cannot create ${labDir} (${error.code}); set SMOL_CACHE to a writable directory`,
    );
  }
  try {
    const kernel = ensureKernel(apt, labDir);
    return { kernel, initrd: ensureInitramfs(kernel, labDir) };
  } catch (error) {
    if (error instanceof LabError) throw error;
    throw new LabError(EXIT.setupFailed, `preparing the lab in ${labDir} failed: ${error.message}`);
  }
}

async function main(args) {
  const options = parseArgs(args);
  if (options.help) return void console.log(USAGE);
  if (options.argv.length === 0) throw new LabError(EXIT.usage, `no command given\n${USAGE}`);
  const cwd = process.cwd();
  if (cwd === '/') throw new LabError(EXIT.usage, 'run the lab from a checkout directory, not from /');
  const cache = cacheRoot(process.env);
  const labDir = path.join(cache, 'lab');
  const { kernel, initrd } = prepareLab(labDir);
  const shares = writableShares([cwd, cache]);
  removeStaleRunDirs();
  const run = createRunDir({ cwd, argv: options.argv, env: process.env, shares });
  try {
    const staged = options.guestImages ? stageGuestImages(cache, run.dir) : null;
    if (options.verbose && staged) {
      progress(`staging ${staged.files} guest image files (${(staged.bytes / 2 ** 20).toFixed(0)} MiB of data)…`);
    }
    if (options.verbose) progress(`booting ${kernel.release} (${options.cpus} vCPUs, ${options.memory} MiB)…`);
    const nonce = randomBytes(8).toString('hex');
    return await runInLab({ ...options, kernel, initrd, run, shares, nonce, logDir: path.join(labDir, 'logs') });
  } finally {
    run.remove();
  }
}

main(process.argv.slice(2)).then(
  (status) => process.exit(status ?? 0),
  (error) => {
    if (!(error instanceof LabError)) throw error;
    progress(`error: ${error.message}`);
    process.exit(error.status);
  },
);
