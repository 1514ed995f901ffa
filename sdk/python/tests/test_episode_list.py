"""The episode list as a poller asks for it (docs/python-sdk.md, "Listing episodes"; docs/engine.md): each client
keeps the last list and its ETag, so a second ``episodes()`` with nothing changed is a 304 with no body, counted
here on the wire by a proxy between the client and a real engine, and equal to the first; a label, a new episode and
a checkpoint are each in the very next list; a caller changing the list it got changes neither the kept one nor the
next. The asyncio client the same."""

from __future__ import annotations

import asyncio
import collections
import os
from typing import Counter, List

import smol_studio
from smol_studio.aio import AsyncSmol, AsyncTransport
from smol_studio._protocol import Target
from smol_studio.client import SyncTransport

from conftest import CountingProxy, EngineHome


def _proxy(home: EngineHome) -> CountingProxy:
    return CountingProxy(os.path.join(home.dir, "engine.sock"))


def test_a_second_list_with_nothing_changed_is_a_304_and_every_change_is_in_the_next(
    smol: smol_studio.Smol, home: EngineHome, echo_file: str
) -> None:
    proxy = _proxy(home)
    poller = smol_studio.Smol(SyncTransport(Target.unix(proxy.path)))
    try:
        with smol.episode_scope(echo_file, name="polled") as ep:
            seen: Counter[int] = collections.Counter()

            def listed(status: int) -> List[smol_studio.Episode]:
                episodes = poller.episodes()
                seen[status] += 1
                assert collections.Counter(proxy.statuses()) == seen, f"the engine's answers were {proxy.answers()}"
                return episodes

            first = listed(200)
            second = listed(304)
            assert second == first and ep.episode.id in [e.id for e in second]
            # A 304 is its head alone: no list came over the wire.
            assert max(n for status, n in proxy.answers() if status == 304) < 1024

            # The caller's own list: changing it (the list, an episode's VM's labels) changes nothing kept.
            mine = next(e for e in second if e.id == ep.episode.id)
            mine.vms[0].labels["tampered"] = 1
            second.clear()
            third = listed(304)
            assert third == first
            assert next(e for e in third if e.id == ep.episode.id).vms[0].labels == {}

            # Each change is in the very next list (a 200), and then it is a 304 again.
            smol.label_vm(ep.vm, {"reward": 0.5})
            after_label = listed(200)
            assert next(e for e in after_label if e.id == ep.episode.id).vms[0].labels == {"reward": 0.5}
            assert listed(304) == after_label
            with smol.episode_scope(echo_file, name="polled-too") as other:
                after_up = listed(200)
                assert other.episode.id in [e.id for e in after_up]
                smol.checkpoint(ep.vm, name="polled-point")
                after_checkpoint = listed(200)
                assert next(e for e in after_checkpoint if e.id == ep.episode.id).snapshot_count == 1
                assert listed(304) == after_checkpoint
            assert other.episode.id not in [e.id for e in listed(200)]
    finally:
        poller.close()
        proxy.close()


def test_the_asyncio_client_lists_conditionally_too(smol: smol_studio.Smol, home: EngineHome, echo_file: str) -> None:
    proxy = _proxy(home)
    with smol.episode_scope(echo_file, name="polled-async") as ep:

        async def main() -> None:
            async with AsyncSmol(AsyncTransport(Target.unix(proxy.path))) as poller:
                first = await poller.episodes()
                second = await poller.episodes()
                assert second == first and proxy.statuses() == [200, 304]
                second.clear()
                assert await poller.episodes() == first
                await asyncio.get_running_loop().run_in_executor(None, lambda: smol.label_vm(ep.vm, {"r": 2}))
                changed = await poller.episodes()
                assert next(e for e in changed if e.id == ep.episode.id).vms[0].labels == {"r": 2}
                assert collections.Counter(proxy.statuses()) == {200: 2, 304: 2}

        try:
            asyncio.run(main())
        finally:
            proxy.close()
