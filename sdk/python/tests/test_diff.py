"""``diff(from_ref, to_ref)`` in both clients (docs/diff.md) against a real engine with the echo guest on this
machine's /dev/kvm. Tiny guests have no disks, so every diff here has ``disks == []``: the disk side (files added,
removed and changed, text diffs) is tested by src/engine/disk-diff.test.ts and, through the TypeScript SDK and the
CLI, by tests/linux/diff.test.ts in the KVM lab. What is tested here is the console between the two points, the
points themselves, and the engine's refusals as the SDK's errors."""

from __future__ import annotations

import asyncio

import pytest

import smol_studio


def test_the_console_between_two_checkpoints_is_what_the_guest_printed_between_them(
    smol: smol_studio.Smol, echo_file: str
) -> None:
    with smol.episode_scope(echo_file) as ep:
        with smol.console(ep.vm) as console:  # attached first: each echo is seen before the next step
            smol.write(ep.vm, "before-the-first-point;")
            console.wait_for("before-the-first-point;", timeout=20)
            before = smol.checkpoint(ep.vm, name="d-before")
            smol.write(ep.vm, "between-the-points;")
            console.wait_for("between-the-points;", timeout=20)
            after = smol.checkpoint(ep.vm, name="d-after")
            smol.write(ep.vm, "after-the-last-point;")
            console.wait_for("after-the-last-point;", timeout=20)

        diff = smol.diff(before, "d-after")  # a Snapshot object or a name (or an id)
        assert isinstance(diff, smol_studio.Diff)
        assert diff.from_ == smol_studio.DiffPoint(id=before.id, name="d-before", vm=ep.vm.id)
        assert diff.to == smol_studio.DiffPoint(id=after.id, name="d-after", vm=ep.vm.id)
        assert diff.disks == []  # the echo guest has no disks (see the module's docstring)
        assert diff.console.note is None
        assert diff.console.text is not None and "between-the-points;" in diff.console.text
        assert "before-the-first-point;" not in diff.console.text
        assert "after-the-last-point;" not in diff.console.text
        assert diff.timings.export_ms >= 0 and diff.timings.read_ms >= 0

        # The other way round there is no text between them, and the note says why.
        backwards = smol.diff(after.id, before.id)
        assert backwards.console.text is None
        assert backwards.console.note is not None and "comes before" in backwards.console.note

        async def through_asyncio() -> smol_studio.Diff:
            async with smol_studio.connect_async(smol.home, start=False) as asmol:
                return await asmol.diff("d-before", after)

        same = asyncio.run(through_asyncio())
        assert (same.from_, same.to, same.disks, same.console) == (diff.from_, diff.to, diff.disks, diff.console)


def test_a_fork_and_its_parent_have_no_one_recording_between_them(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file) as ep:
        parent_point = smol.checkpoint(ep.vm, name="p-point")
        child = smol.fork(ep.vm, 1).children[0]
        smol.write(child, "only-in-the-child;")
        smol.wait_for_output(child, "only-in-the-child;", timeout=20)
        child_point = smol.checkpoint(child, name="c-point")
        diff = smol.diff(parent_point, child_point)
        assert (diff.from_.vm, diff.to.vm) == (ep.vm.id, child.id)
        assert diff.console.text is None
        assert diff.console.note is not None and "different VMs" in diff.console.note


def test_snapshots_of_two_episodes_or_an_unknown_one_are_refused_with_the_engines_message(
    smol: smol_studio.Smol, echo_file: str
) -> None:
    with smol.episode_scope(echo_file) as one, smol.episode_scope(echo_file) as two:
        a = smol.checkpoint(one.vm, name="in-one")
        b = smol.checkpoint(two.vm, name="in-two")
        with pytest.raises(smol_studio.BadRequest) as apart:
            smol.diff("in-one", "in-two")
        assert apart.value.code == 400
        assert apart.value.message == "in-one and in-two are not snapshots of one episode"
        with pytest.raises(smol_studio.BadRequest, match=f"{a.id} and {b.id} are not snapshots of one episode"):
            smol.diff(a, b)  # objects are sent by id
        with pytest.raises(smol_studio.NotFound) as unknown:
            smol.diff(a, "sn-nosuchsnap1")
        assert unknown.value.code == 404 and "sn-nosuchsnap1" in unknown.value.message

        async def unknown_through_asyncio() -> None:
            async with smol_studio.connect_async(smol.home, start=False) as asmol:
                await asmol.diff("no-such-point", b.id)

        with pytest.raises(smol_studio.NotFound, match="no-such-point"):
            asyncio.run(unknown_through_asyncio())
    with pytest.raises(TypeError, match="from_ref"):
        smol.diff("", "x")
