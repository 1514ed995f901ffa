"""Finding the engine of a data dir, and starting it when nothing answers (docs/engine.md, "Processes"), as the
TypeScript SDK's engine-connection.ts does: the socket is ``SMOL_HOME/engine.sock``; the engine is ``smol engine
--home HOME``, detached, its output appended to ``SMOL_HOME/engine.log``; an engine that exits 3 lost the data dir's
lock to another one that is starting, which answers soon."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import List, Optional

from ._errors import EngineUnavailable

LOST_LOCK = 3


def smol_home(home: "Optional[str | os.PathLike[str]]" = None) -> str:
    """``home``, else ``$SMOL_HOME``, else ``$XDG_DATA_HOME/smol-studio``, else ``~/.local/share/smol-studio``."""
    if home is not None:
        return os.path.abspath(os.fspath(home))
    env = os.environ
    if env.get("SMOL_HOME"):
        return os.path.abspath(env["SMOL_HOME"])
    xdg = env.get("XDG_DATA_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "smol-studio")


def socket_path(home: str) -> str:
    return os.path.join(home, "engine.sock")


def _checkout_cli() -> Optional[str]:
    """``bin/smol.js`` of the checkout this package sits in (sdk/python/smol_studio/), if it does."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    cli = os.path.join(root, "bin", "smol.js")
    try:
        with open(os.path.join(root, "package.json"), encoding="utf-8") as f:
            if json.load(f).get("name") != "smol-studio":
                return None
    except (OSError, ValueError):
        return None
    return cli if os.path.isfile(cli) else None


def smol_command(smol: Optional[str] = None) -> List[str]:
    """How to run ``smol``: ``smol`` (the argument), ``$SMOL_CLI``, the checkout's ``bin/smol.js``, or ``smol`` on
    PATH. A ``.js`` file runs under ``node`` (``$SMOL_NODE``, else node on PATH)."""
    cli = smol or os.environ.get("SMOL_CLI") or _checkout_cli() or shutil.which("smol")
    if not cli:
        raise EngineUnavailable(
            "cannot start an engine: no smol CLI found (pass smol='/path/to/bin/smol.js', set SMOL_CLI, "
            "or put smol on PATH with npm install -g)"
        )
    if cli.endswith(".js"):
        node = os.environ.get("SMOL_NODE") or shutil.which("node")
        if not node:
            raise EngineUnavailable(f"cannot start an engine: {cli} needs node, and there is none on PATH")
        return [node, cli]
    return [cli]


class EngineLauncher:
    """One attempt at starting the data dir's engine; the caller polls its socket and asks ``failure()``."""

    def __init__(self, home: str, smol: Optional[str] = None) -> None:
        self.home = home
        self.command = smol_command(smol) + ["engine", "--home", home]
        os.makedirs(home, mode=0o700, exist_ok=True)
        log_path = os.path.join(home, "engine.log")
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**os.environ, "SMOL_HOME": home},
                start_new_session=True,
                close_fds=True,
            )
        self.log_path = log_path

    def failure(self) -> Optional[str]:
        """Why it will not answer, once it has exited with anything but a lost lock race; else None."""
        code = self.process.poll()
        if code is None or code == LOST_LOCK:
            return None
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        return f"the engine for {self.home} failed to start ({how}); see {self.log_path}"

    def timed_out(self, timeout: float) -> str:
        holder = ""
        if self.process.poll() == LOST_LOCK:
            try:
                with open(os.path.join(self.home, "engine.lock"), encoding="utf-8") as f:
                    pid = f.read().strip()
                if pid:
                    holder = f"; the engine lock names pid {pid}, which holds the data dir without answering"
            except OSError:
                pass
        return f"the engine for {self.home} did not answer within {timeout:g} s{holder}; see {self.log_path}"


def no_engine(home: str) -> str:
    return f"no engine is running for {home} (start one with: smol engine)"
