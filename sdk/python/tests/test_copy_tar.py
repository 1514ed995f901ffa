"""The host's halves of ``copy_in``/``copy_out`` (smol_studio/_copy.py), without a guest: a tree packed and unpacked
again is the same tree (modes, owners as root, times, symbolic and hard links), and hostile archives from a guest
(``..``, entries outside what was asked for, a symbolic link out of the destination and a file through it, a link
already at an entry's name) write nothing outside the destination. The guest's half runs in the lab
(test_copy.py)."""

from __future__ import annotations

import io
import os
import tarfile
from typing import Iterator, List

import pytest

from smol_studio import CopyFailed, CopyResult
from smol_studio import _copy as copying


def tree(root: str) -> None:
    os.makedirs(os.path.join(root, "sub", "deeper"))
    with open(os.path.join(root, "sub", "a.txt"), "wb") as f:
        f.write(b"a" * 100_000)
    with open(os.path.join(root, "run.sh"), "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(os.path.join(root, "run.sh"), 0o4750)
    os.link(os.path.join(root, "run.sh"), os.path.join(root, "run-again.sh"))
    os.symlink("sub/a.txt", os.path.join(root, "link"))
    os.chmod(os.path.join(root, "sub", "deeper"), 0o555)
    os.utime(os.path.join(root, "sub", "a.txt"), (1_700_000_000, 1_700_000_000))
    if os.geteuid() == 0:
        os.chown(os.path.join(root, "run.sh"), 1234, 5678)


def listing(root: str) -> List[tuple]:
    out = []
    for where, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = os.path.join(where, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            link = os.readlink(path) if os.path.islink(path) else None
            data = None
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    data = f.read()
            # directories change as entries land; a symbolic link's own time is not kept (tar sets no link times)
            mtime = int(st.st_mtime) if not (os.path.isdir(path) or os.path.islink(path)) else None
            out.append((rel, st.st_mode, st.st_uid, st.st_gid, link, data, mtime, st.st_nlink))
    return sorted(out)


def tar_of(entries: List[tarfile.TarInfo], data: bytes = b"x") -> Iterator[bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for info in entries:
            if info.isfile():
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            else:
                archive.addfile(info)
    yield buf.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info


def unpack(chunks: Iterator[bytes], dest: str, source_name: str, name: str) -> CopyResult:
    unpacker = copying.TarUnpacker(dest, source_name, name, "vm-test:/x")
    for chunk in chunks:
        unpacker.feed(chunk)
    return unpacker.finish()


def test_a_tree_packed_and_unpacked_is_the_same_tree(tmp_path: "os.PathLike[str]") -> None:
    source = os.path.join(tmp_path, "source")
    tree(source)
    packer = copying.TarPacker(source)
    out = os.path.join(tmp_path, "out")
    os.mkdir(out)
    result = unpack(packer.chunks("source"), out, "source", "copy")
    assert (packer.entries, packer.bytes) == (7, 100_000 + 18)
    assert result == CopyResult(7, 100_000 + 18)  # the hard link's bytes are the first file's
    assert listing(os.path.join(out, "copy")) == listing(source)


def test_a_single_file_lands_under_the_name_asked_for(tmp_path: "os.PathLike[str]") -> None:
    source = os.path.join(tmp_path, "one.txt")
    with open(source, "w") as f:
        f.write("one\n")
    packer = copying.TarPacker(source)
    result = unpack(packer.chunks("one.txt"), str(tmp_path), "one.txt", "renamed.txt")
    assert result == CopyResult(1, 4)
    with open(os.path.join(tmp_path, "renamed.txt")) as f:
        assert f.read() == "one\n"


def test_a_missing_source_names_it(tmp_path: "os.PathLike[str]") -> None:
    with pytest.raises(FileNotFoundError, match="nope: no such file or directory"):
        copying.TarPacker(os.path.join(tmp_path, "nope"))
    with pytest.raises(ValueError, match="a guest path is absolute"):
        copying.check_guest_path("vm-1", "relative/path")


@pytest.mark.parametrize(
    "entries, message",
    [
        ([entry("asked/../../escaped")], "`..` component"),
        ([entry("other/file")], "outside what was asked"),
        ([entry("/asked/../x")], "`..` component"),
        ([entry("asked", tarfile.DIRTYPE), entry("asked/hard", tarfile.LNKTYPE, "../etc/passwd")], "`..` component"),
        (
            [
                entry("asked", tarfile.DIRTYPE),
                entry("asked/out", tarfile.SYMTYPE, "/"),
                entry("asked/out/escaped"),
            ],
            "would be written outside",
        ),
    ],
)
def test_hostile_archives_write_nothing_outside(
    tmp_path: "os.PathLike[str]", entries: List[tarfile.TarInfo], message: str
) -> None:
    dest = os.path.join(tmp_path, "dest")
    os.mkdir(dest)
    with pytest.raises(CopyFailed, match=message):
        unpack(tar_of(entries), dest, "asked", "asked")
    assert not os.path.exists(os.path.join(tmp_path, "escaped"))
    assert not os.path.exists("/escaped")


def test_a_link_already_at_an_entry_is_replaced_not_followed(tmp_path: "os.PathLike[str]") -> None:
    dest = os.path.join(tmp_path, "dest")
    os.mkdir(dest)
    victim = os.path.join(tmp_path, "victim")
    with open(victim, "w") as f:
        f.write("keep me\n")
    os.symlink(victim, os.path.join(dest, "asked"))
    unpack(tar_of([entry("asked")], b"new\n"), dest, "asked", "asked")
    with open(victim) as f:
        assert f.read() == "keep me\n"
    assert not os.path.islink(os.path.join(dest, "asked"))
    with open(os.path.join(dest, "asked")) as f:
        assert f.read() == "new\n"


def test_a_truncated_archive_fails_naming_the_copy(tmp_path: "os.PathLike[str]") -> None:
    whole = b"".join(tar_of([entry("asked")], b"y" * 5000))
    with pytest.raises(CopyFailed, match="vm-test:/x"):
        unpack(iter([whole[:1000]]), str(tmp_path), "asked", "asked")


def test_times_go_into_the_tar_header_cut_to_whole_seconds(tmp_path: "os.PathLike[str]") -> None:
    # busybox tar in the guest reads only the ustar field: a rounded time there would move mtimes a second ahead.
    source = os.path.join(tmp_path, "late.txt")
    with open(source, "w") as f:
        f.write("x")
    os.utime(source, (1_700_000_000.7, 1_700_000_000.7))
    archive = b"".join(copying.TarPacker(source).chunks("late.txt"))
    headers = [archive[at : at + 512] for at in range(0, len(archive), 512)]
    ustar = next(h for h in headers if h[257:262] == b"ustar" and h[156:157] == tarfile.REGTYPE)
    assert int(ustar[136:148].rstrip(b"\0 ").decode(), 8) == 1_700_000_000
