"""Tier 3 for the Python SDK: commands and files in a Linux guest through its agent (smolfiles/shell.smolfile, the
builtin image). PVM cannot run a Linux guest, so on this kind of machine these run in the KVM lab:

    npm run lab -- env SMOL_PYTEST_AGENT=1 /usr/bin/python3 -m pytest -m agent sdk/python/tests
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from typing import Iterator, List

import pytest

import smol_studio

from conftest import ROOT

pytestmark = pytest.mark.agent

SHELL = os.path.join(ROOT, "smolfiles", "shell.smolfile")


@pytest.fixture(scope="module")
def linux(smol: smol_studio.Smol) -> Iterator[smol_studio.Up]:
    with smol.episode_scope(SHELL, name="py-agent") as ep:
        yield ep


def test_exec_streams_output_and_returns_the_exit_status(smol: smol_studio.Smol, linux: smol_studio.Up) -> None:
    result = smol.exec(linux.vm, ["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (result.exit_code, result.stdout, result.stderr, result.status) == (7, b"out\n", b"err\n", 7)
    chunks: List[bytes] = []
    streamed = smol.exec(linux.vm, ["sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.2; done"], on_stdout=chunks.append)
    assert streamed.ok and streamed.stdout == b""  # it went to the callback
    assert b"".join(chunks) == b"line1\nline2\nline3\n"
    assert len(chunks) >= 2  # it came as it was written, not at the end
    with smol.exec_stream(linux.vm, ["sh", "-c", "echo first; read x; echo got-$x"], stdin=True) as stream:
        seen = b""
        for _fd, chunk in stream:
            seen += chunk
            if seen == b"first\n":
                stream.write(b"typed\n")
                stream.close_stdin()
        assert seen == b"first\ngot-typed\n" and stream.result is not None and stream.result.exit_code == 0


def test_exec_with_stdin_env_workdir_and_timeout(smol: smol_studio.Smol, linux: smol_studio.Up) -> None:
    assert smol.exec(linux.vm, ["cat"], stdin=b"from-stdin").stdout == b"from-stdin"
    assert smol.exec(linux.vm, ["cat"], stdin=iter([b"a" * 70000, b"b"])).stdout == b"a" * 70000 + b"b"
    env = smol.exec(linux.vm, ["sh", "-c", "echo $WHO $(pwd)"], env={"WHO": "python"}, workdir="/tmp")
    assert env.stdout == b"python /tmp\n"
    slow = smol.exec(linux.vm, ["sleep", "30"], timeout=1)
    assert slow.timed_out and slow.status == 124
    with pytest.raises(smol_studio.BadRequest, match="no/such/program"):
        smol.exec(linux.vm, ["/no/such/program"])


def test_files_both_ways(smol: smol_studio.Smol, linux: smol_studio.Up) -> None:
    data = os.urandom(3 << 20)
    assert smol.write_file(linux.vm, "/tmp/py/blob", data, mode=0o600) == len(data)
    assert smol.read_file(linux.vm, "/tmp/py/blob") == data
    digest = smol.exec(linux.vm, ["sha256sum", "/tmp/py/blob"]).stdout.split()[0].decode()
    assert digest == hashlib.sha256(data).hexdigest()
    assert smol.exec(linux.vm, ["stat", "-c", "%a", "/tmp/py/blob"]).stdout == b"600\n"
    streamed = smol.write_file(linux.vm, "/tmp/py/streamed", (bytes([i]) * 1000 for i in range(100)))
    assert streamed == 100_000
    with pytest.raises(smol_studio.BadRequest, match="ENOENT"):
        smol.read_file(linux.vm, "/no/such/file")


def test_the_asyncio_client_runs_8_execs_at_once(smol: smol_studio.Smol, linux: smol_studio.Up) -> None:
    async def main() -> List[bytes]:
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            runs = [asmol.exec(linux.vm, ["sh", "-c", f"sleep 1; echo {i}"]) for i in range(8)]
            return [r.stdout for r in await asyncio.gather(*runs)]

    assert asyncio.run(main()) == [f"{i}\n".encode() for i in range(8)]


def test_forks_each_run_their_own_commands(smol: smol_studio.Smol, linux: smol_studio.Up) -> None:
    smol.write_file(linux.vm, "/tmp/state", b"parent")

    def attempt(child: smol_studio.Vm, i: int) -> bytes:
        smol.exec(child, ["sh", "-c", f"echo -n child{i} >> /tmp/state"])
        return smol.read_file(child, "/tmp/state")

    assert smol.fork_map(linux.vm, 4, attempt) == [f"parentchild{i}".encode() for i in range(4)]
    assert smol.read_file(linux.vm, "/tmp/state") == b"parent"


def test_run_is_a_fresh_episode_for_one_command(smol: smol_studio.Smol) -> None:
    before = len(smol.episodes())
    result = smol.run(SHELL, ["sh", "-c", "cat /work/hello.txt; exit 3"])
    assert (result.status, result.stdout) == (3, b"made by init\n")
    assert len(smol.episodes()) == before


EXAMPLES = {
    "best_of_n.py": ["attempt 3: score", "the episode goes on from sn-"],
    "gym_env.py": ["reward 1.0, terminated True", "'ls /': reward 0.0, terminated False"],
    "pooled_reset.py": ["task 5 on vm-"],
    "fork_to_verify.py": ["draft 0 ('echo 41'): fails", "draft 1 ('echo $((6 * 7))'): passes", "the episode still has: echo"],
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_the_examples_run(home: "object", smol: smol_studio.Smol, example: str) -> None:
    import subprocess
    import sys

    script = os.path.join(ROOT, "examples", "python", example)
    env = {**os.environ, "SMOL_HOME": smol.home or ""}
    run = subprocess.run([sys.executable, script, SHELL], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    for expected in EXAMPLES[example]:
        assert expected in run.stdout, run.stdout
    if example == "pooled_reset.py":
        # Every task found a clean machine: the reset between tasks took the last one's file away.
        assert run.stdout.count("found clean") == 6, run.stdout
    assert not [e for e in smol.episodes() if e.name in ("best-of-n", "gym-env", "verified") or e.name.startswith("pool-")]


def test_terminal_has_a_pts_follows_resize_takes_ctrl_c_and_returns_the_exit_status(
    smol: smol_studio.Smol, linux: smol_studio.Up
) -> None:
    with smol.terminal(linux.vm, ["sh"], rows=30, cols=100, env={"PS1": "PROMPT$ "}) as term:
        screen = b""
        steps = [
            (b"PROMPT$ ", lambda: term.write("tty; stty size\r")),
            (b"/dev/pts/", lambda: None),
            (b"30 100\r\n", lambda: term.resize(50, 132)),
            (None, lambda: term.write("stty size\r")),
            (b"50 132\r\n", lambda: None),
            (b"PROMPT$ ", lambda: term.write("sleep 100\r")),
            (b"sleep 100\r\n", lambda: (time.sleep(1.5), term.write("\x03"))),
            (b"PROMPT$ ", lambda: term.write("echo status $?\r")),
            (b"status 130\r\n", lambda: term.write("exit 3\r")),
        ]
        step = 0
        for _fd, chunk in term:
            screen += chunk
            while step < len(steps) and (steps[step][0] is None or steps[step][0] in screen):
                wanted, action = steps[step]
                if wanted is not None:
                    screen = screen[screen.index(wanted) + len(wanted) :]
                action()
                step += 1
        assert step == len(steps), f"stopped before step {step}; the terminal showed {screen!r}"
        assert term.result is not None and term.result.exit_code == 3
    with pytest.raises(ValueError, match="0 rows and 80 columns"):
        smol.terminal(linux.vm, rows=0)
    with smol.exec_stream(linux.vm, ["true"]) as plain:
        with pytest.raises(ValueError, match="no terminal"):
            plain.resize(24, 80)
        plain.wait()
