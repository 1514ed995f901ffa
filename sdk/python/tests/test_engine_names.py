"""A remote engine by the name it was added under (``smol engine add NAME URL``) or named in ``$SMOL_ENGINE``, and a
URL's token from ``$SMOL_TOKEN``, as the TypeScript SDK's ``Smol.connect({ engine })`` and the CLI's ``--engine``
reach one (docs/remote.md, "Connecting"). The engine is the test's own, reached over a TCP listener it opens
(plain HTTP on 127.0.0.1: the TLS pinning has its own tests), through both clients."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse

import pytest

import smol_studio


def test_an_engine_added_by_name_or_in_smol_engine_is_the_one_reached(
    smol: smol_studio.Smol, echo_file: str, tmp_path: "os.PathLike[str]", monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = smol.listen()
    try:
        parts = urllib.parse.urlsplit(listener.url)
        base = f"{parts.scheme}://{parts.netloc}/"
        token = urllib.parse.parse_qs(parts.query)["token"][0]
        engines = os.path.join(os.fspath(tmp_path), "engines.json")
        with open(engines, "w", encoding="utf-8") as f:
            json.dump({"engines": {"here": {"url": base, "token": token, "added": "2026-12-02T00:00:00Z"}}, "pins": {}}, f)
        monkeypatch.setenv("SMOL_CLIENT_CONFIG", engines)
        monkeypatch.delenv("SMOL_ENGINE", raising=False)
        monkeypatch.delenv("SMOL_TOKEN", raising=False)
        pid = smol.health().pid

        by_name = smol_studio.connect(engine="here")
        assert by_name.transport.target.socket_path is None and by_name.transport.target.port == listener.port
        with by_name.episode_scope(echo_file) as ep:  # a whole round trip over it, not only health
            by_name.write(ep.vm, "by-name")
            by_name.wait_for_output(ep.vm, "by-name", timeout=20)
        by_name.close()
        with pytest.raises(smol_studio.Unauthorized):  # a token given wins over the engines file's
            smol_studio.connect(engine="here", token="not-the-token")
        with pytest.raises(smol_studio.EngineUnavailable, match="no engine named nowhere"):
            smol_studio.connect(engine="nowhere")

        monkeypatch.setenv("SMOL_ENGINE", "here")
        assert smol_studio.connect().health().pid == pid
        # A data dir given is that data dir's engine, whatever SMOL_ENGINE says.
        assert smol_studio.connect(smol.home, start=False).transport.target.socket_path is not None

        async def through_asyncio() -> int:
            async with smol_studio.connect_async() as asmol:
                return (await asmol.health()).pid

        assert asyncio.run(through_asyncio()) == pid
        monkeypatch.delenv("SMOL_ENGINE")

        # A URL without ?token= takes $SMOL_TOKEN.
        with pytest.raises(ValueError, match="needs a token"):
            smol_studio.connect(url=base)
        monkeypatch.setenv("SMOL_TOKEN", token)
        assert smol_studio.connect(url=base).health().pid == pid
    finally:
        smol.unlisten(listener.port)
