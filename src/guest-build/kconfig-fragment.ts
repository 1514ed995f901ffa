// A kernel config fragment and the check that every option it asks for survived `make olddefconfig`.
// Kconfig drops an option silently when one of its dependencies is off, so the build compares the final .config
// against the fragment and refuses to publish a kernel that differs.

/** One `CONFIG_X=value` or `# CONFIG_X is not set` line of a fragment; value 'n' stands for "is not set". */
export interface KconfigOption {
  name: string;
  value: string;
  line: number;
}

export interface DroppedOption {
  name: string;
  wanted: string;
  /** The value in the final .config; 'n' for "is not set", null when the symbol is not there at all. */
  got: string | null;
  line: number;
}

const SET = /^(CONFIG_[A-Za-z0-9_]+)=(.*)$/;
const NOT_SET = /^# (CONFIG_[A-Za-z0-9_]+) is not set$/;

/** The options a fragment (or a whole .config) sets, in order; comments and blank lines are skipped. */
export function parseKconfig(text: string): KconfigOption[] {
  const options: KconfigOption[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    const set = SET.exec(line);
    if (set) options.push({ name: set[1]!, value: unquote(set[2]!), line: index + 1 });
    const notSet = NOT_SET.exec(line);
    if (notSet) options.push({ name: notSet[1]!, value: 'n', line: index + 1 });
  });
  return options;
}

function unquote(value: string): string {
  return value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value;
}

/**
 * The fragment's options whose value the final .config does not have. An option the fragment turns off
 * (`# CONFIG_X is not set`) is satisfied when the final .config has it off or does not have it at all.
 */
export function findDroppedOptions(fragment: string, finalConfig: string): DroppedOption[] {
  const final = new Map(parseKconfig(finalConfig).map((option) => [option.name, option.value]));
  const dropped: DroppedOption[] = [];
  for (const { name, value, line } of parseKconfig(fragment)) {
    const got = final.get(name) ?? null;
    const satisfied = value === 'n' ? got === null || got === 'n' : got === value;
    if (!satisfied) dropped.push({ name, wanted: value, got, line });
  }
  return dropped;
}

function describe(value: string | null): string {
  if (value === null) return 'absent';
  return value === 'n' ? 'not set' : value;
}

/** One line per dropped option, for the build's error message. */
export function formatDroppedOptions(dropped: DroppedOption[], fragmentPath: string): string {
  return dropped
    .map((d) => `  ${d.name}: wanted ${describe(d.wanted)}, got ${describe(d.got)} (${fragmentPath}:${d.line})`)
    .join('\n');
}
