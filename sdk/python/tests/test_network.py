"""Tier 2 for the Python SDK's view of networks (docs/network.md, "Seen from the host"): a real engine, the ``net``
tiny guest (native/guests/net.c, its own virtio-net driver) sending SYNs to host.smol.internal on a port the policy
refuses; its forwards in ``vm.ports``, ``network()`` and ``vm.network.refused`` events, through both clients. Every
packet stays on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket

import pytest

import smol_studio

from conftest import EngineHome, eventually


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def net_file(home: EngineHome) -> str:
    refused, pinned = free_port(), free_port()
    return home.smolfile(
        "net",
        "\n".join(
            [
                'kernel = "@guests@/net.elf"',
                "memory = 16",
                f'cmdline = "ports={refused}"',
                "net = true",
                f'ports = ["{pinned}:8080", "22"]',
                "",
            ]
        ),
    )


def refused_port(net_file: str) -> int:
    with open(net_file, encoding="utf-8") as f:
        return int(f.read().split('ports=')[1].split('"')[0])


def test_ports_refusals_and_their_events_in_the_blocking_client(smol: smol_studio.Smol, net_file: str) -> None:
    port = refused_port(net_file)
    with smol.events() as events:
        with smol.episode_scope(net_file, name="py-net") as ep:
            vm = smol.vm(ep.vm)
            assert vm.network.enabled
            assert [p.guest for p in vm.ports] == [8080, 22]
            web, ssh = vm.ports
            assert isinstance(web, smol_studio.PortForward)
            assert web.url == f"http://127.0.0.1:{web.host}/" and ssh.url is None and ssh.host > 0
            event = events.wait_for(lambda e: isinstance(e, smol_studio.NetworkRefused) and e.vm == ep.vm.id, 30)
            assert isinstance(event, smol_studio.NetworkRefused) and event.refusal is not None
            assert (event.refusal.destination, event.refusal.port, event.refusal.protocol, event.refusal.rule) == (
                "10.0.2.2",
                port,
                "tcp",
                "host",
            )
            assert event.refused >= 1 and event.episode == ep.episode.id
            network = smol.network(ep.vm)
            assert isinstance(network, smol_studio.VmNetwork)
            assert network.enabled and network.ports == vm.ports
            assert network.refused >= 1 and network.rules["host"] == network.refused
            assert network.frames is not None and network.frames.sent > 0 and network.sockets is not None
            assert network.events[0].seq == 1 and network.events[0].port == port
            last = network.events[-1].seq
            assert all(e.seq > last for e in smol.network(ep.vm, after=last).events)
            eventually("the listing's count", lambda: smol.vm(ep.vm).network.refused >= 1 or None)
            with pytest.raises(ValueError, match="after: expected a refusal's seq"):
                smol.network(ep.vm, after=-1)


def test_network_in_the_asyncio_client_and_a_vm_without_one(
    smol: smol_studio.Smol, net_file: str, echo_file: str
) -> None:
    async def main() -> None:
        async with smol_studio.connect_async(smol.home, start=False) as asmol:
            async with asmol.episode_scope(net_file, name="py-net-async") as ep:
                async with await asmol.events() as events:
                    event = await events.wait_for(
                        lambda e: isinstance(e, smol_studio.NetworkRefused) and e.vm == ep.vm.id, timeout=30
                    )
                    assert isinstance(event, smol_studio.NetworkRefused) and event.refusal is not None
                network = await asmol.network(ep.vm)
                assert network.enabled and [p.guest for p in network.ports] == [8080, 22]
                assert network.refused >= 1 and network.events
            async with asmol.episode_scope(echo_file, name="py-no-net") as plain:
                vm = await asmol.vm(plain.vm)
                assert vm.network == smol_studio.VmNetworkSummary(enabled=False, refused=0) and vm.ports == []
                none = await asmol.network(plain.vm)
                assert not none.enabled and none.ports == [] and none.events == [] and none.frames is None

    asyncio.run(main())
