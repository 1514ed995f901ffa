"""``copy_in``/``copy_out`` and ``exec(user=...)`` in a Linux guest through its agent (smolfiles/shell.smolfile, the
builtin image), through both clients. PVM cannot run a Linux guest, so on this kind of machine these run in the KVM
lab:

    npm run lab -- env SMOL_PYTEST_AGENT=1 /usr/bin/python3 -m pytest -m agent sdk/python/tests/test_copy.py
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from typing import Iterator

import pytest

import smol_studio

from conftest import ROOT
from test_copy_tar import listing, tree

pytestmark = pytest.mark.agent

SHELL = os.path.join(ROOT, "smolfiles", "shell.smolfile")


@pytest.fixture(scope="module")
def linux(smol: smol_studio.Smol) -> Iterator[smol_studio.Up]:
    with smol.episode_scope(SHELL, name="py-copy") as ep:
        yield ep


def test_a_tree_goes_in_and_comes_back_the_same(
    smol: smol_studio.Smol, linux: smol_studio.Up, tmp_path: "os.PathLike[str]"
) -> None:
    source = os.path.join(tmp_path, "tree")
    tree(source)
    with open(os.path.join(source, "big.bin"), "wb") as f:
        f.write(os.urandom(8 << 20))
    into = smol.copy_in(linux.vm, source, "/tmp/py-in")
    assert into.entries == 8 and into.bytes == (8 << 20) + 100_000 + 18
    digest = smol.exec(linux.vm, ["sh", "-c", "sha256sum /tmp/py-in/big.bin | cut -d' ' -f1"]).stdout.decode().strip()
    with open(os.path.join(source, "big.bin"), "rb") as f:
        assert digest == hashlib.sha256(f.read()).hexdigest()
    out = os.path.join(tmp_path, "out")
    os.mkdir(out)
    back = smol.copy_out(linux.vm, "/tmp/py-in", out)  # into an existing directory: out/py-in
    assert back == into
    assert listing(os.path.join(out, "py-in")) == listing(source)


def test_docker_cp_rules_for_where_a_file_lands(
    smol: smol_studio.Smol, linux: smol_studio.Up, tmp_path: "os.PathLike[str]"
) -> None:
    note = os.path.join(tmp_path, "note.txt")
    with open(note, "w") as f:
        f.write("a note\n")
    smol.exec(linux.vm, ["mkdir", "-p", "/tmp/py-dir"])
    smol.copy_in(linux.vm, note, "/tmp/py-dir")  # an existing directory: /tmp/py-dir/note.txt
    smol.copy_in(linux.vm, note, "/tmp/py-new/renamed.txt")  # else the name itself, its directory made
    listed = smol.exec(linux.vm, ["sh", "-c", "cat /tmp/py-dir/note.txt /tmp/py-new/renamed.txt"])
    assert listed.stdout == b"a note\na note\n"
    smol.copy_out(linux.vm, "/tmp/py-new/renamed.txt", os.path.join(tmp_path, "back.txt"))
    with open(os.path.join(tmp_path, "back.txt")) as f:
        assert f.read() == "a note\n"


def test_a_missing_guest_path_is_an_error_naming_it(
    smol: smol_studio.Smol, linux: smol_studio.Up, tmp_path: "os.PathLike[str]"
) -> None:
    with pytest.raises(smol_studio.CopyFailed, match="/no/such/thing"):
        smol.copy_out(linux.vm, "/no/such/thing", os.path.join(tmp_path, "none"))
    assert not os.path.exists(os.path.join(tmp_path, "none"))


def test_the_asyncio_client_copies_both_ways(
    smol: smol_studio.Smol, linux: smol_studio.Up, tmp_path: "os.PathLike[str]"
) -> None:
    source = os.path.join(tmp_path, "tree")
    tree(source)
    out = os.path.join(tmp_path, "out")

    async def main() -> None:
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            into = await asmol.copy_in(linux.vm, source, "/tmp/py-async")
            back = await asmol.copy_out(linux.vm, "/tmp/py-async", out)
            assert into == back

    asyncio.run(main())
    assert listing(out) == listing(source)


def test_exec_runs_as_the_user_asked_for(smol: smol_studio.Smol, linux: smol_studio.Up) -> None:
    as_uid = smol.exec(linux.vm, ["sh", "-c", "id -u; id -g; echo $HOME"], user="4242:4343")
    assert as_uid.stdout == b"4242\n4343\n/\n"
    assert smol.exec(linux.vm, ["id", "-u"], user="0").stdout == b"0\n"
    with pytest.raises(smol_studio.BadRequest, match='user "bob" is not in /etc/passwd'):
        smol.exec(linux.vm, ["true"], user="bob")

    async def main() -> bytes:
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            return (await asmol.exec(linux.vm, ["id", "-u"], user="4242")).stdout

    assert asyncio.run(main()) == b"4242\n"
    with pytest.raises(ValueError, match="user: expected a name, uid"):
        smol.exec(linux.vm, ["true"], user="a:b:c")
