// The mmdebstrap command line of a `debian:<suite>` image and the shell of its customize hooks (docs/images.md):
// one hook puts our files in (the agent, /init, /etc/inittab), one per Smolfile `init` command runs it in the tree
// with `chroot`, and a last one takes out what only the build needed. mmdebstrap runs the hooks after every package
// is installed and before it removes apt's package lists and cache, with the host's /proc, /sys and /dev mounted in
// the tree and the host's /etc/resolv.conf copied in, so `apt-get install -y …` works in an init command.

/** PATH for init commands: Debian's for root. */
export const INIT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** busybox applets linked into /usr/local/sbin when Debian has none of its own: minbase has no init system. */
export const BUSYBOX_LINKS = ['poweroff', 'reboot', 'halt'];
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Passed from the host to init commands when set, so that apt-get works behind a proxy too. */
export const PROXY_VARIABLES = ['http_proxy', 'https_proxy', 'no_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY'];

/** One word for sh: in single quotes, each single quote as '\''. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * The whole environment of an init command, as `env -i` arguments: PATH, HOME and apt without questions, the host's
 * proxy settings, then the Smolfile's `env` (which may override them). Nothing else of the host's environment gets
 * in. The values are not in the hook's text (mmdebstrap prints that into the build log, and a value may be a
 * secret): each one comes from a variable of mmdebstrap's own environment (hookEnvironment), which mmdebstrap passes
 * on to its hooks.
 */
export function initEnvironment(env: Record<string, string>): string[] {
  const fixed = [`PATH=${INIT_PATH}`, 'HOME=/root', 'DEBIAN_FRONTEND=noninteractive'].map(shellQuote);
  // The host's proxy settings are part of its network: each one only when it is set (sh's ${name:+word}).
  const proxies = PROXY_VARIABLES.map((name) => `\${${name}:+"${name}=$${name}"}`);
  return [...fixed, ...proxies, ...Object.keys(checkEnv(env)).map((name) => `"${name}=$${hookVariable(name)}"`)];
}

/** The variables to add to mmdebstrap's environment for initEnvironment's arguments. */
export function hookEnvironment(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(checkEnv(env)).map(([name, value]) => [hookVariable(name), value]));
}

const hookVariable = (name: string) => `SMOL_INIT_ENV_${name}`;

/** Throws naming the first entry that cannot be an environment variable. */
export function checkEnv(env: Record<string, string>): Record<string, string> {
  for (const [name, value] of Object.entries(env)) {
    if (!ENV_NAME.test(name)) throw new Error(`env: ${JSON.stringify(name)} is not a variable name`);
    if (value.includes('\0')) throw new Error(`env: ${name}'s value contains a NUL character`);
  }
  return env;
}

/** The lines that frame init command `index`'s output in mmdebstrap's; `marker` is unique to the build. */
export const initBegin = (marker: string, index: number) => `${marker} begin ${index}`;
export const initEnd = (marker: string, index: number, status: number | string) => `${marker} end ${index} ${status}`;

/** The hook that installs our files from `files` (a directory holding smol-agent, init and inittab). */
export function installHook(files: string): string {
  const from = (name: string) => shellQuote(`${files}/${name}`);
  return [
    'set -e',
    `install -m 0755 ${from('smol-agent')} "$1/sbin/smol-agent"`,
    `install -m 0755 ${from('init')} "$1/init"`,
    `install -m 0644 ${from('inittab')} "$1/etc/inittab"`,
    'echo smol > "$1/etc/hostname"',
    `printf '127.0.0.1\\tlocalhost\\n127.0.1.1\\tsmol\\n' > "$1/etc/hosts"`,
    `for applet in ${BUSYBOX_LINKS.join(' ')}; do`,
    '  [ -e "$1/usr/sbin/$applet" ] || [ -e "$1/sbin/$applet" ] || ln -s /bin/busybox "$1/usr/local/sbin/$applet"',
    'done',
  ].join('\n');
}

/**
 * The hook that runs one init command as root in the tree, with only `env` (mmdebstrap's environment must have
 * hookEnvironment(env) in it), no stdin and its stderr with its stdout,
 * framed by marker lines that carry its exit status. Everything goes to stderr, where mmdebstrap writes its own
 * lines, so the order holds. A failing command fails the hook, and so mmdebstrap.
 */
export function initHook(command: string, index: number, env: Record<string, string>, marker: string): string {
  const assignments = initEnvironment(env).join(' ');
  return [
    'exec >&2',
    `echo ${shellQuote(initBegin(marker, index))}`,
    `chroot "$1" /usr/bin/env -i ${assignments} /bin/sh -c ${shellQuote(command)} </dev/null 2>&1`,
    'status=$?',
    `echo ${shellQuote(initEnd(marker, index, ''))}"$status"`,
    'exit "$status"',
  ].join('\n');
}

/**
 * The last hook: the host's resolv.conf goes (mmdebstrap copied it in for the build; the guest has no network).
 * mmdebstrap then empties apt's package lists and cache itself, with a config file it keeps in the tree's /tmp until
 * then, so /tmp is emptied after mmdebstrap ends (emptyTmp), not here.
 */
export function finishHook(): string {
  return 'rm -f "$1/etc/resolv.conf"';
}

export interface MmdebstrapOptions {
  suite: string;
  mirror: string;
  /** Where the tree goes: a directory that does not exist yet. */
  tree: string;
  /** Packages on top of minbase. */
  include: string[];
  hooks: string[];
}

/** mmdebstrap as root (real chroot, real mounts), minbase plus `include`, verbose so that its output has progress. */
export function mmdebstrapArgs(options: MmdebstrapOptions): string[] {
  return [
    '--mode=root',
    '--variant=minbase',
    `--include=${options.include.join(',')}`,
    '--verbose',
    ...options.hooks.map((hook) => `--customize-hook=${hook}`),
    options.suite,
    options.tree,
    options.mirror,
  ];
}
