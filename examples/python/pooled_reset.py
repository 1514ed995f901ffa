"""Pooled environments (verifiers' POOL mode), with the asyncio client: a few episodes stay up, tasks take one from
the pool, run in it, and give it back reset to the Smolfile's base, so no task pays for a boot and none sees what the
one before it left behind.

    python3 examples/python/pooled_reset.py [SMOLFILE]   # default: smolfiles/shell.smolfile (needs the agent)
"""

import asyncio
from typing import List

import _checkout
import smol_studio

POOL = 2
TASKS = 6


async def main() -> None:
    smolfile = _checkout.smolfile_arg()
    async with smol_studio.connect_async() as smol:
        ups = await asyncio.gather(*(smol.up(smolfile, name=f"pool-{i}") for i in range(POOL)))
        pool: "asyncio.Queue[str]" = asyncio.Queue()
        for up in ups:
            pool.put_nowait(up.vm.id)

        async def task(n: int) -> str:
            vm = await pool.get()
            try:
                leftover = await smol.exec(vm, ["sh", "-c", "cat /work/scratch 2>/dev/null || echo clean"])
                await smol.exec(vm, ["sh", "-c", f"echo task-{n} > /work/scratch"])
                return f"task {n} on {vm}: found {leftover.stdout.decode().strip()}"
            finally:
                await smol.reset(vm)  # back to the base before the next task gets it
                pool.put_nowait(vm)

        try:
            lines: List[str] = await asyncio.gather(*(task(n) for n in range(TASKS)))
            print("\n".join(lines))
        finally:
            await asyncio.gather(*(smol.destroy(up.episode.id) for up in ups))


if __name__ == "__main__":
    asyncio.run(main())
