"""Trusting a remote engine's TLS certificate by its SHA-256 fingerprint (docs/remote.md, "Pinning"), as the
TypeScript SDK's pinned-tls.ts does: the fingerprint given, or the one pinned on first use in the client's engines
file (the CLI's: ``$SMOL_CLIENT_CONFIG``, else ``$XDG_CONFIG_HOME/smol-studio/engines.json``, else
``~/.config/smol-studio/engines.json``), checked right after the handshake and before a byte of the request (so
before the token) is sent."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import ssl
import contextlib
import tempfile
import time
import urllib.parse
from typing import Iterator, Optional

from ._errors import EngineUnavailable, SmolError
from ._protocol import Target


class CertificateChanged(SmolError):
    """The engine presented another certificate than the pinned or given one."""

    def __init__(self, message: str, presented: str, pinned: str) -> None:
        super().__init__(message)
        self.presented = presented
        self.pinned = pinned


def normal_fingerprint(text: str) -> str:
    """``AB:CD:...`` in upper case from any spelling of the 64 hex digits."""
    hexed = text.strip()
    if hexed.lower().startswith("sha256:"):
        hexed = hexed[7:]
    hexed = hexed.replace(":", "").upper()
    if len(hexed) != 64 or any(c not in "0123456789ABCDEF" for c in hexed):
        raise ValueError(f"fingerprint: {text!r} is not a SHA-256 fingerprint (64 hex digits)")
    return ":".join(hexed[i : i + 2] for i in range(0, 64, 2))


def engines_file() -> str:
    if os.environ.get("SMOL_CLIENT_CONFIG"):
        return os.path.abspath(os.environ["SMOL_CLIENT_CONFIG"])
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "smol-studio", "engines.json")


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {"engines": {}, "pins": {}}
    data.setdefault("engines", {})
    data.setdefault("pins", {})
    return data


def _write(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".engines-")  # mode 0600
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _owner_alive(lock: str) -> bool:
    try:
        with open(lock, encoding="utf-8") as f:
            text = f.read().strip()
        if time.time() - os.stat(lock).st_mtime > 30:
            return False
    except OSError:
        return True  # gone or being written this instant: try again
    if not text.isdigit() or int(text) <= 0:
        return True  # its owner has not written its pid yet
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """Holds ``PATH.lock`` as the CLI and the engine do (src/api/file-lock.ts): made with O_EXCL and holding the
    owner's pid, taken over when its owner is gone, waited for 5 s when it lives. Without it, two writers of the
    engines file each write back what they read plus their own change, and the last one drops the other's."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    lock = path + ".lock"
    deadline = time.monotonic() + 5
    while True:
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            if not _owner_alive(lock):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)
                continue
            if time.monotonic() > deadline:
                raise SmolError(
                    f"{path} is being changed by another process ({lock}); try again, or remove {lock} if it is not"
                ) from None
            time.sleep(0.005)
            continue
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
        return


def insecure_context() -> ssl.SSLContext:
    """TLS without the CA check: the fingerprint is the check (``check_pin`` right after the handshake)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def check_pin(sock: ssl.SSLSocket, where: str, fingerprint: Optional[str], pins: Optional[str]) -> None:
    """Raises ``CertificateChanged`` unless the peer's certificate is the given one, or the pinned one (pinning
    it when ``where`` has none yet)."""
    der = sock.getpeercert(binary_form=True)
    if not der:
        raise SmolError(f"the engine at {where} presented no certificate")
    presented = normal_fingerprint(hashlib.sha256(der).hexdigest())

    def refuse(pinned: str, whose: str) -> None:
        raise CertificateChanged(
            f"the engine at {where} presented a certificate with SHA-256 fingerprint {presented}, but {whose} "
            f"{pinned}: refused (someone may be in between). If its certificate was replaced on purpose, compare "
            f"the new fingerprint with the one smol serve printed on the engine's host, then trust it: "
            f"smol engine trust {where}",
            presented,
            pinned,
        )

    if fingerprint:
        wanted = normal_fingerprint(fingerprint)
        if wanted != presented:
            refuse(wanted, "the fingerprint given is")
        return
    path = pins or engines_file()
    pinned = _read(path)["pins"].get(where)
    if pinned is None:
        # Pinned under the lock, into the file as it is then (another process may have added to it, or pinned this
        # engine, meanwhile).
        with _locked(path):
            data = _read(path)
            pinned = data["pins"].get(where)
            if pinned is None:
                now = datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
                data["pins"][where] = {"fingerprint": presented, "since": now}
                _write(path, data)
    if pinned is not None and pinned["fingerprint"] != presented:
        refuse(pinned["fingerprint"], f"since {pinned['since']} it is pinned to")


def remote_engine(home: Optional[str], url: Optional[str], engine: Optional[str]) -> Optional[str]:
    """The remote engine ``connect`` reaches, as the TypeScript SDK and the CLI choose it: ``url``, else ``engine``,
    else ``$SMOL_ENGINE`` when no data dir was given; None: the data dir's own engine."""
    if url is not None:
        return url
    if engine is not None:
        return engine
    return (os.environ.get("SMOL_ENGINE") or None) if home is None else None


def remote_target(ref: str, token: Optional[str], fingerprint: Optional[str], pins: Optional[str]) -> Target:
    """Where a remote engine listens: ``ref`` is its URL (``?token=`` in it, else ``token``, else ``$SMOL_TOKEN``)
    or the name it was added under (``smol engine add NAME URL``) in the client's engines file, with that entry's
    token unless ``token`` is given."""
    if ref.startswith(("http://", "https://")):
        in_url = urllib.parse.parse_qs(urllib.parse.urlsplit(ref).query).get("token")
        if token is None and not in_url:
            token = os.environ.get("SMOL_TOKEN") or None
        return Target.url(ref, token, fingerprint, pins)
    added = _read(engines_file())["engines"].get(ref)
    if not added:
        raise EngineUnavailable(
            f"no engine named {ref} (smol engine ls lists them; smol engine add {ref} URL --token T adds it)"
        )
    return Target.url(added["url"], token or added.get("token"), fingerprint, pins)
