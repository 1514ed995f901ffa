"""Progress of ``pack`` and ``up_from`` by request id (docs/smolmachine.md): the engine tags each pack's or open's
``progress`` events with the ``requestId`` the request named, so two packs at once (or two clients) each follow only
their own, as tests/engine/smolmachine.test.ts checks for the TypeScript SDK. A real engine, the echo guest (16 MiB:
a pack reads it in several blocks, each a progress event) on this machine's /dev/kvm, through both clients."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Dict, List

import pytest

import smol_studio
from smol_studio import Progress

from conftest import EngineHome


def check_own(events: List[Progress], request: str, operation: str) -> None:
    """Only ``request``'s events of ``operation``, rising, the last at its total."""
    assert events, f"no progress events of {request}"
    assert {(e.request, e.operation) for e in events} == {(request, operation)}
    dones = [e.done for e in events]
    assert dones == sorted(dones), dones
    assert events[-1].done == events[-1].total > 0


def test_two_packs_at_once_each_see_only_their_own_progress(
    home: EngineHome, smol: smol_studio.Smol, echo_file: str
) -> None:
    files = {name: f"{home.dir}-{name}.smolmachine" for name in ("one", "two", "bad")}
    try:
        with smol.episode_scope(echo_file) as ep:
            point = smol.checkpoint(ep.vm, name="to-pack")
            seen: Dict[str, List[Progress]] = {"one": [], "two": []}
            threads: Dict[str, List[str]] = {"one": [], "two": []}
            results: Dict[str, smol_studio.Packed] = {}

            def pack(name: str, source: smol_studio.Ref) -> None:
                def took(event: Progress) -> None:
                    seen[name].append(event)
                    threads[name].append(threading.current_thread().name)

                results[name] = smol.pack(source, files[name], request_id=f"py-test-{name}", on_progress=took)

            with smol.events() as stream:  # what a third client sees: both packs, each event with its id
                workers = [
                    threading.Thread(target=pack, args=("one", point), name="pack-one"),
                    threading.Thread(target=pack, args=("two", ep.vm), name="pack-two"),  # a running VM: checkpointed first
                ]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join(timeout=120)
                assert set(results) == {"one", "two"}, "a pack did not finish"
                everyone: List[Progress] = []
                while not any(e.request == "py-test-two" and e.done == e.total for e in everyone) or not any(
                    e.request == "py-test-one" and e.done == e.total for e in everyone
                ):
                    event = stream.next(timeout=30)
                    if isinstance(event, Progress) and event.operation == "pack":
                        everyone.append(event)
            for name in ("one", "two"):
                # Every event of its own, the last (done == total) delivered before pack returned, in the calling thread.
                check_own(seen[name], f"py-test-{name}", "pack")
                assert set(threads[name]) == {f"pack-{name}"}
                assert results[name].bytes == os.path.getsize(files[name])
            assert {e.request for e in everyone} == {"py-test-one", "py-test-two"}
            assert [e for e in everyone if e.request == "py-test-one"] == seen["one"]

            # A request id the engine's rule refuses (1-64 of A-Za-z0-9._-) is its 400, naming the field; no file.
            with pytest.raises(smol_studio.BadRequest, match="requestId"):
                smol.pack(point, files["bad"], request_id="no spaces")
            refused: List[Progress] = []
            with pytest.raises(smol_studio.BadRequest, match="requestId"):  # also when following it
                smol.pack(point, files["bad"], request_id="no spaces", on_progress=refused.append)
            assert refused == [] and not os.path.exists(files["bad"])

        # Opening: its own events (operation "open") with an id the SDK made, and the episode it started.
        opened_events: List[Progress] = []
        opened = smol.up_from(files["one"], on_progress=opened_events.append)
        try:
            assert opened.vm.state == "running" and opened.vm.snapshot == results["one"].snapshot
            assert opened_events and {e.operation for e in opened_events} == {"open"}
            request = opened_events[0].request
            assert request is not None and request.startswith("py-") and {e.request for e in opened_events} == {request}
            dones = [e.done for e in opened_events]
            assert dones == sorted(dones)
        finally:
            smol.destroy(opened.episode)
    finally:
        for path in files.values():
            if os.path.exists(path):
                os.remove(path)


def test_the_asyncio_client_follows_two_packs_at_once(home: EngineHome, smol: smol_studio.Smol, echo_file: str) -> None:
    files = {name: f"{home.dir}-async-{name}.smolmachine" for name in ("a", "b")}

    async def main() -> Dict[str, List[Progress]]:
        seen: Dict[str, List[Progress]] = {"a": [], "b": []}
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            async with asmol.episode_scope(echo_file) as ep:
                point = await asmol.checkpoint(ep.vm, name="async-point")

                async def took_b(event: Progress) -> None:  # a coroutine function is awaited
                    await asyncio.sleep(0)
                    seen["b"].append(event)

                one, two = await asyncio.gather(
                    asmol.pack(point, files["a"], request_id="py-async-a", on_progress=seen["a"].append),
                    asmol.pack(ep.vm, files["b"], request_id="py-async-b", on_progress=took_b),
                )
                assert one.bytes == os.path.getsize(files["a"]) and two.bytes == os.path.getsize(files["b"])

                def fails(event: Progress) -> None:
                    raise RuntimeError("the progress bar broke")

                # The callback's error is raised once the pack is done (the file is still written).
                with pytest.raises(RuntimeError, match="the progress bar broke"):
                    await asmol.pack(point, files["a"] + ".2", on_progress=fails)
                assert os.path.exists(files["a"] + ".2")
        return seen

    try:
        seen = asyncio.run(main())
        check_own(seen["a"], "py-async-a", "pack")
        check_own(seen["b"], "py-async-b", "pack")
    finally:
        for path in [*files.values(), files["a"] + ".2"]:
            if os.path.exists(path):
                os.remove(path)
