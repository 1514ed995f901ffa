"""The engines file with several writers at once (docs/remote.md, "Connecting"): a first-use pin is written under
``FILE.lock``, the lock the CLI and the engine take (src/api/file-lock.ts), into the file as it is then, so an engine
another process added meanwhile is kept. Before the lock, the last writer dropped the others' changes."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import subprocess
import tempfile

import pytest

from smol_studio import _pins
from smol_studio._errors import SmolError

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


class PresentedCertificate:
    """What check_pin reads of a TLS socket after the handshake: the peer certificate's DER bytes."""

    def __init__(self, der: bytes) -> None:
        self.der = der

    def getpeercert(self, binary_form: bool = False) -> bytes:
        assert binary_form
        return self.der


def _pin_many(path: str, name: str, count: int) -> None:
    for i in range(count):
        _pins.check_pin(PresentedCertificate(f"{name}-{i}".encode()), f"{name}-{i}.test:7000", None, path)


def test_four_processes_pin_at_once_and_none_is_lost() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cfg", "engines.json")
        context = multiprocessing.get_context("fork")
        workers = [context.Process(target=_pin_many, args=(path, n, 25)) for n in "abcd"]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert [w.exitcode for w in workers] == [0, 0, 0, 0]
        with open(path, encoding="utf-8") as f:
            pins = json.load(f)["pins"]
        assert len(pins) == 100
        digest = hashlib.sha256(b"c-7").hexdigest()
        assert pins["c-7.test:7000"]["fingerprint"] == _pins.normal_fingerprint(digest)
        assert not os.path.exists(path + ".lock")
        assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_pin_keeps_the_engine_the_cli_added_meanwhile() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "engines.json")
        # The CLI's module (built by npm run build:ts) adds an engine, as `smol engine add` does.
        module = os.path.join(ROOT, "dist", "src", "api", "client-config.js")
        if not os.path.exists(module):
            pytest.skip(f"{module} is not built (npm run build:ts)")
        script = (
            f"const {{ ClientConfig }} = await import({json.dumps(module)});"
            f"ClientConfig.load({json.dumps(path)}).addEngine('lab', 'https://lab.test:7000', 'tok');"
        )
        subprocess.run(["node", "--input-type=module", "-e", script], check=True)
        _pins.check_pin(PresentedCertificate(b"lab"), "lab.test:7000", None, path)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        assert list(data["engines"]) == ["lab"]
        assert list(data["pins"]) == ["lab.test:7000"]


def test_a_stale_lock_is_taken_over_and_a_living_one_is_refused_by_name() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "engines.json")
        with open(path + ".lock", "w", encoding="utf-8") as f:
            f.write("999999999\n")  # no such process
        _pins.check_pin(PresentedCertificate(b"x"), "x.test:7000", None, path)
        assert not os.path.exists(path + ".lock")

        with open(path + ".lock", "w", encoding="utf-8") as f:
            f.write(f"{os.getppid()}\n")  # alive
        with pytest.raises(SmolError, match=r"engines.json is being changed by another process .*engines.json.lock"):
            _pins.check_pin(PresentedCertificate(b"y"), "y.test:7000", None, path)
        with open(path, encoding="utf-8") as f:
            assert list(json.load(f)["pins"]) == ["x.test:7000"]
