// Reads mmdebstrap's output (stderr, with --verbose: its `I:` stage lines, apt's and dpkg's lines, and our init
// commands' output between marker lines) as it comes: progress for the build display, each init command's output
// and status, and, when the build fails, one message that says what failed.
import type { ProgressCallback } from './build-progress.js';
import { initBegin, initEnd } from './debian-hooks.js';

export interface InitOutput {
  command: string;
  /** stdout and stderr together, as the command printed them. */
  output: string;
}

interface RunningInit {
  index: number;
  lines: string[];
  status: number | null;
}

const STAGES: [RegExp, string, string][] = [
  [/^I: running apt-get update/, 'download', 'apt-get update'],
  [/^I: downloading packages/, 'download', 'the essential packages'],
  [/^I: extracting archives/, 'install', 'extracting the essential packages'],
  [/^I: installing essential packages/, 'install', 'the essential packages'],
  [/^I: installing remaining packages/, 'install', 'the remaining packages'],
  [/^I: cleaning package lists/, 'image', "emptying apt's package lists and cache"],
];
// `Get:12 http://deb.debian.org/debian bookworm/main amd64 libgcrypt20 amd64 1.10.1-3+deb12u1 [696 kB]`
const GET = /^Get:(\d+) \S+ \S+ \S+ (\S+) \S+ (\S+) \[/;
const NEWLY_INSTALLED = /^\d+ upgraded, (\d+) newly installed/;
const DPKG = /^(Unpacking|Setting up) (\S+?)(?::\w+)? \(([^)]*)\)/;
const NETWORK =
  /Could not resolve|Temporary failure resolving|Could not connect|Connection failed|Connection timed out|Unable to connect|Network is unreachable|No route to host/;
/** E: lines that only repeat that something failed, not why. */
const GENERIC_ERROR = /^(mmdebstrap failed to run|.* failed|command failed: .*|hook failed.*)$/;
const TAIL_LINES = 20;
const DETAIL_CHARS = 100;

/** What a terminal would show of a line with carriage returns: its last non-empty part. */
function shown(line: string): string {
  return (
    line
      .split('\r')
      .filter((part) => part.trim() !== '')
      .pop() ?? ''
  );
}

const clip = (text: string) => (text.length > DETAIL_CHARS ? `${text.slice(0, DETAIL_CHARS - 1)}…` : text);

export class MmdebstrapOutput {
  private step = '';
  private total = 0;
  private got = 0;
  private dpkgSteps = 0;
  private readonly inits: RunningInit[] = [];
  private current: RunningInit | null = null;
  private readonly errors: string[] = [];
  private readonly tail: string[] = [];

  constructor(
    private readonly commands: string[],
    private readonly marker: string,
    private readonly report: ProgressCallback = () => {},
  ) {}

  /** One line of mmdebstrap's output (runLogged's onLine). */
  readonly line = (raw: string): void => {
    const line = shown(raw);
    this.tail.push(line);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
    if (this.initLine(line)) return;
    const error = /^E: (.*)/.exec(line);
    if (error?.[1]) this.errors.push(error[1].trim());
    const stage = STAGES.find(([pattern]) => pattern.test(line));
    if (stage) {
      this.step = stage[1];
      this.got = 0;
      this.dpkgSteps = 0;
      if (stage[1] === 'download') this.total = 0;
      this.report({ step: stage[1], detail: stage[2] });
      return;
    }
    const newly = NEWLY_INSTALLED.exec(line);
    if (newly) {
      this.total = Number(newly[1]);
      this.got = 0;
      this.dpkgSteps = 0;
      return;
    }
    const get = GET.exec(line);
    if (get && this.step !== '') {
      this.got = Math.max(this.got, Number(get[1]));
      const fraction = this.step === 'download' && this.total > 0 ? this.got / this.total : undefined;
      this.report({
        step: this.step,
        detail: clip(`get ${get[2]} ${get[3]}`),
        ...(fraction !== undefined && { fraction }),
      });
      return;
    }
    const dpkg = DPKG.exec(line);
    if (dpkg && this.step === 'install') {
      this.dpkgSteps++; // each package is unpacked, then set up
      const fraction = this.total > 0 ? Math.min(1, this.dpkgSteps / (2 * this.total)) : undefined;
      const what = `${(dpkg[1] ?? '').toLowerCase()} ${dpkg[2]} ${dpkg[3]}`;
      this.report({ step: 'install', detail: clip(what), ...(fraction !== undefined && { fraction }) });
    }
  };

  /** Handles the marker lines and the lines of a running init command; false for any other line. */
  private initLine(line: string): boolean {
    const n = this.commands.length;
    if (this.current) {
      const ended = new RegExp(`^${escape(initEnd(this.marker, this.current.index, ''))}(\\d+)$`).exec(line);
      if (!ended) {
        this.current.lines.push(line);
        const last = line.trim();
        if (last !== '') this.report({ step: 'init', detail: clip(`[${this.current.index + 1}/${n}] ${last}`) });
        return true;
      }
      this.current.status = Number(ended[1]);
      this.current = null;
      return true;
    }
    const index = this.inits.length;
    if (index < n && line === initBegin(this.marker, index)) {
      this.current = { index, lines: [], status: null };
      this.inits.push(this.current);
      this.step = 'init';
      this.report({ step: 'init', detail: clip(`[${index + 1}/${n}] ${this.commands[index]}`), fraction: index / n });
      return true;
    }
    return false;
  }

  /** The init commands that ran to the end with status 0, with their output. */
  initOutput(): InitOutput[] {
    return this.inits
      .filter((init) => init.status === 0)
      .map((init) => ({ command: this.commands[init.index] ?? '', output: joinLines(init.lines) }));
  }

  /** Why mmdebstrap failed, in one message (plus the failing init command's output when that was it). */
  explainFailure(context: { suite: string; mirror: string; status: string; log: string }): string {
    const { suite, mirror, log } = context;
    const seeLog = `full log: ${log}`;
    const failed = this.inits.find((init) => init.status !== 0);
    if (failed) {
      const command = this.commands[failed.index] ?? '';
      const which = `init command ${failed.index + 1} of ${this.commands.length}`;
      const how = failed.status === null ? 'did not finish' : `failed with status ${failed.status}`;
      const output = failed.lines.slice(-TAIL_LINES);
      const shownOutput = output.length > 0 ? `; its output:\n${indent(output)}\n` : ' (no output); ';
      return `${which} ${how}: ${command}${shownOutput}${seeLog}`;
    }
    const reasons = this.errors.filter((error) => !GENERIC_ERROR.test(error));
    if (reasons.some((error) => /does not have a Release file|no longer has a Release file/.test(error))) {
      return `the mirror ${mirror} has no suite ${suite} (no Release file); check the Smolfile's image; ${seeLog}`;
    }
    const network = reasons.find((error) => NETWORK.test(error));
    if (network) {
      return (
        `cannot reach the Debian mirror ${mirror}: ${network}; the image is built on this machine, which needs ` +
        `its network for it; ${seeLog}`
      );
    }
    const missing = reasons.map((error) => /Unable to locate package (\S+)/.exec(error)?.[1]).find(Boolean);
    if (missing) return `${suite} has no package ${missing}; ${seeLog}`;
    if (reasons[0]) return `mmdebstrap failed: ${reasons[0]}; ${seeLog}`;
    return `mmdebstrap ${context.status}; its last lines:\n${indent(this.tail)}\n${seeLog}`;
  }
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const indent = (lines: string[]) => lines.map((line) => `  ${line}`).join('\n');
const joinLines = (lines: string[]) => (lines.length === 0 ? '' : `${lines.join('\n')}\n`);
