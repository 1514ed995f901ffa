"""``copy_in``/``copy_out`` (``smol cp``; docs/images.md, "Copying files"), the halves both clients share: a tar of a
host tree made as it is sent, a tar from the guest unpacked as it comes, docker cp's rules for where things land,
and the guest's side (busybox ``tar`` through the agent's exec, as root, as the TypeScript SDK's copy.ts does).

What comes out of a guest is untrusted: every entry must lie under the name asked for, no name may have a ``..``
component, no directory on the way may lead out of the destination (a symbolic link met there is resolved and
checked), and an entry's own name is never followed (a link already there is replaced). Owners (numeric), modes,
times, symbolic and hard links are kept (owners when this runs as root); devices, FIFOs and sockets are not copied.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
import threading
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

from ._errors import CopyFailed

#: As docker cp: the copy runs as root in the guest, whatever user its image's commands run as.
AS_ROOT = "0"
#: How the guest's busybox is found: /.smol/busybox in an OCI image, busybox in the builtin and Debian ones.
BUSYBOXES = ("/.smol/busybox", "busybox")
IS_DIRECTORY = '[ -d "$1" ]'
CHUNK = 1 << 16


@dataclass(frozen=True)
class CopyResult:
    """What a copy moved: entries (files, directories, links) and bytes of file data."""

    entries: int
    bytes: int


def tools(busybox: Optional[str]) -> Tuple[List[str], str]:
    """The guest's sh argv and tar command, from the busybox found (None: the guest's own sh and tar)."""
    return ([busybox, "sh"], f"{busybox} tar") if busybox else (["sh"], "tar")


def extract_script(tar: str) -> str:
    return f'mkdir -p "$1" && cd "$1" && exec {tar} -x -f -'


def create_script(tar: str) -> str:
    return f'cd "$1" && exec {tar} -c -f - "$2"'


def check_guest_path(vm: str, guest_path: str) -> None:
    if not isinstance(guest_path, str) or not guest_path.startswith("/") or "\0" in guest_path:
        raise ValueError(f"{vm}:{guest_path}: a guest path is absolute")


def failure(what: str, exit_code: Optional[int], signal: Optional[str], stderr: bytes) -> CopyFailed:
    status = f"exit status {exit_code}" if exit_code is not None else f"signal {signal}"
    return CopyFailed(f"{what}: {stderr.decode('utf-8', 'replace').strip() or status}")


def into_guest(source: str, target: str, into_directory: bool) -> Tuple[str, str]:
    """Where a host ``source`` lands in the guest: (the directory to unpack in, the top entry's name)."""
    if into_directory:
        return target, os.path.basename(os.path.abspath(source))
    return posixpath.dirname(target) or "/", posixpath.basename(target)


def out_of_guest(source: str, target: str) -> Tuple[str, str]:
    """Where a guest ``source`` lands here: into an existing directory ``target`` as its basename, else as it."""
    resolved = os.path.abspath(target)
    if os.path.isdir(resolved):
        return resolved, posixpath.basename(source.rstrip("/") or "/")
    return os.path.dirname(resolved), os.path.basename(resolved)


class TarPacker:
    """A tar of host ``source`` (a file or a directory, recursively) whose top entry is ``name``, made in a thread
    and read in chunks, so that a tree of any size never sits in memory."""

    def __init__(self, source: str) -> None:
        try:
            os.lstat(source)
        except OSError:
            raise FileNotFoundError(f"{source}: no such file or directory") from None
        self.source = source
        self.entries = 0
        self.bytes = 0
        self._error: List[BaseException] = []

    def _keep(self, info: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
        if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
            return None  # devices, FIFOs: not copied (sockets tarfile leaves out itself)
        info.uname = info.gname = ""  # numeric owners, as the TypeScript side writes them
        # Whole seconds, cut as tar cuts them: a float would go into the ustar field rounded (so up, half the time),
        # with the exact value only in a PAX record that busybox tar does not read.
        info.mtime = int(info.mtime)
        self.entries += 1
        if info.isfile():
            self.bytes += info.size
        return info

    def chunks(self, name: str) -> Iterator[bytes]:
        read_end, write_end = os.pipe()

        def write() -> None:
            try:
                with os.fdopen(write_end, "wb", buffering=CHUNK) as sink:
                    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as archive:
                        archive.add(self.source, arcname=name, recursive=True, filter=self._keep)
            except BrokenPipeError:
                pass  # the reader stopped: the exec ended
            except BaseException as error:  # raised to the reader
                self._error.append(error)

        thread = threading.Thread(target=write, name="smol-copy-pack", daemon=True)
        thread.start()
        try:
            while True:
                chunk = os.read(read_end, CHUNK)
                if not chunk:
                    break
                yield chunk
        finally:
            os.close(read_end)
            thread.join()
        if self._error:
            raise self._error[0]


def close_quietly(chunks: Iterator[bytes]) -> None:
    """Ends a packer's chunks (its thread and pipe) once the exec is over; one still being read elsewhere (the
    exec's stdin thread, given up on) ends when that read returns."""
    try:
        chunks.close()  # type: ignore[attr-defined]
    except ValueError:
        pass  # "generator already executing"


def _parts(name: str) -> List[str]:
    return [part for part in name.split("/") if part not in ("", ".")]


class TarUnpacker:
    """Unpacks a tar fed in chunks into ``dest`` (in a thread), renaming its top entry ``source_name`` to
    ``name``; ``finish`` returns the counts or raises what went wrong."""

    def __init__(self, dest: str, source_name: str, name: str, what: str) -> None:
        self.dest = os.path.realpath(dest)
        self.source_name = source_name
        self.name = name
        self.what = what
        self.entries = 0
        self.bytes = 0
        self._error: List[BaseException] = []
        self._read_end, self._write_end = os.pipe()
        self._thread = threading.Thread(target=self._run, name="smol-copy-unpack", daemon=True)
        self._thread.start()

    def _renamed(self, name: str, entry: str) -> str:
        parts = _parts(name)
        if ".." in parts:
            raise CopyFailed(f"{self.what}: entry {entry!r}: its name has a `..` component")
        if not parts or parts[0] != self.source_name:
            raise CopyFailed(f"{self.what}: the guest's tar has {entry!r}, outside what was asked")
        return "/".join([self.name, *parts[1:]])

    def _inside(self, relative: str, entry: str) -> str:
        """The entry's path here, its directory resolved (links on the way followed) and checked to be inside."""
        parent = os.path.realpath(os.path.join(self.dest, os.path.dirname(relative)))
        if parent != self.dest and not parent.startswith(self.dest + os.sep):
            raise CopyFailed(f"{self.what}: entry {entry!r} would be written outside {self.dest}")
        return os.path.join(parent, os.path.basename(relative))

    def _run(self) -> None:
        trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
        directories: List[Tuple[tarfile.TarInfo, str]] = []
        try:
            with os.fdopen(self._read_end, "rb", buffering=CHUNK) as source:
                with tarfile.open(fileobj=source, mode="r|") as archive:
                    for member in archive:
                        entry = member.name
                        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                            continue  # devices, FIFOs: not copied
                        member.name = self._renamed(member.name, entry)
                        if member.islnk():
                            member.linkname = self._renamed(member.linkname, entry)
                            self._inside(member.linkname, entry)
                        target = self._inside(member.name, entry)
                        # The entry's own name is never followed: what is there (but a directory for a directory)
                        # goes first.
                        if os.path.islink(target) or (os.path.lexists(target) and not member.isdir()):
                            if os.path.isdir(target) and not os.path.islink(target):
                                raise CopyFailed(f"{self.what}: entry {entry!r}: {target} is a directory")
                            os.unlink(target)
                        member.name = os.path.relpath(target, self.dest)
                        # A directory's mode and times are set at the end, so that a read-only one still takes
                        # what the tar puts in it (and its mtime is not moved by that).
                        archive.extract(
                            member, self.dest, set_attrs=not member.isdir(), numeric_owner=True, **trusted
                        )  # type: ignore[arg-type]
                        if member.isdir():
                            directories.append((member, target))
                        self.entries += 1
                        if member.isfile():
                            self.bytes += member.size
                    for member, target in reversed(directories):
                        archive.chown(member, target, True)
                        archive.utime(member, target)
                        archive.chmod(member, target)
        except BaseException as error:
            # Leaving the `with` closed the pipe's read end: the feeder's writes fail instead of blocking.
            self._error.append(error)

    def feed(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        while view and not self._error:
            try:
                view = view[os.write(self._write_end, view) :]
            except (BrokenPipeError, OSError):
                return  # the unpacker failed; finish says why

    def finish(self, ok: bool = True) -> CopyResult:
        """Ends the input and waits for the unpacker; raises its error (when ``ok``: else the caller's comes first)."""
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1
        self._thread.join()
        if self._error and ok:
            error = self._error[0]
            if isinstance(error, CopyFailed):
                raise error
            raise CopyFailed(f"{self.what}: {error}") from error
        return CopyResult(self.entries, self.bytes)

