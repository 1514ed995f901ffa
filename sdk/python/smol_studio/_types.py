"""The API's objects as typed dataclasses (src/api/schema.ts is the one definition; these follow it in snake_case).

Each ``from_json`` reads the engine's JSON (camelCase keys). They are frozen: an object is what the engine said at
one moment; ask again for the current state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

Json = Mapping[str, Any]
#: A label's value (docs/labels.md): a finite number or a string of at most 256 characters.
LabelValue = Union[int, float, str]


@dataclass(frozen=True)
class VmExit:
    """How a VM's guest ended: ``reason`` is poweroff, reset, shutdown, panic, killed, error or crashed."""

    reason: str
    code: Optional[int]
    message: str

    @classmethod
    def from_json(cls, j: Json) -> "VmExit":
        return cls(reason=j["reason"], code=j.get("code"), message=j.get("message", ""))


@dataclass(frozen=True)
class PortForward:
    """A ``ports`` forward: TCP from the host's 127.0.0.1:``host`` to the guest's ``guest`` port. ``url`` is
    ``http://127.0.0.1:HOST/`` for guest ports web servers use (80, 3000, 5173, 8000, 8080, ...), else None."""

    host: int
    guest: int
    url: Optional[str] = None

    @classmethod
    def from_json(cls, j: Json) -> "PortForward":
        return cls(host=j["host"], guest=j["guest"], url=j.get("url"))


@dataclass(frozen=True)
class VmNetworkSummary:
    """Whether the VM's Smolfile gives it a network, and how many packets its policy refused so far."""

    enabled: bool = False
    refused: int = 0

    @classmethod
    def from_json(cls, j: Optional[Json]) -> "VmNetworkSummary":
        return cls(enabled=bool(j["enabled"]), refused=int(j["refused"])) if j else cls()


@dataclass(frozen=True)
class NetworkRefusal:
    """A packet the network policy refused (docs/network.md, "Refusals"). ``seq`` counts per VM across its
    restores; ``at`` is when the engine saw it; ``name`` is the DNS name, for rule ``dns-name``."""

    seq: int
    at: str
    destination: str
    port: int
    protocol: str
    rule: str
    name: Optional[str] = None

    @classmethod
    def from_json(cls, j: Json) -> "NetworkRefusal":
        return cls(
            seq=j["seq"],
            at=j["at"],
            destination=j["destination"],
            port=j["port"],
            protocol=j["protocol"],
            rule=j["rule"],
            name=j.get("name"),
        )


@dataclass(frozen=True)
class NetworkFrames:
    """The live stack's frame counters: to the stack, to the guest, refused, dropped; connections refused at the
    socket cap."""

    sent: int
    received: int
    refused: int
    dropped: int
    connections_refused: int

    @classmethod
    def from_json(cls, j: Json) -> "NetworkFrames":
        return cls(
            sent=j["sent"],
            received=j["received"],
            refused=j["refused"],
            dropped=j["dropped"],
            connections_refused=j["connectionsRefused"],
        )


@dataclass(frozen=True)
class VmNetwork:
    """GET /vms/:vm/network: the VM's forwards, refusal counters (all and per rule) and last refusals.
    ``frames`` and ``sockets`` are None when it is not running; ``enabled`` is False without a network."""

    vm: str
    enabled: bool
    ports: List[PortForward]
    refused: int
    rules: Dict[str, int]
    frames: Optional[NetworkFrames]
    sockets: Optional[int]
    events: List[NetworkRefusal]

    @classmethod
    def from_json(cls, j: Json) -> "VmNetwork":
        return cls(
            vm=j["vm"],
            enabled=j["enabled"],
            ports=[PortForward.from_json(p) for p in j["ports"]],
            refused=j["refused"],
            rules=dict(j["rules"]),
            frames=NetworkFrames.from_json(j["frames"]) if j.get("frames") else None,
            sockets=j.get("sockets"),
            events=[NetworkRefusal.from_json(e) for e in j["events"]],
        )


@dataclass(frozen=True)
class Vm:
    """A VM (a branch of an episode). ``snapshot`` is its place in the tree ("you are here")."""

    id: str
    name: str
    episode: str
    state: str
    snapshot: Optional[str]
    parent_vm: Optional[str]
    created: str
    running_since: Optional[str]
    exit: Optional[VmExit]
    cpus: int
    memory_mib: int
    #: The guest agent: ``none`` (a bare kernel), ``connecting``, ``ready`` or ``unreachable``.
    agent: str
    #: Its ``ports`` forwards on 127.0.0.1 while it runs (empty otherwise, or without a network).
    ports: List[PortForward] = field(default_factory=list)
    #: Whether it has a network and how many packets its policy refused.
    network: VmNetworkSummary = field(default_factory=VmNetworkSummary)
    #: Its labels (docs/labels.md): numbers and strings by key, ``{"reward": 0.83}``.
    labels: Dict[str, LabelValue] = field(default_factory=dict)

    @classmethod
    def from_json(cls, j: Json) -> "Vm":
        return cls(
            id=j["id"],
            name=j["name"],
            episode=j["episode"],
            state=j["state"],
            snapshot=j.get("snapshot"),
            parent_vm=j.get("parentVm"),
            created=j["created"],
            running_since=j.get("runningSince"),
            exit=VmExit.from_json(j["exit"]) if j.get("exit") else None,
            cpus=j["cpus"],
            memory_mib=j["memoryMiB"],
            agent=j.get("agent", "none"),
            ports=[PortForward.from_json(p) for p in j.get("ports", [])],
            network=VmNetworkSummary.from_json(j.get("network")),
            labels=dict(j.get("labels") or {}),
        )


@dataclass(frozen=True)
class Smolfile:
    path: str
    text: str


@dataclass(frozen=True)
class Episode:
    """A named lineage of VMs started from one Smolfile."""

    id: str
    name: str
    state: str
    smolfile: Smolfile
    created: str
    #: The base snapshot its VMs start from (None: a bare kernel, booted afresh).
    base: Optional[str]
    vms: List[Vm]
    snapshot_count: int
    disk_bytes: int

    @classmethod
    def from_json(cls, j: Json) -> "Episode":
        return cls(
            id=j["id"],
            name=j["name"],
            state=j["state"],
            smolfile=Smolfile(path=j["smolfile"]["path"], text=j["smolfile"]["text"]),
            created=j["created"],
            base=j.get("base"),
            vms=[Vm.from_json(v) for v in j.get("vms", [])],
            snapshot_count=j.get("snapshotCount", 0),
            disk_bytes=j.get("diskBytes", 0),
        )


@dataclass(frozen=True)
class Snapshot:
    """A node of an episode's tree. ``parent`` is the tree edge; ``kind`` is base, manual, auto, fork,
    restore-point or suspend."""

    id: str
    episode: Optional[str]
    parent: Optional[str]
    layer_parent: Optional[str]
    vm: Optional[str]
    kind: str
    name: str
    note: str
    created: str
    disk_bytes: int
    memory_bytes: int
    cpus: int
    deleted: bool
    #: Its labels (docs/labels.md): a checkpoint's reward, a task id; not its VM's.
    labels: Dict[str, LabelValue] = field(default_factory=dict)

    @classmethod
    def from_json(cls, j: Json) -> "Snapshot":
        return cls(
            id=j["id"],
            episode=j.get("episode"),
            parent=j.get("parent"),
            layer_parent=j.get("layerParent"),
            vm=j.get("vm"),
            kind=j["kind"],
            name=j["name"],
            note=j.get("note", ""),
            created=j["created"],
            disk_bytes=j.get("diskBytes", 0),
            memory_bytes=j.get("memoryBytes", 0),
            cpus=j.get("cpus", 0),
            deleted=j.get("deleted", False),
            labels=dict(j.get("labels") or {}),
        )


@dataclass(frozen=True)
class SnapshotNode:
    """A snapshot with its children: one node of ``snapshot_tree``."""

    snapshot: Snapshot
    children: List["SnapshotNode"] = field(default_factory=list)

    def walk(self) -> List[Snapshot]:
        """This node's snapshot and every one below it, depth first."""
        out = [self.snapshot]
        for child in self.children:
            out.extend(child.walk())
        return out


def build_tree(snapshots: List[Snapshot]) -> List[SnapshotNode]:
    """The roots of the tree ``parent`` links make (a parent outside the list makes a root), in timeline order."""
    nodes = {s.id: SnapshotNode(s, []) for s in snapshots}
    roots: List[SnapshotNode] = []
    for s in snapshots:
        parent = nodes.get(s.parent) if s.parent else None
        (parent.children if parent is not None else roots).append(nodes[s.id])
    return roots


@dataclass(frozen=True)
class Up:
    """What ``up`` made: the episode and its first VM (running)."""

    episode: Episode
    vm: Vm

    @classmethod
    def from_json(cls, j: Json) -> "Up":
        return cls(episode=Episode.from_json(j["episode"]), vm=Vm.from_json(j["vm"]))


@dataclass(frozen=True)
class Packed:
    """What ``pack`` wrote: the .smolmachine file (docs/smolmachine.md) and the snapshot in it."""

    path: str
    bytes: int
    snapshot: str
    snapshot_name: str
    memory_data: int
    """Bytes of non-zero guest RAM pages the file holds, over the snapshot's memory layers."""
    layers: int

    @classmethod
    def from_json(cls, j: Json) -> "Packed":
        return cls(
            path=j["path"],
            bytes=j["bytes"],
            snapshot=j["snapshot"]["id"],
            snapshot_name=j["snapshot"]["name"],
            memory_data=j["memoryData"],
            layers=j["layers"],
        )


@dataclass(frozen=True)
class Inspected:
    """What ``inspect`` read from a .smolmachine file (docs/smolmachine.md): what made it, the packed snapshot, sizes,
    and ``cpu_missing``, the CPU features the engine's host lacks (opening is refused while any are)."""

    path: str
    bytes: int
    format: int
    made_by: str
    """smol's version, the host name and platform that packed it."""
    made_at: str
    made_from: str
    snapshot: str
    snapshot_name: str
    cpus: int
    memory_bytes: int
    layers: int
    memory_data: int
    disks: List[str]
    console: bool
    cpu_model: str
    cpu_missing: List[str]
    smolfile_name: str
    smolfile_text: str

    @classmethod
    def from_json(cls, j: Json) -> "Inspected":
        made = j["made"]
        return cls(
            path=j["path"],
            bytes=j["bytes"],
            format=j["format"],
            made_by=f"smol {made['smol']} on {made['host']} ({made['platform']})",
            made_at=made["at"],
            made_from=made["from"],
            snapshot=j["snapshot"]["id"],
            snapshot_name=j["snapshot"]["name"],
            cpus=j["snapshot"]["cpus"],
            memory_bytes=j["snapshot"]["memoryBytes"],
            layers=j["layers"],
            memory_data=j["memoryData"],
            disks=[f"{d['kind']} {d['name']}" for d in j["disks"]],
            console=j["console"],
            cpu_model=j["cpu"]["model"],
            cpu_missing=list(j["cpu"]["missing"]),
            smolfile_name=j["smolfile"]["name"],
            smolfile_text=j["smolfile"]["text"],
        )


@dataclass(frozen=True)
class EntryMeta:
    """A file's metadata at one point of a diff: ``type`` (file, dir, symlink, fifo, socket, char, block, unknown),
    ``mode`` in octal with setuid, setgid and sticky (``"0644"``, ``"4755"``), owner, size, a symlink's ``target``."""

    type: str
    mode: str
    uid: int
    gid: int
    size: int
    target: Optional[str] = None

    @classmethod
    def from_json(cls, j: Optional[Json]) -> "Optional[EntryMeta]":
        if j is None:
            return None
        return cls(type=j["type"], mode=j["mode"], uid=j["uid"], gid=j["gid"], size=j["size"], target=j.get("target"))


@dataclass(frozen=True)
class FileChange:
    """One path a diff found: ``change`` is added, removed or changed; ``before``/``after`` its metadata at each
    point (None where it did not exist); ``fields`` what differs for a change (type, mode, owner, size, target,
    content, times); ``diff`` a unified diff of a changed text file under the size cap, else ``diff_note`` says why
    there is none (``"binary"``, ``"over 65536 bytes"``)."""

    path: str
    change: str
    before: Optional[EntryMeta]
    after: Optional[EntryMeta]
    fields: List[str]
    diff: Optional[str] = None
    diff_note: Optional[str] = None

    @classmethod
    def from_json(cls, j: Json) -> "FileChange":
        return cls(
            path=j["path"],
            change=j["change"],
            before=EntryMeta.from_json(j.get("before")),
            after=EntryMeta.from_json(j.get("after")),
            fields=list(j.get("fields", [])),
            diff=j.get("diff"),
            diff_note=j.get("diffNote"),
        )


@dataclass(frozen=True)
class DiskDiff:
    """One writable disk's changes (``device``: ``virtio-blk`` the root disk, ``virtio-blk-N`` volume N). ``error``
    says why the disk could not be read (None when it was); ``truncated``: more changes than the answer holds;
    ``problems``: what the reader could not read (a corrupt directory, a loop)."""

    device: str
    error: Optional[str]
    added: int
    removed: int
    changed: int
    files: List[FileChange]
    truncated: bool
    problems: List[str]

    @classmethod
    def from_json(cls, j: Json) -> "DiskDiff":
        return cls(
            device=j["device"],
            error=j.get("error"),
            added=j["added"],
            removed=j["removed"],
            changed=j["changed"],
            files=[FileChange.from_json(f) for f in j["files"]],
            truncated=j["truncated"],
            problems=list(j["problems"]),
        )


@dataclass(frozen=True)
class DiffPoint:
    """One end of a diff: the snapshot's id and name, and the VM it was taken on."""

    id: str
    name: str
    vm: Optional[str]

    @classmethod
    def from_json(cls, j: Json) -> "DiffPoint":
        return cls(id=j["id"], name=j["name"], vm=j.get("vm"))


@dataclass(frozen=True)
class DiffConsole:
    """The console output recorded between the two points (ANSI sequences kept); ``text`` is None when there is none
    to give, and ``note`` says why it is None or cut (two points on different VMs' recordings)."""

    text: Optional[str]
    note: Optional[str]


@dataclass(frozen=True)
class DiffTimings:
    """Milliseconds the engine spent exporting the disks, and reading and comparing them."""

    export_ms: float
    read_ms: float


@dataclass(frozen=True)
class Diff:
    """What ``diff`` found between two snapshots of an episode (docs/diff.md): each writable disk's changes, the
    console output between the two points, and the engine's timings. ``from_`` is the earlier point (``from`` is
    Python's keyword)."""

    from_: DiffPoint
    to: DiffPoint
    disks: List[DiskDiff]
    console: DiffConsole
    timings: DiffTimings

    @classmethod
    def from_json(cls, j: Json) -> "Diff":
        return cls(
            from_=DiffPoint.from_json(j["from"]),
            to=DiffPoint.from_json(j["to"]),
            disks=[DiskDiff.from_json(d) for d in j["disks"]],
            console=DiffConsole(text=j["console"].get("text"), note=j["console"].get("note")),
            timings=DiffTimings(export_ms=float(j["timings"]["exportMs"]), read_ms=float(j["timings"]["readMs"])),
        )


@dataclass(frozen=True)
class ForkResult:
    """The new VMs, and the fork point (a snapshot of kind ``fork``) for a fork of a VM."""

    children: List[Vm]
    snapshot: Optional[Snapshot]

    @classmethod
    def from_json(cls, j: Json) -> "ForkResult":
        s = j.get("snapshot")
        return cls(children=[Vm.from_json(v) for v in j["children"]], snapshot=Snapshot.from_json(s) if s else None)


@dataclass(frozen=True)
class RestoreResult:
    """The VM at its new place, and where it was, checkpointed first (None when it was not running)."""

    vm: Vm
    saved_as: Optional[Snapshot]

    @classmethod
    def from_json(cls, j: Json) -> "RestoreResult":
        s = j.get("savedAs")
        return cls(vm=Vm.from_json(j["vm"]), saved_as=Snapshot.from_json(s) if s else None)


@dataclass(frozen=True)
class MemoryStats:
    guest_bytes: int
    resident_bytes: int
    private_bytes: int
    shared_bytes: int

    @classmethod
    def from_json(cls, j: Json) -> "MemoryStats":
        return cls(
            guest_bytes=int(j["guestBytes"]),
            resident_bytes=int(j["residentBytes"]),
            private_bytes=int(j["privateBytes"]),
            shared_bytes=int(j["sharedBytes"]),
        )


@dataclass(frozen=True)
class MetricSample:
    at: str
    cpu_percent: float
    memory: MemoryStats

    @classmethod
    def from_json(cls, j: Json) -> "MetricSample":
        return cls(at=j["at"], cpu_percent=float(j["cpuPercent"]), memory=MemoryStats.from_json(j["memory"]))


@dataclass(frozen=True)
class MetricsHistory:
    vm: str
    interval_ms: float
    samples: List[MetricSample]

    @classmethod
    def from_json(cls, j: Json) -> "MetricsHistory":
        return cls(
            vm=j["vm"],
            interval_ms=float(j["intervalMs"]),
            samples=[MetricSample.from_json(s) for s in j["samples"]],
        )


@dataclass(frozen=True)
class Logs:
    text: str
    truncated: bool

    @classmethod
    def from_json(cls, j: Json) -> "Logs":
        return cls(text=j["text"], truncated=j["truncated"])


@dataclass(frozen=True)
class Screen:
    """The console's visible screen as plain text, and serialized (xterm escape sequences)."""

    text: str
    serialized: str

    @classmethod
    def from_json(cls, j: Json) -> "Screen":
        return cls(text=j["text"], serialized=j["serialized"])


@dataclass(frozen=True)
class Health:
    version: str
    pid: int
    home: str
    started: str

    @classmethod
    def from_json(cls, j: Json) -> "Health":
        return cls(version=j["version"], pid=j["pid"], home=j["home"], started=j["started"])


@dataclass(frozen=True)
class GcResult:
    removed: List[str]
    freed_bytes: int

    @classmethod
    def from_json(cls, j: Json) -> "GcResult":
        return cls(removed=list(j["removed"]), freed_bytes=j["freedBytes"])


@dataclass(frozen=True)
class HostReport:
    """What the engine's host KVM is (``smol doctor``): ``kvm_implementation`` is hardware, pvm (KVM in software)
    or unknown; ``linux_guests_ok`` is False where a Linux guest will not get through its boot, and the message
    says why."""

    kvm_present: bool
    kvm_usable: bool
    kvm_implementation: str
    kvm_error: Optional[str]
    linux_guests_ok: bool
    linux_guests_message: str

    @classmethod
    def from_json(cls, j: Json) -> "HostReport":
        kvm, linux = j["kvm"], j["linuxGuests"]
        return cls(
            kvm_present=kvm["present"],
            kvm_usable=kvm["usable"],
            kvm_implementation=kvm["implementation"],
            kvm_error=kvm.get("error"),
            linux_guests_ok=linux["ok"],
            linux_guests_message=linux["message"],
        )


@dataclass(frozen=True)
class TokenInfo:
    """A named token of the data dir (docs/remote.md, "Tokens"): ``scope`` is full or read-only; ``last_used`` the
    last request or stream it opened (to the minute), None: never."""

    name: str
    scope: str
    created: str
    last_used: Optional[str]

    @classmethod
    def from_json(cls, j: Json) -> "TokenInfo":
        return cls(name=j["name"], scope=j["scope"], created=j["created"], last_used=j.get("lastUsed"))


@dataclass(frozen=True)
class CreatedToken(TokenInfo):
    """A new named token with its secret, answered this once (the engine keeps only its SHA-256)."""

    token: str = field(default="", repr=False)

    @classmethod
    def from_json(cls, j: Json) -> "CreatedToken":
        return cls(name=j["name"], scope=j["scope"], created=j["created"], last_used=j.get("lastUsed"), token=j["token"])


@dataclass(frozen=True)
class SmolfileExample:
    name: str
    path: str
    description: str
    text: str = ""
    linux: bool = False

    @classmethod
    def from_json(cls, j: Json) -> "SmolfileExample":
        return cls(
            name=j["name"], path=j["path"], description=j["description"], text=j.get("text", ""), linux=j.get("linux", False)
        )


@dataclass(frozen=True)
class SmolfileProblem:
    """One problem of a Smolfile, at its 1-based line and column (docs/smolfile.md)."""

    severity: str
    key: str
    line: int
    column: int
    message: str


@dataclass(frozen=True)
class SmolfileCheck:
    """``check_smolfile``'s answer: ``ok`` when it has no errors, and every problem in file order."""

    ok: bool
    problems: List[SmolfileProblem]

    @classmethod
    def from_json(cls, j: Json) -> "SmolfileCheck":
        return cls(ok=j["ok"], problems=[SmolfileProblem(**p) for p in j["problems"]])


@dataclass(frozen=True)
class RemoteEngine:
    """A remote engine the engine reaches for the app (docs/remote.md, "The app with several engines"), as its
    engines file keeps it: ``fingerprint`` is the pinned certificate's (None: plain HTTP, or not pinned yet). Its
    token stays with the engine and is never answered."""

    name: str
    url: str
    fingerprint: Optional[str]
    added: str

    @classmethod
    def from_json(cls, j: Json) -> "RemoteEngine":
        return cls(name=j["name"], url=j["url"], fingerprint=j.get("fingerprint"), added=j["added"])


@dataclass(frozen=True)
class AddedEngine(RemoteEngine):
    """``add_engine``'s answer: the engine as kept, and its ``version`` from its health (which its token opened)."""

    version: str = ""

    @classmethod
    def from_json(cls, j: Json) -> "AddedEngine":
        return cls(
            name=j["name"], url=j["url"], fingerprint=j.get("fingerprint"), added=j["added"], version=j.get("version", "")
        )


@dataclass(frozen=True)
class EngineProbe:
    """The certificate an engine at ``url`` presents (a TLS handshake only, no token sent): ``fingerprint``, to
    compare with the one ``smol serve`` printed there (None: plain HTTP), and ``pinned``, what the engines file
    pins for that address already (None: nothing)."""

    url: str
    fingerprint: Optional[str]
    pinned: Optional[str]

    @classmethod
    def from_json(cls, j: Json) -> "EngineProbe":
        return cls(url=j["url"], fingerprint=j.get("fingerprint"), pinned=j.get("pinned"))


@dataclass(frozen=True)
class Listener:
    """A TCP listener of the engine (``smol serve``); ``url`` carries its token. ``fingerprint``: an HTTPS
    listener's certificate (SHA-256, ``AB:CD:…``), which clients pin; None for plain HTTP."""

    url: str
    port: int
    fingerprint: Optional[str] = None

    @classmethod
    def from_json(cls, j: Json) -> "Listener":
        return cls(url=j["url"], port=j["port"], fingerprint=j.get("fingerprint"))


@dataclass(frozen=True)
class Image:
    """A root disk image in the engine's guest cache (docs/images.md): a Debian image or a pulled OCI image."""

    image: str
    references: List[str]
    name: str
    file: str
    digest: Optional[str]
    hash: Optional[str]
    size: int
    allocated: int
    built: str
    seconds: Optional[float]

    @classmethod
    def from_json(cls, j: Json) -> "Image":
        return cls(
            image=j["image"],
            references=list(j.get("references", [])),
            name=j["name"],
            file=j["file"],
            digest=j.get("digest"),
            hash=j.get("hash"),
            size=j["size"],
            allocated=j["allocated"],
            built=j["built"],
            seconds=j.get("seconds"),
        )


@dataclass(frozen=True)
class PulledImage:
    reference: str
    name: str
    file: str
    digest: str
    #: True when the cache had it and nothing was converted.
    cached: bool
    size: int
    allocated: int
    seconds: Optional[float]

    @classmethod
    def from_json(cls, j: Json) -> "PulledImage":
        return cls(
            reference=j["reference"],
            name=j["name"],
            file=j["file"],
            digest=j["digest"],
            cached=j["cached"],
            size=j["size"],
            allocated=j["allocated"],
            seconds=j.get("seconds"),
        )


@dataclass(frozen=True)
class RemovedImage:
    name: str
    file: str
    bytes: int


@dataclass(frozen=True)
class RemovedImages:
    removed: List[RemovedImage]
    #: rm: snapshots still sit on the image (the engine's copy stays until prune finds it unused).
    in_use: bool = False

    @classmethod
    def from_json(cls, j: Json) -> "RemovedImages":
        return cls(
            removed=[RemovedImage(name=r["name"], file=r["file"], bytes=r["bytes"]) for r in j["removed"]],
            in_use=bool(j.get("inUse", False)),
        )


@dataclass(frozen=True)
class ExecResult:
    """How a command in the guest ended, with what it wrote (empty when ``on_stdout``/``on_stderr`` took it)."""

    exit_code: Optional[int]
    signal: Optional[str]
    timed_out: bool
    stdout: bytes = b""
    stderr: bytes = b""

    @property
    def status(self) -> int:
        """The shell's convention: the exit code, 128+N for signal N, 124 when it timed out (as ``smol exec``)."""
        if self.timed_out:
            return 124
        if self.exit_code is not None:
            return self.exit_code
        import signal as signals

        number = getattr(signals, self.signal or "", None)
        return 128 + (int(number) if number is not None else 0)

    @property
    def ok(self) -> bool:
        return self.status == 0


# ---- events (the /api/v1/events stream) ----


@dataclass(frozen=True)
class Event:
    """Any engine event; ``type`` says which. Unknown types (from a newer engine) arrive as a plain ``Event``
    with the message in ``data``."""

    type: str
    data: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class EpisodeEvent(Event):
    """``episode.created`` or ``episode.updated``."""

    episode: Optional[Episode] = None


@dataclass(frozen=True)
class EpisodeDeleted(Event):
    id: str = ""


@dataclass(frozen=True)
class VmUpdated(Event):
    vm: Optional[Vm] = None


@dataclass(frozen=True)
class VmRemoved(Event):
    id: str = ""
    episode: str = ""


@dataclass(frozen=True)
class SnapshotEvent(Event):
    """``snapshot.created`` or ``snapshot.updated``."""

    snapshot: Optional[Snapshot] = None


@dataclass(frozen=True)
class SnapshotDeleted(Event):
    id: str = ""
    episode: Optional[str] = None


@dataclass(frozen=True)
class Progress(Event):
    """Work under way: ``operation`` (pack, open, image, ...) has ``done`` of ``total``; ``request`` is the
    ``request_id`` the call that started it named (``pack``, ``up_from``), so a client tells its own apart."""

    operation: str = ""
    vm: Optional[str] = None
    done: float = 0
    total: float = 0
    request: Optional[str] = None


@dataclass(frozen=True)
class Metrics(Event):
    vm: str = ""
    at: str = ""
    cpu_percent: float = 0.0
    memory: Optional[MemoryStats] = None


@dataclass(frozen=True)
class NetworkRefused(Event):
    """``vm.network.refused``: a packet the VM's network policy refused; ``refused`` is its count so far."""

    vm: str = ""
    episode: str = ""
    refusal: Optional[NetworkRefusal] = None
    refused: int = 0


AnyEvent = Union[
    Event,
    EpisodeEvent,
    EpisodeDeleted,
    VmUpdated,
    VmRemoved,
    SnapshotEvent,
    SnapshotDeleted,
    Progress,
    Metrics,
    NetworkRefused,
]


def event_from_json(j: Dict[str, Any]) -> Event:
    t = j.get("type", "")
    if t in ("episode.created", "episode.updated"):
        return EpisodeEvent(t, j, episode=Episode.from_json(j["episode"]))
    if t == "episode.deleted":
        return EpisodeDeleted(t, j, id=j["id"])
    if t == "vm.updated":
        return VmUpdated(t, j, vm=Vm.from_json(j["vm"]))
    if t == "vm.removed":
        return VmRemoved(t, j, id=j["id"], episode=j["episode"])
    if t in ("snapshot.created", "snapshot.updated"):
        return SnapshotEvent(t, j, snapshot=Snapshot.from_json(j["snapshot"]))
    if t == "snapshot.deleted":
        return SnapshotDeleted(t, j, id=j["id"], episode=j.get("episode"))
    if t == "progress":
        return Progress(
            t, j, operation=j["operation"], vm=j.get("vm"), done=j["done"], total=j["total"], request=j.get("request")
        )
    if t == "metrics":
        return Metrics(
            t, j, vm=j["vm"], at=j["at"], cpu_percent=float(j["cpuPercent"]), memory=MemoryStats.from_json(j["memory"])
        )
    if t == "vm.network.refused":
        return NetworkRefused(
            t, j, vm=j["vm"], episode=j["episode"], refusal=NetworkRefusal.from_json(j["refusal"]), refused=j["refused"]
        )
    return Event(t, j)


# ---- references ----

#: What every call that takes a VM, episode or snapshot accepts: an id, a unique prefix of one, a name, or the
#: object itself.
Ref = Union[str, Vm, Episode, Snapshot]


def ref_of(ref: Ref, what: str = "ref") -> str:
    if isinstance(ref, (Vm, Episode, Snapshot)):
        return ref.id
    if isinstance(ref, str) and ref:
        return ref
    raise TypeError(f"{what}: expected an id, a name or a Vm/Episode/Snapshot, got {ref!r}")


def fspath(path: "Union[str, os.PathLike[str]]") -> str:
    return os.path.abspath(os.fspath(path))
