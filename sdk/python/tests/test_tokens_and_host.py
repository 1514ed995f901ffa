"""Named tokens (docs/remote.md, "Tokens") and the host report (``smol doctor``'s verdict) through both clients,
against the test's own engine: a read-only token reads over a TCP listener and is refused a write with 403, the list
shows it used, and a revoked one gets 401. No guest is needed; the host report is checked against ``smol doctor``."""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import List

import pytest

import smol_studio

from conftest import kvm_kind


def test_a_read_only_token_reads_is_refused_a_write_and_once_revoked_is_refused_all(
    smol: smol_studio.Smol, echo_file: str
) -> None:
    listener = smol.listen()
    try:
        base = urllib.parse.urlsplit(listener.url)._replace(query="").geturl()
        made = smol.create_token("py-watcher", "read-only")
        assert (made.name, made.scope, made.last_used) == ("py-watcher", "read-only", None) and made.token
        assert made.token not in repr(made)  # the secret is not printed with the object
        with smol.episode_scope(echo_file) as ep:
            watcher = smol_studio.connect(url=base, token=made.token)
            assert watcher.vm(ep.vm).id == ep.vm.id  # reading is allowed
            with pytest.raises(smol_studio.Forbidden) as refused:
                watcher.checkpoint(ep.vm, name="not-allowed")
            assert refused.value.code == 403 and "read-only" in refused.value.message
            listed = {t.name: t for t in smol.tokens()}
            assert listed["py-watcher"].scope == "read-only" and listed["py-watcher"].last_used is not None
            assert not hasattr(listed["py-watcher"], "token")
            with pytest.raises(smol_studio.Forbidden):  # listing tokens needs a full token
                watcher.tokens()
            smol.remove_token("py-watcher")
            with pytest.raises(smol_studio.Unauthorized):
                watcher.vm(ep.vm)
            watcher.close()
        assert "py-watcher" not in [t.name for t in smol.tokens()]
        with pytest.raises(smol_studio.NotFound):
            smol.remove_token("py-watcher")
        with pytest.raises(smol_studio.BadRequest, match="scope"):
            smol.create_token("py-bad", "admin")

        async def through_asyncio() -> List[str]:
            async with smol_studio.connect_async(smol.home, start=False) as asmol:
                made = await asmol.create_token("py-async", "full")
                names = [t.name for t in await asmol.tokens()]
                await asmol.remove_token(made.name)
                return names

        assert "py-async" in asyncio.run(through_asyncio())
        assert "py-async" not in [t.name for t in smol.tokens()]
    finally:
        smol.unlisten(listener.port)


def test_the_host_report_is_smol_doctors_verdict(smol: smol_studio.Smol) -> None:
    report = smol.host()
    assert report.kvm_present and report.kvm_usable and report.kvm_error is None  # the tiny guests run here
    assert report.kvm_implementation == kvm_kind()
    assert report.linux_guests_message
    # PVM cannot run a Linux guest through its boot (TESTING.md); hardware KVM can.
    if report.kvm_implementation == "pvm":
        assert report.linux_guests_ok is False
    elif report.kvm_implementation == "hardware":
        assert report.linux_guests_ok is True

    async def through_asyncio() -> smol_studio.HostReport:
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            return await asmol.host()

    assert asyncio.run(through_asyncio()) == report
