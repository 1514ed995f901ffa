"""Labels through the Python SDK (docs/labels.md, issue 24 item 2): set, changed and removed on a VM and on a
snapshot of a real engine with the echo guest, through both clients; what the engine refuses, and what the SDK
refuses before sending."""

from __future__ import annotations

import asyncio

import pytest

import smol_studio


def test_labels_on_a_vm_and_a_snapshot_are_set_changed_and_removed(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file) as ep:
        assert smol.vm(ep.vm).labels == {}
        vm = smol.label_vm(ep.vm, {"reward": 0.83, "task": "fix-1234"})
        assert vm.labels == {"reward": 0.83, "task": "fix-1234"}
        point = smol.checkpoint(ep.vm, name="graded")
        # A checkpoint does not take its VM's labels.
        assert point.labels == {}
        labelled = smol.label_snapshot(point, {"reward": 1, "steps": 12})
        assert labelled.labels == {"reward": 1, "steps": 12}
        # Only the keys named change; None removes one.
        assert smol.label_snapshot("graded", {"steps": None, "verdict": "pass"}).labels == {
            "reward": 1,
            "verdict": "pass",
        }
        assert smol.label_vm(ep.vm.id, {"task": None}).labels == {"reward": 0.83}
        # Read back as the engine keeps them, in the list and the snapshot list too.
        assert smol.vm(ep.vm).labels == {"reward": 0.83}
        assert [s.labels for s in smol.snapshots(ep.episode) if s.id == point.id] == [{"reward": 1, "verdict": "pass"}]
        assert [v.labels for v in smol.vms() if v.id == ep.vm.id] == [{"reward": 0.83}]


def test_a_bad_label_is_refused_naming_the_key(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file) as ep:
        # The engine's rule for keys, with the key it refused; nothing of the change is kept.
        with pytest.raises(smol_studio.BadRequest, match=r"9lives.*a label key takes letters"):
            smol.label_vm(ep.vm, {"9lives": 1, "fine": 2})
        assert smol.vm(ep.vm).labels == {}
        with pytest.raises(smol_studio.BadRequest, match="labels.long"):
            smol.label_vm(ep.vm, {"long": "x" * 257})
        # Types are checked before anything is sent.
        with pytest.raises(ValueError, match=r"labels: flag: a label is a finite number, a string or None"):
            smol.label_vm(ep.vm, {"flag": True})
        with pytest.raises(ValueError, match=r"labels: r: .*nan"):
            smol.label_vm(ep.vm, {"r": float("nan")})
        with pytest.raises(ValueError, match="a mapping"):
            smol.label_vm(ep.vm, [("reward", 1)])  # type: ignore[arg-type]


def test_the_asyncio_client_labels_too(smol: smol_studio.Smol, echo_file: str) -> None:
    with smol.episode_scope(echo_file) as ep:
        point = smol.checkpoint(ep.vm, name="async-graded")

        async def main() -> None:
            async with smol_studio.connect_async(smol.home, start=False) as client:
                vm = await client.label_vm(ep.vm, {"reward": -2.5})
                snapshot = await client.label_snapshot(point, {"reward": 0.5})
                assert (vm.labels, snapshot.labels) == ({"reward": -2.5}, {"reward": 0.5})

        asyncio.run(main())
        assert smol.snapshot(point).labels == {"reward": 0.5}
