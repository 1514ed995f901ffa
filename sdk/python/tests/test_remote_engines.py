"""The remote engines an engine reaches for the app (docs/remote.md, "The app with several engines"), from Python: two
real engines, A (a data dir of its own, its engines file in the test's tmp dir) and B (the session's engine) over
TLS with a named token. B is probed and added to A with its fingerprint confirmed, each refusal named, then reached
only through A (``Smol.through``): REST, a VM's console and the event stream; a read-only token of A reads through
it and is refused writes; B's token revoked and B's listener closed are ``BadGateway`` naming B; removed, B is a
``NotFound``. The asyncio client the same, on its own name."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import urllib.parse
from typing import Iterator, List, Tuple

import pytest

import smol_studio
from smol_studio._protocol import Target
from smol_studio.client import SyncTransport

from conftest import CountingProxy, EngineHome


def _base(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@pytest.fixture()
def engine_a(tmp_path: "os.PathLike[str]", monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[smol_studio.Smol, str]]:
    """Engine A, started with ``SMOL_CLIENT_CONFIG`` in the tmp dir: the engines file it keeps B in."""
    engines = os.path.join(os.fspath(tmp_path), "engines.json")
    monkeypatch.setenv("SMOL_CLIENT_CONFIG", engines)
    home = EngineHome()
    try:
        try:
            a = smol_studio.connect(home.dir, timeout=300)
        except smol_studio.EngineUnavailable as error:
            raise RuntimeError(f"{error}\nengine.log ends:\n{home.log_tail()}") from None
        yield a, engines
        a.close()
    finally:
        home.destroy()


def test_a_remote_engine_is_added_reached_through_the_local_one_and_removed(
    smol: smol_studio.Smol, echo_file: str, engine_a: Tuple[smol_studio.Smol, str]
) -> None:
    a, engines_file = engine_a
    b_listener = smol.listen(tls=True)
    studio = smol.create_token("py-studio", "full")
    b_pid = smol.health().pid
    try:
        b_base = _base(b_listener.url)
        assert b_base.startswith("https://127.0.0.1:") and b_listener.fingerprint
        assert a.engines() == []

        # Probe: the certificate B presents, from a handshake that sends nothing.
        probe = a.probe_engine(b_base)
        assert probe == smol_studio.EngineProbe(url=b_base, fingerprint=b_listener.fingerprint, pinned=None)

        # Refused, each saying why, and nothing kept: another fingerprint, a token B does not know, the name local.
        zeros = ":".join(["00"] * 32)
        with pytest.raises(smol_studio.BadRequest) as wrong_pin:
            a.add_engine("b", b_base, studio.token, fingerprint=zeros)
        assert f"presented a certificate with SHA-256 fingerprint {b_listener.fingerprint}" in wrong_pin.value.message
        with pytest.raises(smol_studio.BadRequest) as wrong_token:
            a.add_engine("b", b_base, "smol_not-a-token-of-b", fingerprint=probe.fingerprint)
        assert wrong_token.value.reason == "EWRONGTOKEN"
        assert wrong_token.value.message == f"the engine at {b_base} refuses the token (wrong token)"
        with pytest.raises(smol_studio.BadRequest, match="local is the app"):
            a.add_engine("local", b_base, studio.token, fingerprint=probe.fingerprint)
        with pytest.raises(ValueError, match="url: expected an engine URL"):
            a.add_engine("b", "127.0.0.1:7443", studio.token)  # refused here, before anything is sent
        assert a.engines() == []

        added = a.add_engine("b", b_base, studio.token, fingerprint=probe.fingerprint)
        assert (added.name, added.url, added.fingerprint) == ("b", b_base, b_listener.fingerprint)
        assert added.version == smol.health().version
        listed = a.engines()
        assert listed == [smol_studio.RemoteEngine(name="b", url=b_base, fingerprint=added.fingerprint, added=added.added)]
        assert "token" not in repr(listed) and studio.token not in repr(listed)
        with open(engines_file, encoding="utf-8") as f:  # A kept it in the engines file of its environment
            assert b_base in f.read()
        with pytest.raises(smol_studio.Conflict, match="an engine named b exists"):
            a.add_engine("b", b_base, studio.token)
        assert a.probe_engine(b_base).pinned == b_listener.fingerprint

        # Through A: B answers (its pid, not A's), its VM's console and its events come back through A.
        b = a.through("b")
        assert b.health().pid == b_pid != a.health().pid
        with pytest.raises(ValueError, match="already goes through b"):
            b.through("c")
        with b.episode_scope(echo_file) as ep:
            assert ep.episode.id in [e.id for e in smol.episodes()]  # on B
            assert ep.episode.id not in [e.id for e in a.episodes()]  # not on A
            b.write(ep.vm, "through-a\n")
            assert b.wait_for_output(ep.vm, "through-a", timeout=30)
            with b.events() as events:
                made = b.checkpoint(ep.vm, name="via-a")
                seen = events.wait_for(
                    lambda e: isinstance(e, smol_studio.SnapshotEvent) and e.snapshot is not None and e.snapshot.id == made.id
                )
            assert isinstance(seen, smol_studio.SnapshotEvent) and seen.snapshot is not None
            assert seen.snapshot.name == "via-a" and smol.snapshot(made.id).name == "via-a"

            # A poller's conditional list through A (its relay passes If-None-Match, the ETag and the 304 on): a 304
            # on the wire between the client and A while nothing changed on B, B's label in the very next list.
            assert a.home is not None
            proxy = CountingProxy(os.path.join(a.home, "engine.sock"))
            polling = smol_studio.Smol(SyncTransport(dataclasses.replace(Target.unix(proxy.path), through="b")))
            try:
                first = polling.episodes()
                assert ep.episode.id in [e.id for e in first]
                assert polling.episodes() == first and proxy.statuses() == [200, 304]
                b.label_vm(ep.vm, {"polled": 1})
                labelled = next(e for e in polling.episodes() if e.id == ep.episode.id)
                assert labelled.vms[0].labels == {"polled": 1} and proxy.statuses() == [200, 304, 200]
            finally:
                polling.close()
                proxy.close()

            # A read-only token of A: lists and reads through A, but adds nothing and writes nothing there.
            a_listener = a.listen()
            watcher_token = a.create_token("py-watcher", "read-only")
            watcher = smol_studio.connect(url=_base(a_listener.url), token=watcher_token.token)
            try:
                assert [e.name for e in watcher.engines()] == ["b"]
                with pytest.raises(smol_studio.Forbidden):
                    watcher.add_engine("c", b_base, studio.token)
                with pytest.raises(smol_studio.Forbidden):
                    watcher.probe_engine(b_base)
                watching = watcher.through("b")
                assert watching.vm(ep.vm).id == ep.vm.id
                with pytest.raises(smol_studio.Forbidden, match="read-only"):
                    watching.checkpoint(ep.vm, name="not-allowed")
                watching.close()
            finally:
                watcher.close()
                a.unlisten(a_listener.port)

            # The asyncio client: its own name for B, reached and removed.
            async def through_asyncio() -> List[str]:
                async with smol_studio.connect_async(a.home, start=False) as asmol:
                    probed = await asmol.probe_engine(b_base)
                    await asmol.add_engine("b2", b_base, studio.token, fingerprint=probed.fingerprint)
                    names = [e.name for e in await asmol.engines()]
                    b2 = asmol.through("b2")
                    try:
                        assert (await b2.health()).pid == b_pid
                        assert (await b2.vm(ep.vm)).id == ep.vm.id
                    finally:
                        await b2.aclose()
                    await asmol.remove_engine("b2")
                    return names

            assert asyncio.run(through_asyncio()) == ["b", "b2"]
            assert [e.name for e in a.engines()] == ["b"]

        # B's token revoked there: a 502 naming B, never a 401 (which would be A's own token).
        smol.remove_token("py-studio")
        with pytest.raises(smol_studio.BadGateway) as revoked:
            b.vms()
        assert revoked.value.reason == "EREMOTETOKEN"
        assert revoked.value.message.startswith("the engine b refuses the token it was added with")

        # B's listener gone: unreachable, named, while A answers.
        smol.unlisten(b_listener.port)
        with pytest.raises(smol_studio.BadGateway) as away:
            b.vms()
        assert away.value.reason == "EUNREACHABLE"
        assert away.value.message.startswith(f"the engine b ({b_base}) is unreachable")
        assert a.health().pid != b_pid

        a.remove_engine("b")
        assert a.engines() == []
        with pytest.raises(smol_studio.NotFound, match="no engine named b"):
            b.vms()
        with pytest.raises(smol_studio.NotFound):
            a.remove_engine("b")
        b.close()
    finally:
        if "py-studio" in [t.name for t in smol.tokens()]:
            smol.remove_token("py-studio")
        try:
            smol.unlisten(b_listener.port)
        except smol_studio.ApiError:
            pass  # closed by the test already
