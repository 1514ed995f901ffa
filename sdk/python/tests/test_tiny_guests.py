"""Tier 2 for the Python SDK: a real engine (started by connect()), real VMs of the tiny guests (echo.elf echoes its
console, count.elf prints count=N twenty times a second) on this machine's /dev/kvm, driven through both clients."""

from __future__ import annotations

import asyncio
import os
import re
import time
import warnings
from typing import List

import pytest

import smol_studio
from smol_studio import ConsoleOutput, ConsoleScreen

from conftest import EngineHome, eventually


def first_live_count(smol: smol_studio.Smol, vm: smol_studio.Ref, timeout: float = 20.0) -> int:
    """The first whole ``count=N`` line the VM prints after this call (its screen from before is skipped)."""
    with smol.console(vm) as console:
        text = ""
        deadline = time.monotonic() + timeout
        while True:
            event = console.next(max(0.1, deadline - time.monotonic()))
            if isinstance(event, ConsoleScreen):
                continue
            if isinstance(event, ConsoleOutput):
                text += event.data.decode()
                # A whole line: one that a newline precedes and follows.
                match = re.search(r"\ncount=(\d+)\n", text)
                if match:
                    return int(match.group(1))
            if time.monotonic() > deadline:
                raise AssertionError(f"no count line within {timeout} s: {text[-200:]!r}")


def test_connect_starts_the_engine_once_and_a_second_client_shares_it(home: EngineHome, smol: smol_studio.Smol) -> None:
    health = smol.health()
    assert health.home == home.dir
    # Every operation the Python SDK calls is one the engine documents (a renamed or removed one fails here); ones the
    # engine has and the SDK does not yet are named in a warning (the SDK grows with the API).
    operations = {op["operationId"] for path in smol.openapi()["paths"].values() for op in path.values()}
    called = {
        "health", "openapi", "listEpisodes", "createEpisode", "listSmolfileExamples", "checkSmolfile", "listImages", "pullImage",
        "removeImage", "pruneImages", "getEpisode", "deleteEpisode", "listSnapshots", "listVms", "getVm", "updateVm", "removeVm",
        "checkpoint", "forkVm", "restore", "stopVm", "startVm", "pauseVm", "resumeVm", "resetVm", "memoryStats",
        "metrics", "network", "logs", "screen", "recording", "writeConsole", "getSnapshot", "updateSnapshot",
        "deleteSnapshot", "forkSnapshot", "diff", "packMachine", "openMachine", "inspectMachine", "gc", "listen", "unlisten", "shutdown", "hostReport", "listTokens", "createToken", "removeToken",
        "listEngines", "probeEngine", "addEngine", "removeEngine", "console", "events", "execStream",
    }
    assert called - operations == set(), "calls of the Python SDK the engine does not document"
    missing = operations - called - {"exec"}  # the exec POST: the SDK streams instead
    if missing:
        warnings.warn(f"engine operations without a Python SDK call yet: {', '.join(sorted(missing))}")
    again = smol_studio.connect(home.dir, start=False)
    assert again.health().pid == health.pid
    again.close()
    with pytest.raises(smol_studio.EngineUnavailable, match="no engine is running"):
        smol_studio.connect(home.dir + "-nothing", start=False)


def test_console_write_comes_back_and_shows_in_logs_and_screen(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file, name="echoes") as ep:
        assert ep.vm.state == "running" and ep.episode.name == "echoes"
        with smol.console(ep.vm) as console:
            smol.write(ep.vm, "hello-python")
            assert console.wait_for(r"hello-python", timeout=20).group(0) == "hello-python"
            console.write("typed-through-the-socket")
            console.wait_for("typed-through-the-socket", timeout=20)
        assert smol.wait_for_output(ep.vm, "hello-python", timeout=20)
        assert "hello-python" in smol.logs(ep.vm).text
        assert "typed-through-the-socket" in eventually("the screen", lambda: smol.screen(ep.vm).text or None)
        with pytest.raises(smol_studio.WaitTimeout, match="never-printed"):
            smol.wait_for_output(ep.vm, "never-printed", timeout=1)


def test_a_smolfile_as_text_is_checked_at_its_lines_and_starts_an_episode(smol: smol_studio.Smol) -> None:
    echo = next(e for e in smol.smolfiles() if e.name == "echo.smolfile")
    folder = os.path.dirname(echo.path)
    assert smol.check_smolfile(echo.text, folder) == smol_studio.SmolfileCheck(ok=True, problems=[])
    broken = smol.check_smolfile(echo.text.replace("cpus = 1", "cpuss = 1"), folder)
    line = echo.text.split("\n").index("cpus = 1") + 1
    assert not broken.ok and [(p.key, p.line) for p in broken.problems] == [("cpuss", line)]
    relative = smol.check_smolfile(echo.text)  # no folder: its relative kernel path is refused
    assert [p.key for p in relative.problems] == ["kernel"] and "relative path" in relative.problems[0].message
    up = smol.up_text(echo.text, folder, name="from-text")
    assert up.episode.name == "from-text" and up.vm.state == "running"
    smol.write(up.vm, "typed-into-text")
    assert smol.wait_for_output(up.vm, "typed-into-text", timeout=20)
    smol.destroy(up.episode)


def test_checkpoint_with_name_and_note_and_the_snapshots_flat_and_as_a_tree(
    smol: smol_studio.Smol, echo_file: str
) -> None:
    with smol.episode_scope(echo_file) as ep:
        first = smol.checkpoint(ep.vm, name="first", note="a note")
        assert (first.name, first.note, first.kind, first.vm) == ("first", "a note", "manual", ep.vm.id)
        second = smol.checkpoint(ep.vm.id, name="second")
        assert second.parent == first.id
        assert smol.vm(ep.vm).snapshot == second.id
        forked = smol.fork(ep.vm, 2)
        flat = smol.snapshots(ep.episode)
        assert [s.id for s in flat][:2] == [first.id, second.id]
        roots = smol.snapshot_tree(ep.episode)
        assert [r.snapshot.id for r in roots] == [first.id]
        assert [c.snapshot.id for c in roots[0].children] == [second.id]
        assert forked.snapshot is not None
        assert [c.snapshot.id for c in roots[0].children[0].children] == [forked.snapshot.id]
        assert {s.id for s in roots[0].walk()} == {s.id for s in flat}
        # A snapshot named by its name forks as a snapshot with from_="snapshot" (a name alone is taken as a VM's).
        by_name = smol.fork("second", 1, from_="snapshot")
        assert by_name.snapshot is None and by_name.children[0].snapshot == second.id
        with pytest.raises(smol_studio.NotFound, match="second"):
            smol.fork("second", 1)
        with pytest.raises(ValueError, match="from_"):
            smol.fork("second", 1, from_="episode")
        smol.remove_vm(by_name.children[0])
        renamed = smol.update_snapshot("second", name="renamed", note="changed")
        assert (renamed.id, renamed.name, renamed.note) == (second.id, "renamed", "changed")
        assert smol.snapshot("renamed").id == second.id
        smol.delete_snapshot(first)
        assert first.id not in [s.id for s in smol.snapshots(ep.episode)]


def test_a_fork_of_4_diverges_and_the_parent_sees_none_of_it(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file) as ep:
        smol.write(ep.vm, "before-fork")
        smol.wait_for_output(ep.vm, "before-fork", timeout=20)
        result = smol.fork(ep.vm, 4)
        assert len(result.children) == 4 and result.snapshot is not None and result.snapshot.kind == "fork"
        assert all(c.snapshot == result.snapshot.id and c.parent_vm == ep.vm.id for c in result.children)
        for i, child in enumerate(result.children):
            smol.write(child, f"only-in-{i}")
        for i, child in enumerate(result.children):
            smol.wait_for_output(child, f"only-in-{i}", timeout=20)
        for i, child in enumerate(result.children):
            text = smol.logs(child).text
            assert "before-fork" in text  # the parent's console up to the fork
            assert [m for m in re.findall(r"only-in-\d", text) if m != f"only-in-{i}"] == []
        assert "only-in-" not in smol.logs(ep.vm).text
        assert len(smol.episode(ep.episode).vms) == 5


def test_restore_rewinds_the_guest_to_the_checkpoint(smol: smol_studio.Smol, count_file: str) -> None:
    with smol.episode_scope(count_file) as ep:
        smol.wait_for_output(ep.vm, r"count=\d+", timeout=30)
        mark = smol.checkpoint(ep.vm, name="mark")
        at_mark = first_live_count(smol, ep.vm)
        later = eventually("the count to move on 40", lambda: (lambda n: n if n > at_mark + 40 else None)(first_live_count(smol, ep.vm)), 60)
        restored = smol.restore(ep.vm, "mark")
        assert restored.vm.snapshot == mark.id and restored.vm.state == "running"
        assert restored.saved_as is not None and restored.saved_as.parent == mark.id
        after = first_live_count(smol, ep.vm)
        # It counts on from the checkpoint (at or a little before the first line seen after it), not from where it was.
        assert after <= at_mark + 2 and after < later - 30, (at_mark, later, after)


def test_pack_and_up_from_go_on_counting_where_it_was(home: EngineHome, smol: smol_studio.Smol, count_file: str) -> None:
    machine = f"{home.dir}-count.smolmachine"
    with smol.episode_scope(count_file) as ep:
        before = eventually("count past 20", lambda: (lambda n: n if n > 20 else None)(first_live_count(smol, ep.vm)), 60)
        packed = smol.pack(ep.vm, machine)
        assert packed.path == machine and packed.layers == 1 and 0 < packed.memory_data < 16 << 20
        at_pack = first_live_count(smol, ep.vm)
    try:
        inspected = smol.inspect(machine)  # what the file holds, before anything is opened
        assert inspected.snapshot == packed.snapshot and inspected.layers == 1 and inspected.bytes == packed.bytes
        assert inspected.memory_bytes == 16 << 20 and inspected.cpu_missing == [] and inspected.console
        assert "count.elf" in inspected.smolfile_text and inspected.made_at
        with open(machine, "r+b") as damaged, pytest.raises(smol_studio.SmolError, match="sha256"):
            damaged.seek(100)
            byte = damaged.read(1)
            damaged.seek(100)
            damaged.write(bytes([byte[0] ^ 1]))
            damaged.flush()
            smol.inspect(machine)
        with open(machine, "r+b") as mended:
            mended.seek(100)
            mended.write(byte)
        opened = smol.up_from(machine)
        try:
            assert opened.vm.state == "running" and opened.vm.snapshot == packed.snapshot
            after = first_live_count(smol, opened.vm)
            # It goes on from the checkpoint pack took, between the counts seen before and after it.
            assert before < after <= at_pack + 2, (before, at_pack, after)
        finally:
            smol.destroy(opened.episode)
    finally:
        os.remove(machine)


def test_reset_gives_a_fresh_machine(smol: smol_studio.Smol, count_file: str) -> None:
    with smol.episode_scope(count_file) as ep:
        before = eventually("count past 30", lambda: (lambda n: n if n > 30 else None)(first_live_count(smol, ep.vm)), 60)
        vm = smol.reset(ep.vm)
        assert vm.state == "running" and vm.id == ep.vm.id
        assert first_live_count(smol, ep.vm) < before


def test_pause_resume_stop_start(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file) as ep:
        assert smol.pause(ep.vm).state == "paused"
        assert smol.resume(ep.vm).state == "running"
        assert smol.stop(ep.vm).state == "suspended"
        with pytest.raises(smol_studio.Conflict) as conflict:
            smol.write(ep.vm, "to a suspended VM")
        assert conflict.value.code == 409
        assert smol.start(ep.vm).state == "running"
        smol.write(ep.vm, "after-start")
        smol.wait_for_output(ep.vm, "after-start", timeout=20)
        assert smol.memory(ep.vm).guest_bytes == 16 << 20


def test_events_arrive_in_order(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.events() as events:
        ep = smol.up(echo_file, name="evented")
        snap = smol.checkpoint(ep.vm, name="ev-mark")
        child = smol.fork(ep.vm, 1).children[0]
        smol.remove_vm(child)
        smol.destroy(ep.episode)
        seen: List[str] = []
        want = [
            f"episode.created {ep.episode.id}",
            f"snapshot.created {snap.id}",
            f"vm.removed {child.id}",
            f"episode.deleted {ep.episode.id}",
        ]
        while not seen or seen[-1] != want[-1]:
            event = events.next(timeout=30)
            if isinstance(event, smol_studio.EpisodeEvent) and event.type == "episode.created":
                assert event.episode is not None
                seen.append(f"episode.created {event.episode.id}")
            elif isinstance(event, smol_studio.SnapshotEvent) and event.type == "snapshot.created":
                assert event.snapshot is not None
                if event.snapshot.id == snap.id:
                    seen.append(f"snapshot.created {event.snapshot.id}")
            elif isinstance(event, smol_studio.VmRemoved):
                seen.append(f"vm.removed {event.id}")
            elif isinstance(event, smol_studio.EpisodeDeleted):
                seen.append(f"episode.deleted {event.id}")
        assert [s for s in seen if s in want] == want


def test_errors_carry_the_api_code_and_message(smol: smol_studio.Smol, echo_file: str) -> None:
    with pytest.raises(smol_studio.NotFound) as missing:
        smol.vm("vm-nosuchvm23")
    assert missing.value.code == 404 and "vm-nosuchvm23" in missing.value.message
    with smol.episode_scope(echo_file) as ep:
        with pytest.raises(smol_studio.BadRequest) as bad:
            smol.fork(ep.vm, 0)
        assert bad.value.code == 400 and "count" in bad.value.message
        with pytest.raises(smol_studio.BadRequest, match="name"):
            smol.checkpoint(ep.vm, name="not a valid name!")
        with pytest.raises(smol_studio.Conflict) as running:
            smol.start(ep.vm)
        assert running.value.code == 409
        # A bare kernel has no agent: the exec stream refuses, saying so.
        with pytest.raises(smol_studio.ApiError, match="agent"):
            smol.exec(ep.vm, ["true"])
        with pytest.raises(ValueError, match="argv"):
            smol.exec(ep.vm, "ls -l")  # type: ignore[arg-type]
        with pytest.raises(smol_studio.NotFound):
            smol.wait_for_output("vm-nosuchvm23", "x", timeout=5)
    with pytest.raises(smol_studio.BadRequest, match="smolfile|Smolfile|no such|ENOENT"):
        smol.up("/no/such/file.smolfile")


def test_the_episode_scope_removes_the_episode_even_when_the_body_raises(smol: smol_studio.Smol, echo_file: str) -> None:
    made: List[str] = []
    with pytest.raises(RuntimeError, match="the harness failed"):
        with smol.episode_scope(echo_file) as ep:
            made.append(ep.episode.id)
            smol.fork(ep.vm, 2)
            raise RuntimeError("the harness failed")
    with pytest.raises(smol_studio.NotFound):
        smol.episode(made[0])
    assert made[0] not in [e.id for e in smol.episodes()]

    async def async_body() -> str:
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            try:
                async with asmol.episode_scope(echo_file) as aep:
                    raise KeyError(aep.episode.id)
            except KeyError as error:
                return str(error.args[0])
        return ""

    gone = asyncio.run(async_body())
    assert gone and gone not in [e.id for e in smol.episodes()]


def test_fork_map_runs_in_every_fork_at_once_and_removes_them(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file) as ep:
        def rollout(child: smol_studio.Vm, i: int) -> str:
            smol.write(child, f"attempt-{i}")
            return smol.wait_for_output(child, rf"attempt-{i}", timeout=30).group(0)

        results = smol.fork_map(ep.vm, 4, rollout)
        assert results == [f"attempt-{i}" for i in range(4)]
        assert [v.id for v in smol.episode(ep.episode).vms] == [ep.vm.id]

        def failing(child: smol_studio.Vm, i: int) -> int:
            if i == 1:
                raise ValueError("fork 1 failed")
            return i

        with pytest.raises(ValueError, match="fork 1 failed"):
            smol.fork_map(ep.vm, 3, failing)
        assert [v.id for v in smol.episode(ep.episode).vms] == [ep.vm.id]


def test_fork_to_verify_grades_a_copy_while_the_episode_goes_on(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file) as ep:
        smol.write(ep.vm, "final-answer-42")
        smol.wait_for_output(ep.vm, "final-answer-42", timeout=20)

        def grade(copy: smol_studio.Vm) -> bool:
            smol.write(copy, "grader-was-here")
            smol.wait_for_output(copy, "grader-was-here", timeout=30)
            return "final-answer-42" in smol.logs(copy).text

        verdict = smol.fork_verify(ep.vm, grade)
        smol.write(ep.vm, "episode-goes-on")
        smol.wait_for_output(ep.vm, "episode-goes-on", timeout=20)
        assert verdict.result(timeout=60) is True
        assert "grader-was-here" not in smol.logs(ep.vm).text
        assert [v.id for v in smol.episode(ep.episode).vms] == [ep.vm.id]


def test_the_asyncio_client_runs_8_operations_at_once(smol: smol_studio.Smol, echo_file: str) -> None:
    async def main() -> None:
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            async with asmol.episode_scope(echo_file) as ep:
                children = (await asmol.fork(ep.vm, 8)).children

                async def round_trip(i: int) -> str:
                    async with await asmol.console(children[i]) as console:
                        await asmol.write(children[i], f"async-{i}-ping")
                        return (await console.wait_for(rf"async-{i}-ping", timeout=30)).group(0)

                results = await asyncio.gather(*(round_trip(i) for i in range(8)))
                assert results == [f"async-{i}-ping" for i in range(8)]
                # 8 checkpoints at once, each answered with its own note.
                snaps = await asyncio.gather(*(asmol.checkpoint(c, note=f"n{i}") for i, c in enumerate(children)))
                assert [s.note for s in snaps] == [f"n{i}" for i in range(8)]
                assert len({s.id for s in snaps}) == 8
                async with await asmol.events() as events:
                    await asmol.remove_vm(children[0])
                    removed = await events.wait_for(lambda e: isinstance(e, smol_studio.VmRemoved), timeout=30)
                    assert isinstance(removed, smol_studio.VmRemoved) and removed.id == children[0].id

    asyncio.run(main())


def test_a_tcp_listener_with_its_token(smol: smol_studio.Smol, echo_file: str) -> None:
    listener = smol.listen()
    try:
        remote = smol_studio.connect(url=listener.url)
        assert remote.health().pid == smol.health().pid
        with remote.episode_scope(echo_file) as ep:
            remote.write(ep.vm, "over-tcp")
            remote.wait_for_output(ep.vm, "over-tcp", timeout=20)
        remote.close()
        base = listener.url.split("?")[0]
        with pytest.raises(smol_studio.Unauthorized) as refused:
            smol_studio.connect(url=base, token="not-the-token")
        assert refused.value.code == 401
    finally:
        smol.unlisten(listener.port)


def test_images_are_listed_and_an_unknown_one_is_a_404(smol: smol_studio.Smol) -> None:
    # Read-only: the guest cache is shared with the rest of the machine (pulling and pruning would change it).
    images = smol.images()
    assert all(isinstance(i, smol_studio.Image) and i.name and i.file for i in images)
    with pytest.raises(smol_studio.NotFound) as missing:
        smol.remove_image("no-such-image:v0")
    assert missing.value.code == 404 and "no-such-image:v0" in missing.value.message

    async def listed() -> int:
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            return len(await asmol.images())

    assert asyncio.run(listed()) == len(images)
