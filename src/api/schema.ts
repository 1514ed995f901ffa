// The one API (docs/engine.md, "API"): every request, response and event the engine speaks, as zod schemas. The
// TypeScript types below are inferred from them, the OpenAPI document is generated from them (openapi.ts), and the
// HTTP server and the clients validate against them.
import { z } from 'zod';

export const API_PREFIX = '/api/v1';

const id = (prefix: string) =>
  z
    .string()
    .regex(new RegExp(`^${prefix}-[a-z2-7]{10}$`), `an id that starts with ${prefix}-`)
    .describe(`an id such as ${prefix}-abcdefgh23`);

export const EpisodeId = id('ep');
export const VmId = id('vm');
export const SnapshotId = id('sn');
/** What commands accept: an id, a unique prefix of one, or a name. */
export const Ref = z.string().min(1).max(200).describe('an id, a unique prefix of an id, or a name');
const Name = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'letters, digits, ".", "_" and "-", starting with a letter or digit');
const Note = z.string().max(10_000);
const Time = z.string().describe('an ISO 8601 time');

/** Labels on a VM or snapshot (docs/labels.md): `{"reward": 0.83, "task": "fix-1234"}`. */
export const LABEL_LIMITS = { count: 64, keyLength: 64, valueLength: 256 } as const;
const LABEL_KEY_RULE =
  'a label key takes letters, digits, “_”, “.”, “:” and “-”, starts with a letter or “_”, and has at most 64';
export const LabelKey = z.string().regex(/^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$/, LABEL_KEY_RULE);
export const LabelValue = z.union([z.number().refine(Number.isFinite), z.string().max(LABEL_LIMITS.valueLength)], {
  error: `a label is a finite number or a string of at most ${LABEL_LIMITS.valueLength} characters`,
});
/** Keys checked one by one, so that a bad one is named with the rule (a record's own message does not say it). */
const labelKeys = (labels: Record<string, unknown>, ctx: z.RefinementCtx) => {
  for (const key of Object.keys(labels)) {
    if (!LabelKey.safeParse(key).success) ctx.addIssue({ code: 'custom', path: [key], message: LABEL_KEY_RULE });
  }
};
export const Labels = z
  .record(z.string(), LabelValue)
  .superRefine(labelKeys)
  .refine((labels) => Object.keys(labels).length <= LABEL_LIMITS.count, `at most ${LABEL_LIMITS.count} labels`)
  .describe('numbers (a reward, a score) or strings (a task id), by key');
/** Labels to set (a value) or remove (null); the others stay. */
export const LabelsChange = z
  .record(z.string(), LabelValue.nullable())
  .superRefine(labelKeys)
  .describe('each key set to its value, or removed where the value is null; other labels stay');

export const VmState = z.enum(['creating', 'running', 'paused', 'suspended', 'stopped', 'crashed', 'destroyed']);
export const EpisodeState = z.enum(['creating', 'running', 'paused', 'suspended', 'crashed', 'stopped', 'empty']);
export const SnapshotKind = z.enum(['base', 'manual', 'auto', 'fork', 'restore-point', 'suspend']);

export const AgentState = z.enum(['none', 'connecting', 'ready', 'unreachable']);

export const VmExit = z
  .object({
    reason: z.string().describe('poweroff, reset, shutdown (triple fault), panic, killed, error, crashed'),
    code: z.number().int().nullable(),
    message: z.string(),
  })
  .meta({ id: 'VmExit' });

/** A `ports` forward (docs/network.md): TCP from the host's 127.0.0.1:host to the guest's port. */
export const PortForward = z
  .object({
    host: z.number().int().describe('the port on 127.0.0.1'),
    guest: z.number().int(),
    /** http://127.0.0.1:HOST/ when the guest port is one web servers use (80, 3000, 5173, 8000, 8080, …). */
    url: z.string().optional(),
  })
  .meta({ id: 'PortForward' });

export const NetworkRule = z
  .enum(['malformed', 'protocol', 'link-local', 'private', 'host', 'reserved', 'not-allowed', 'dns-name', 'fragment'])
  .describe('the policy rule that refused it (docs/network.md, "Refusals")');

/** One packet the network policy refused, as the engine saw it (docs/network.md, "Seen from the host"). */
export const NetworkRefusal = z
  .object({
    /** 1, 2, … per VM, in the order the engine saw them, across its restores (pass the last one as `after`). */
    seq: z.number().int(),
    at: Time.describe('when the engine saw it (it polls each second)'),
    destination: z.string().describe('the destination address ("-" when the frame had none)'),
    port: z.number().int().describe('the TCP or UDP destination port; 0 otherwise'),
    protocol: z.enum(['tcp', 'udp', 'icmp', 'other']),
    rule: NetworkRule,
    /** The DNS name asked for, for `dns-name`. */
    name: z.string().optional(),
  })
  .meta({ id: 'NetworkRefusal' });

export const VmLimits = z
  .object({
    /** The vmhost's cgroup directory (its memory hierarchy's on cgroup v1); null: no limits. */
    cgroup: z.string().nullable(),
    /** The vmhost's memory cap: its VMs' RAM plus the VMM's overhead. */
    memoryLimitMiB: z.number().int().nullable(),
    /** Why there are no limits (no cgroup hierarchy, no permission to create one, SMOL_CGROUPS=0). */
    note: z.string().nullable(),
  })
  .meta({ id: 'VmLimits' });

export const Vm = z
  .object({
    id: VmId,
    name: z.string(),
    episode: EpisodeId,
    state: VmState,
    /** The snapshot this VM started from or last checkpointed: its place in the tree ("you are here"). */
    snapshot: SnapshotId.nullable(),
    /** The VM it was forked from, if any. */
    parentVm: VmId.nullable(),
    created: Time,
    /** When it last started running (for uptime); null when not running. */
    runningSince: Time.nullable(),
    exit: VmExit.nullable(),
    cpus: z.number().int(),
    memoryMiB: z.number().int(),
    /**
     * The guest agent (docs/agent.md): `none` for a bare kernel, `connecting` until it answers after a boot, restore
     * or fork, `ready`, or `unreachable` when it did not answer in time.
     */
    agent: AgentState,
    labels: Labels.optional().describe('always present in answers; {} when it has none'),
    /** Its `ports` forwards while it runs (empty otherwise, or without a network). */
    ports: z.array(PortForward),
    /** Whether its Smolfile gives it a network, and how many packets the policy refused since the engine started. */
    network: z.object({ enabled: z.boolean(), refused: z.number().int() }),
    /** While it runs: its vmhost's cgroup and memory cap (docs/security.md, "Limits"), or why it has none. */
    limits: VmLimits.optional(),
  })
  .meta({ id: 'Vm' });

export const Episode = z
  .object({
    id: EpisodeId,
    name: z.string(),
    state: EpisodeState,
    smolfile: z.object({
      path: z.string(),
      text: z.string(),
      given: z
        .literal('text')
        .optional()
        .describe('started from text (createEpisode with text): path is DIRECTORY/pasted.smolfile, a name only'),
    }),
    created: Time,
    /** The base snapshot every VM of this episode starts from (null: a bare kernel, booted afresh). */
    base: SnapshotId.nullable(),
    vms: z.array(Vm),
    snapshotCount: z.number().int(),
    diskBytes: z.number().int().describe('allocated bytes of this episode’s snapshots'),
  })
  .meta({ id: 'Episode' });

/**
 * Whether a Smolfile (its text, as an Episode carries it) boots a bare kernel: a top-level `kernel` and no `image`.
 * Bare serial guests print a bare LF where a terminal needs CR LF (a Linux tty adds the CR, ONLCR), so their consoles
 * take every LF as CR LF (xterm's convertEol, PuTTY's "implicit CR in every LF"): the engine's screen, the live
 * console and the replay alike (docs/ui.md). Keys before the first `[table]` line are the top level.
 */
export function bootsBareKernel(smolfileText: string): boolean {
  const topLevel = smolfileText.split(/^\s*\[/m)[0] ?? '';
  const has = (key: string) => new RegExp(`^\\s*${key}\\s*=`, 'm').test(topLevel);
  return has('kernel') && !has('image');
}

export const Snapshot = z
  .object({
    id: SnapshotId,
    episode: EpisodeId.nullable().describe('null for a base snapshot, which belongs to a Smolfile'),
    /** The tree edge: the node the VM was at when this was taken (null: a root). */
    parent: SnapshotId.nullable(),
    /** The snapshot whose memory layer this one is a diff against (null: a full layer). */
    layerParent: SnapshotId.nullable(),
    vm: VmId.nullable(),
    kind: SnapshotKind,
    name: z.string(),
    note: z.string(),
    created: Time,
    diskBytes: z.number().int().describe('allocated bytes of this snapshot’s own files'),
    memoryBytes: z.number().int(),
    cpus: z.number().int(),
    /** Deleted by the user but kept because a living snapshot or VM needs its layer. */
    deleted: z.boolean(),
    labels: Labels.optional().describe('always present in answers; {} when it has none'),
  })
  .meta({ id: 'Snapshot' });

export const ApiError = z
  .object({
    error: z.object({
      /** The HTTP status again. */
      code: z.number().int(),
      message: z.string(),
      /** The kind of failure as an errno name ('EBUSY', 'ENOENT', 'ENOMEM'), when it has one (docs/engine.md). */
      reason: z.string().optional(),
    }),
  })
  .meta({ id: 'Error' });

// ---- requests ----

/** The largest Smolfile given as text (a Smolfile is a few hundred bytes; 256 KiB leaves room for long comments). */
export const SMOLFILE_TEXT_MAX_BYTES = 256 * 1024;

/** A Smolfile given as text, and the directory on the engine's machine that its relative paths start from. */
export const SmolfileText = {
  text: z
    .string()
    .max(SMOLFILE_TEXT_MAX_BYTES)
    .describe('the Smolfile itself, instead of a path (docs/smolfile.md, "A Smolfile as text")'),
  directory: z
    .string()
    .min(1)
    .max(4096)
    .refine((dir) => dir.startsWith('/'), 'an absolute path on the engine’s machine')
    .optional()
    .describe('with text: where its relative paths start (absolute); without it a relative path is an error'),
};

export const CreateEpisodeRequest = z
  .object({
    /** Absolute path of the Smolfile, as the engine sees it. */
    smolfile: z.string().min(1).max(4096).optional().describe('a path on the engine’s machine; or give text'),
    text: SmolfileText.text.optional(),
    directory: SmolfileText.directory,
    name: Name.optional(),
  })
  .strict()
  .refine((r) => (r.smolfile === undefined) !== (r.text === undefined), {
    message: 'give either smolfile (a path) or text (the Smolfile itself), not both',
  })
  .refine((r) => r.directory === undefined || r.text !== undefined, {
    message: 'directory goes with text: a Smolfile file’s relative paths start from its own directory',
    path: ['directory'],
  })
  .meta({ id: 'CreateEpisodeRequest' });

export const CheckpointRequest = z
  .object({ name: Name.optional(), note: Note.optional() })
  .strict()
  .meta({ id: 'CheckpointRequest' });

/** The most children one fork asks for; they are admitted as the host can take them (docs/engine.md, "Bursts"). */
export const MAX_FORK_COUNT = 1024;

export const ForkRequest = z
  .object({ count: z.number().int().min(1).max(MAX_FORK_COUNT).default(1) })
  .strict()
  .meta({ id: 'ForkRequest' });

export const RestoreRequest = z.object({ snapshot: Ref }).strict().meta({ id: 'RestoreRequest' });

export const ConsoleInputRequest = z
  .object({
    data: z
      .string()
      .max(1 << 20)
      .describe('UTF-8 text typed into the console'),
  })
  .strict()
  .meta({ id: 'ConsoleInputRequest' });

/** A terminal's size in character cells; the agent refuses more than 1000 of either. (No id: requests inline it.) */
export const TerminalSize = z.object({
  rows: z.number().int().min(1).max(1000),
  cols: z.number().int().min(1).max(1000),
});

export const ExecRequest = z
  .object({
    argv: z
      .array(z.string().max(1 << 16))
      .min(1)
      .max(4096)
      .describe('the program and its arguments (no shell)'),
    env: z.record(z.string().regex(/^[^=\0]+$/, 'a name without "=" or NUL'), z.string()).optional(),
    cwd: z.string().min(1).max(4096).optional().describe("the working directory (default: the workload's workdir)"),
    user: z
      .string()
      .max(256)
      .regex(/^[^:\0]+(:[^:\0]+)?$/, 'name, uid, name:group or uid:gid')
      .optional()
      .describe(
        "who runs it: name, uid, name:group or uid:gid, looked up in the guest's /etc/passwd and /etc/group " +
          "(default: the workload's user, from the Smolfile or the image's User; else root)",
      ),
    /** UTF-8 text for the process's stdin (it reads /dev/null without it). */
    stdin: z
      .string()
      .max(1 << 20)
      .optional(),
    /** The agent kills the process group after this long. */
    timeoutMs: z.number().int().min(1).max(86_400_000).optional(),
    tty: TerminalSize.optional().describe(
      'run it on a pseudo-terminal of this size, its controlling terminal (a shell gets job control; output all ' +
        'arrives as stdout; the exec WebSocket takes input and {"type":"resize"})',
    ),
  })
  .strict()
  .meta({ id: 'ExecRequest' });

export const ExecResult = z
  .object({
    /** The exit status, or null when a signal ended the process. */
    exitCode: z.number().int().nullable(),
    signal: z.string().nullable(),
    timedOut: z.boolean(),
    /** stdout and stderr as UTF-8 text (at most 16 MiB each; stream over the exec WebSocket for more). */
    stdout: z.string(),
    stderr: z.string(),
  })
  .meta({ id: 'ExecResult' });

export const FileQuery = z
  .object({
    path: z.string().min(1).max(4096).describe('an absolute path in the guest'),
    mode: z
      .string()
      .regex(/^0?[0-7]{3,4}$/, 'octal, like 0644')
      .optional()
      .describe('PUT: the new file’s mode (default 0644)'),
  })
  .strict();

export const UpdateSnapshotRequest = z
  .object({ name: Name.optional(), note: Note.optional(), labels: LabelsChange.optional() })
  .strict()
  .meta({ id: 'UpdateSnapshotRequest' });
export const UpdateVmRequest = z.object({ labels: LabelsChange }).strict().meta({ id: 'UpdateVmRequest' });

export const RemoveRequest = z
  .object({ force: z.boolean().default(false).describe('remove running VMs too') })
  .strict()
  .meta({ id: 'RemoveRequest' });

export const ListenRequest = z
  .object({
    host: z.string().min(1).max(255).default('127.0.0.1'),
    port: z
      .number()
      .int()
      .min(0)
      .max(65535)
      .default(0)
      .describe('0: the port this host address was served on last, when free, else any free port'),
    rotateToken: z
      .boolean()
      .default(false)
      .describe('replace the data dir’s token first (SMOL_HOME/serve-token): the old one opens nothing any more'),
    tls: z
      .boolean()
      .default(false)
      .describe('HTTPS: with cert and key, that certificate; else the data dir’s self-signed one (made on first use)'),
    cert: z.string().min(1).optional().describe('a PEM certificate file (absolute path); needs key, implies tls'),
    key: z.string().min(1).optional().describe('the PEM private key file of cert (absolute path)'),
  })
  .strict()
  .meta({ id: 'ListenRequest' });

const TokenName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'letters, digits, ".", "_" and "-", starting with a letter or digit');
export const TokenScope = z
  .enum(['full', 'read-only'])
  .describe('read-only: GET and HEAD, the event stream, consoles without typing; full: everything');
export const CreateTokenRequest = z
  .object({ name: TokenName, scope: TokenScope.default('full') })
  .strict()
  .meta({ id: 'CreateTokenRequest' });
const RemoteEngineName = TokenName.refine((name) => name !== 'local', 'local is the app’s name for its own engine');
const EngineUrl = z
  .string()
  .regex(/^https?:\/\/[^/?#\s]+\/?$/, 'an engine URL such as https://10.0.0.2:7443 (http or https, no path)')
  // The pattern lets through hosts no URL has ("http://12\ufffd7.0.0.1"), which failed later as a 500.
  .refine((url) => URL.canParse(url), 'an engine URL such as https://10.0.0.2:7443 (this one does not parse)')
  .describe('the engine’s URL: https://HOST:PORT (or http:// on a loopback)');
const Fingerprint = z
  .string()
  .regex(/^(sha256:)?([0-9A-Fa-f]{2}:?){31}[0-9A-Fa-f]{2}$/i, 'a SHA-256 fingerprint (64 hex digits, colons optional)')
  .describe('the certificate’s SHA-256 fingerprint (AB:CD:…)');
export const ProbeEngineRequest = z.object({ url: EngineUrl }).strict().meta({ id: 'ProbeEngineRequest' });
export const AddEngineRequest = z
  .object({
    name: RemoteEngineName,
    url: EngineUrl,
    token: z.string().min(1).max(1000).describe('a token of that engine (smol token create there)'),
    fingerprint: Fingerprint.optional().describe(
      'the fingerprint the person confirmed (POST /engines/probe showed it): only that certificate is accepted; ' +
        'without it, trust on first use',
    ),
  })
  .strict()
  .meta({ id: 'AddEngineRequest' });

// ---- responses ----

export const SmolfileExamples = z
  .object({
    examples: z.array(
      z.object({
        name: z.string(),
        path: z.string().describe('absolute, for createEpisode'),
        text: z.string().describe('its text, for an editor (createEpisode with text and its folder as directory)'),
        description: z.string(),
        linux: z.boolean().describe('boots a Linux guest (an image), not a bare kernel: see HostReport.linuxGuests'),
      }),
    ),
  })
  .meta({ id: 'SmolfileExamples' });
export const HostReport = z
  .object({
    kvm: z.object({
      present: z.boolean(),
      usable: z.boolean(),
      implementation: z.enum(['hardware', 'pvm', 'unknown']).describe('pvm: KVM in software (smol doctor)'),
      error: z.string().nullable(),
    }),
    linuxGuests: z
      .object({ ok: z.boolean(), message: z.string() })
      .describe('smol doctor’s verdict: false where a Linux guest will not get through its boot'),
  })
  .meta({ id: 'HostReport' });
export const EpisodeList = z.object({ episodes: z.array(Episode) }).meta({ id: 'EpisodeList' });
export const VmList = z.object({ vms: z.array(Vm) }).meta({ id: 'VmList' });
export const SnapshotList = z.object({ snapshots: z.array(Snapshot) }).meta({ id: 'SnapshotList' });
export const CreateEpisodeResponse = z.object({ episode: Episode, vm: Vm }).meta({ id: 'CreateEpisodeResponse' });
export const ForkResponse = z
  .object({ children: z.array(Vm), snapshot: Snapshot.nullable().describe('the fork point, for a fork of a VM') })
  .meta({ id: 'ForkResponse' });
export const RestoreResponse = z
  .object({
    vm: Vm,
    savedAs: Snapshot.nullable().describe('where the VM was, checkpointed before it moved (null: it was not running)'),
  })
  .meta({ id: 'RestoreResponse' });
export const Logs = z.object({ text: z.string(), truncated: z.boolean() }).meta({ id: 'Logs' });
export const Screen = z
  .object({ text: z.string().describe('the visible screen as plain text'), serialized: z.string() })
  .meta({ id: 'Screen' });
export const Listener = z
  .object({
    url: z.string().describe('the page URL, with the token'),
    port: z.number().int(),
    movedFrom: z
      .number()
      .int()
      .nullable()
      .optional()
      .describe('the port this host address was served on before, when it was taken: its pages must open url'),
    fingerprint: z
      .string()
      .nullable()
      .optional()
      .describe('HTTPS: the SHA-256 fingerprint of the listener’s certificate (AB:CD:…), which clients pin'),
  })
  .meta({ id: 'Listener' });
export const TokenInfo = z
  .object({
    name: z.string(),
    scope: TokenScope,
    created: Time,
    lastUsed: Time.nullable().describe('the last request or stream it opened (to the minute), null: never'),
  })
  .meta({ id: 'TokenInfo' });
export const TokenList = z.object({ tokens: z.array(TokenInfo) }).meta({ id: 'TokenList' });
export const CreatedToken = TokenInfo.extend({
  token: z.string().describe('the secret, shown this once: the engine keeps only its SHA-256'),
}).meta({ id: 'CreatedToken' });
export const RemoteEngineInfo = z
  .object({
    name: z.string(),
    url: z.string(),
    fingerprint: z.string().nullable().describe('the pinned certificate (null: plain HTTP, or not yet pinned)'),
    added: Time,
  })
  .meta({ id: 'RemoteEngineInfo' });
export const RemoteEngineList = z.object({ engines: z.array(RemoteEngineInfo) }).meta({ id: 'RemoteEngineList' });
export const AddedEngine = RemoteEngineInfo.extend({
  version: z.string().describe('the remote engine’s version, from its health'),
}).meta({ id: 'AddedEngine' });
export const EngineProbe = z
  .object({
    url: z.string(),
    fingerprint: z.string().nullable().describe('what the engine presents now (null: plain HTTP)'),
    pinned: z.string().nullable().describe('what is pinned for that address already, if anything'),
  })
  .meta({ id: 'EngineProbe' });
export const Health = z
  .object({ version: z.string(), pid: z.number().int(), home: z.string(), started: Time })
  .meta({ id: 'Health' });
export const GcResult = z
  .object({ removed: z.array(SnapshotId), freedBytes: z.number().int() })
  .meta({ id: 'GcResult' });
/** A root disk image in the engine's guest cache (docs/images.md): a Debian image or an OCI image. */
export const ImageSummary = z
  .object({
    /** `debian:bookworm`, or the references an OCI image was pulled as (`python:3.12-slim, …`). */
    image: z.string(),
    references: z.array(z.string()).optional(),
    name: z.string(),
    file: z.string(),
    /** The OCI image's manifest digest, or the Debian image's recipe hash. */
    digest: z.string().optional(),
    hash: z.string().optional(),
    size: z.number().int(),
    allocated: z.number().int(),
    built: z.string(),
    seconds: z.number().nullable(),
    /** What keeps the engine's copy of it (docs/images.md, "Keeping what snapshots need"): rm refuses it, prune keeps it, while any is. */
    usedBy: z
      .array(
        z.object({
          snapshot: SnapshotId.nullable().describe("null: a VM's own disk layer, no snapshot's"),
          episode: EpisodeId.nullable(),
          name: z.string().nullable(),
          layer: z.string().nullable(),
        }),
      )
      .optional(),
  })
  .meta({ id: 'ImageSummary' });
export const ImageList = z.object({ images: z.array(ImageSummary) }).meta({ id: 'ImageList' });
export const PullImageRequest = z
  .object({
    /** python:3.12-slim, host:port/org/app:tag, name@sha256:…, oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE (paths as the engine sees them). */
    reference: z.string().min(1).max(4096),
    /** Convert again even when the cache has the image. */
    force: z.boolean().optional(),
  })
  .strict()
  .meta({ id: 'PullImageRequest' });
export const PulledImage = z
  .object({
    reference: z.string(),
    name: z.string(),
    file: z.string(),
    digest: z.string(),
    cached: z.boolean(),
    size: z.number().int(),
    allocated: z.number().int(),
    seconds: z.number().nullable(),
  })
  .meta({ id: 'PulledImage' });
export const RemovedImages = z
  .object({
    removed: z.array(z.object({ name: z.string(), file: z.string(), bytes: z.number().int() })),
    /** rm: snapshots still sit on the image (the engine's copy stays until prune finds it unused). */
    inUse: z.boolean().optional(),
  })
  .meta({ id: 'RemovedImages' });
export const MemoryStats = z
  .object({
    guestBytes: z.number(),
    residentBytes: z.number(),
    privateBytes: z.number(),
    sharedBytes: z.number(),
  })
  .meta({ id: 'MemoryStats' });

/** GET /vms/:vm/network: a VM's network, its counters and its recent refusals. */
export const VmNetwork = z
  .object({
    vm: VmId,
    /** Whether its Smolfile says `net = true`; without it every other field is empty. */
    enabled: z.boolean(),
    ports: z.array(PortForward),
    /** Refusals since the engine started, all rules and per rule (across the VM's restores). */
    refused: z.number().int(),
    rules: z.record(z.string(), z.number().int()),
    /** The current instance's stack: frames to and from the guest and host sockets (null when not running). */
    frames: z
      .object({
        sent: z.number().int(),
        received: z.number().int(),
        refused: z.number().int(),
        dropped: z.number().int(),
        connectionsRefused: z.number().int(),
      })
      .nullable(),
    sockets: z.number().int().nullable(),
    /** The last refusals (at most 256), oldest first; with `after`, only those with a larger seq. */
    events: z.array(NetworkRefusal),
  })
  .meta({ id: 'VmNetwork' });

/** A vmhost's cgroup counters (docs/security.md, "Limits"): what the kernel charged to all of an episode's VMs. */
export const CgroupSample = z
  .object({
    cpuPercent: z.number().describe('CPU the whole vmhost used since the previous sample, in % of one host CPU'),
    memoryBytes: z.number().describe('memory charged to the vmhost: guest pages touched, the VMM, page cache'),
    memoryLimitBytes: z.number().nullable(),
    oomKills: z.number().int(),
  })
  .meta({ id: 'CgroupSample' });

export const MetricSample = z
  .object({
    at: z.string().describe('when the sample was taken (ISO 8601)'),
    cpuPercent: z.number().describe('CPU the vCPUs used since the previous sample, in % of one host CPU'),
    memory: MemoryStats,
    /** Its vmhost's cgroup, shared by the episode's VMs; absent when the vmhost runs without one. */
    cgroup: CgroupSample.optional(),
  })
  .meta({ id: 'MetricSample' });
export const MetricsHistory = z
  .object({
    vm: VmId,
    intervalMs: z.number().describe('how often the engine samples'),
    samples: z.array(MetricSample).describe('oldest first; the last few minutes'),
  })
  .meta({ id: 'MetricsHistory' });

// ---- events (WebSocket /api/v1/events, one JSON object per message) ----

export const EngineEvent = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('episode.created'), episode: Episode }),
    z.object({ type: z.literal('episode.updated'), episode: Episode }),
    z.object({ type: z.literal('episode.deleted'), id: EpisodeId }),
    z.object({ type: z.literal('vm.updated'), vm: Vm }),
    z.object({ type: z.literal('vm.removed'), id: VmId, episode: EpisodeId }),
    z.object({ type: z.literal('snapshot.created'), snapshot: Snapshot }),
    z.object({ type: z.literal('snapshot.updated'), snapshot: Snapshot }),
    z.object({ type: z.literal('snapshot.deleted'), id: SnapshotId, episode: EpisodeId.nullable() }),
    z.object({
      type: z.literal('progress'),
      operation: z.string(),
      vm: VmId.nullable(),
      done: z.number(),
      total: z.number(),
      /** The `requestId` the request named, when it named one: two packs or opens at once tell their bars apart. */
      request: z.string().optional(),
    }),
    z.object({
      /** An image pull of the API's (pullImage): its steps, and each layer's as `docker pull` shows them. */
      type: z.literal('image.pull'),
      /** The reference as the pull request named it. */
      reference: z.string(),
      step: z.string().optional(),
      detail: z.string().optional(),
      layer: z
        .object({
          index: z.number().int(),
          digest: z.string(),
          status: z.enum(['waiting', 'downloading', 'downloaded', 'cached', 'extracting', 'done']),
          received: z.number(),
          total: z.number(),
        })
        .optional(),
    }),
    z.object({
      type: z.literal('vm.network.refused'),
      vm: VmId,
      episode: EpisodeId,
      refusal: NetworkRefusal,
      /** The VM's refusals so far (its `network.refused`). */
      refused: z.number().int(),
    }),
    z.object({
      type: z.literal('metrics'),
      vm: VmId,
      at: z.string(),
      memory: MemoryStats,
      cpuPercent: z.number(),
      cgroup: CgroupSample.optional(),
    }),
  ])
  .meta({ id: 'EngineEvent' });

export type VmState = z.infer<typeof VmState>;
export type EpisodeState = z.infer<typeof EpisodeState>;
export type SnapshotKind = z.infer<typeof SnapshotKind>;
export type VmExit = z.infer<typeof VmExit>;
export type Vm = z.infer<typeof Vm>;
export type VmLimits = z.infer<typeof VmLimits>;
export type Episode = z.infer<typeof Episode>;
export type Snapshot = z.infer<typeof Snapshot>;
export type CreateEpisodeRequest = z.infer<typeof CreateEpisodeRequest>;
export type AgentState = z.infer<typeof AgentState>;
export type ExecRequest = z.infer<typeof ExecRequest>;
export type TerminalSize = z.infer<typeof TerminalSize>;
export type ExecResult = z.infer<typeof ExecResult>;
export type CheckpointRequest = z.infer<typeof CheckpointRequest>;
export type ForkRequest = z.infer<typeof ForkRequest>;
export type RestoreRequest = z.infer<typeof RestoreRequest>;
export type UpdateSnapshotRequest = z.infer<typeof UpdateSnapshotRequest>;
export type RemoveRequest = z.infer<typeof RemoveRequest>;
export type CreateEpisodeResponse = z.infer<typeof CreateEpisodeResponse>;
export type ForkResponse = z.infer<typeof ForkResponse>;
export type RestoreResponse = z.infer<typeof RestoreResponse>;
export type Logs = z.infer<typeof Logs>;
export type Screen = z.infer<typeof Screen>;
export type Health = z.infer<typeof Health>;
export type ListenRequest = z.infer<typeof ListenRequest>;
export type Listener = z.infer<typeof Listener>;
export type TokenScope = z.infer<typeof TokenScope>;
export type CreateTokenRequest = z.infer<typeof CreateTokenRequest>;
export type TokenInfo = z.infer<typeof TokenInfo>;
export type CreatedToken = z.infer<typeof CreatedToken>;
export type ProbeEngineRequest = z.infer<typeof ProbeEngineRequest>;
export type AddEngineRequest = z.infer<typeof AddEngineRequest>;
export type RemoteEngineInfo = z.infer<typeof RemoteEngineInfo>;
export type AddedEngine = z.infer<typeof AddedEngine>;
export type EngineProbe = z.infer<typeof EngineProbe>;
export type GcResult = z.infer<typeof GcResult>;
export type ImageSummary = z.infer<typeof ImageSummary>;
export type PullImageRequest = z.input<typeof PullImageRequest>;
export type PulledImage = z.infer<typeof PulledImage>;
export type RemovedImages = z.infer<typeof RemovedImages>;
export type MemoryStats = z.infer<typeof MemoryStats>;
export type MetricSample = z.infer<typeof MetricSample>;
export type CgroupSample = z.infer<typeof CgroupSample>;
export type MetricsHistory = z.infer<typeof MetricsHistory>;
export type EngineEvent = z.infer<typeof EngineEvent>;
export type PortForward = z.infer<typeof PortForward>;
export type NetworkRefusal = z.infer<typeof NetworkRefusal>;
export type VmNetwork = z.infer<typeof VmNetwork>;
export type SmolfileExamples = z.infer<typeof SmolfileExamples>;
export type HostReport = z.infer<typeof HostReport>;
export type Labels = z.infer<typeof Labels>;
export type LabelsChange = z.infer<typeof LabelsChange>;
export type UpdateVmRequest = z.infer<typeof UpdateVmRequest>;
