"""A throwaway data dir with a real engine in it, started by the SDK's own connect() (as tests/engine/engine-home.ts
does for the TypeScript SDK): every engine and vmhost started for it is killed, and the dir removed, at the end.

Tiny guests (native/out/guests, built by ``make -C native guests``) run on this machine's /dev/kvm, PVM included.
Tests marked ``agent`` need the Linux guest with its agent (exec, files); they run where KVM is hardware, which on
machines with PVM is the KVM lab (``SMOL_PYTEST_AGENT=1``, set by npm test's lab part), and are skipped elsewhere
with that reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
GUESTS = os.path.join(ROOT, "native", "out", "guests")
sys.path.insert(0, os.path.dirname(HERE))

import smol_studio  # noqa: E402

T = TypeVar("T")


class EngineHome:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="smol-home-py-")
        self._files: List[str] = []

    def smolfile(self, name: str, text: str) -> str:
        """A Smolfile beside the data dir; ``@guests@`` is the tiny guests' directory."""
        path = f"{self.dir}-{name}.smolfile"
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace("@guests@", GUESTS))
        self._files.append(path)
        return path

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(os.path.join(self.dir, "engine.log"), encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no engine.log)"

    def processes(self) -> Dict[int, List[str]]:
        """Every process whose environment has SMOL_HOME set to this data dir (the engine, its vmhosts)."""
        found: Dict[int, List[str]] = {}
        mark = f"SMOL_HOME={self.dir}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read().split(b"\0")
            except OSError:
                continue
            if mark in environ:
                found[int(entry)] = [v.decode("latin-1") for v in environ]
        return found

    def vmhosts(self) -> Dict[str, int]:
        hosts = {}
        for pid, environ in self.processes().items():
            for v in environ:
                if v.startswith("SMOL_VMHOST="):
                    hosts[v[len("SMOL_VMHOST=") :]] = pid
        return hosts

    def engine_pid(self) -> Optional[int]:
        try:
            with open(os.path.join(self.dir, "engine.json"), encoding="utf-8") as f:
                return int(json.load(f)["pid"])
        except (OSError, ValueError, KeyError):
            return None

    def destroy(self) -> None:
        for pid in {self.engine_pid(), *self.processes()}:
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)
        for path in self._files:
            try:
                os.unlink(path)
            except OSError:
                pass


class CountingProxy:
    """A Unix socket that relays every connection to ``upstream`` (an engine's socket) byte for byte, keeping what the
    engine answered on each: real HTTP between a client and the engine, counted (the status of each answer, and its
    bytes), for tests that must see what went over the wire rather than what a client says it did."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self._dir = tempfile.mkdtemp(prefix="smol-proxy-")
        self.path = os.path.join(self._dir, "s")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(16)
        self._answers: List[bytearray] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(self.upstream)
            answered = bytearray()
            with self._lock:
                self._answers.append(answered)
            threading.Thread(target=self._pump, args=(client, engine, None), daemon=True).start()
            threading.Thread(target=self._pump, args=(engine, client, answered), daemon=True).start()

    def _pump(self, source: socket.socket, to: socket.socket, kept: Optional[bytearray]) -> None:
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                if kept is not None:
                    with self._lock:
                        kept += data
                to.sendall(data)
        except OSError:
            pass
        for sock in (source, to):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def answers(self) -> List[Tuple[int, int]]:
        """(status, bytes) of every answer so far, in order per connection (the bytes up to the next answer's status
        line; an answer's body never holds one: the engine's are JSON)."""
        out: List[Tuple[int, int]] = []
        with self._lock:
            streams = [bytes(a) for a in self._answers]
        for stream in streams:
            starts = [m for m in re.finditer(rb"HTTP/1\.1 (\d{3}) ", stream)]
            for i, m in enumerate(starts):
                end = starts[i + 1].start() if i + 1 < len(starts) else len(stream)
                out.append((int(m.group(1)), end - m.start()))
        return out

    def statuses(self) -> List[int]:
        return [status for status, _ in self.answers()]

    def close(self) -> None:
        self._server.close()
        shutil.rmtree(self._dir, ignore_errors=True)


@pytest.fixture(scope="session")
def home() -> Iterator[EngineHome]:
    h = EngineHome()
    try:
        yield h
    finally:
        h.destroy()


@pytest.fixture(scope="session")
def smol(home: EngineHome) -> Iterator[smol_studio.Smol]:
    try:
        # A generous wait: inside the KVM lab Node itself runs emulated (node -e 0 took 11 s on a busy host, and the
        # engine's socket came 32 s after it started), well past connect()'s default 60 s for a starting engine.
        client = smol_studio.connect(home.dir, timeout=300)
    except smol_studio.EngineUnavailable as error:
        raise RuntimeError(f"{error}\nengine.log ends:\n{home.log_tail()}") from None
    yield client
    client.close()


@pytest.fixture(scope="session")
def echo_file(home: EngineHome) -> str:
    return home.smolfile("echo", 'kernel = "@guests@/echo.elf"\nmemory = 16\n')


@pytest.fixture(scope="session")
def count_file(home: EngineHome) -> str:
    # 20 lines a second, paced by the PIT and idle in between: visibly moving, cheap on one slow CPU.
    return home.smolfile("count", 'kernel = "@guests@/count.elf"\ncmdline = "hz=20"\nmemory = 16\n')


def eventually(what: str, check: Callable[[], Optional[T]], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value is not None:
                return value
        except Exception as error:  # noqa: BLE001 (kept to say why it never held)
            last = error
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f": {last}" if last else ""))


def kvm_kind() -> Optional[str]:
    """``hardware``, ``pvm`` or ``unknown`` as ``smol doctor --json`` says; None when it cannot tell."""
    try:
        out = subprocess.run(
            ["node", os.path.join(ROOT, "bin", "smol.js"), "doctor", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        return json.loads(out).get("kvm", {}).get("implementation")
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    agent = [item for item in items if item.get_closest_marker("agent")]
    if not agent or os.environ.get("SMOL_PYTEST_AGENT") == "1":
        return
    kind = kvm_kind()
    if kind == "hardware":
        return
    skip = pytest.mark.skip(
        reason=f"needs a Linux guest with the agent, which /dev/kvm here ({kind or 'none'}) cannot run: "
        "runs in the KVM lab (npm run lab -- env SMOL_PYTEST_AGENT=1 /usr/bin/python3 -m pytest -m agent sdk/python/tests)"
    )
    for item in agent:
        item.add_marker(skip)
