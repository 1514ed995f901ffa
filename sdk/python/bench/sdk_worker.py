"""The Python half of ``smol bench sdk`` (src/bench/sdk.ts): one connected client that times the operations the bench
names, one per line on stdin, and answers each with a JSON line on stdout, so the TypeScript SDK and this one take
turns on the same engine, VM and moment.

    {"op": "console", "vm": "vm-…", "n": 3}   a console round trip: attach, type "p3q", see it echoed
    {"op": "exec", "vm": "vm-…"}              a command's round trip through the agent (``true``)
    {"op": "fork", "vm": "vm-…", "n": 8}      fork(n) until the children run (they are removed afterwards, untimed)
    {"op": "health", "vm": "vm-…"}            the API's round trip alone (GET /api/v1/health): the SDK's own cost
    → {"ms": 12.3}                            or {"error": "..."}
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import smol_studio  # noqa: E402


def main() -> int:
    smol = smol_studio.connect(sys.argv[1], start=False)
    print(json.dumps({"ready": True, "python": sys.version.split()[0]}), flush=True)
    for line in sys.stdin:
        try:
            request = json.loads(line)
            op, vm = request["op"], request["vm"]
            if op == "console":
                t0 = time.perf_counter()
                with smol.console(vm) as console:
                    smol.write(vm, f"p{request['n']}q")
                    console.wait_for(f"p{request['n']}q", timeout=60)
                ms = (time.perf_counter() - t0) * 1000
            elif op == "exec":
                t0 = time.perf_counter()
                result = smol.exec(vm, ["true"])
                ms = (time.perf_counter() - t0) * 1000
                if result.exit_code != 0:
                    raise RuntimeError(f"true exited {result.exit_code}")
            elif op == "fork":
                t0 = time.perf_counter()
                children = smol.fork(vm, int(request["n"])).children
                ms = (time.perf_counter() - t0) * 1000
                for child in children:
                    smol.remove_vm(child)
            elif op == "health":
                t0 = time.perf_counter()
                smol.health()
                ms = (time.perf_counter() - t0) * 1000
            else:
                raise ValueError(f"unknown op {op!r}")
            print(json.dumps({"ms": ms}), flush=True)
        except Exception as error:  # reported to the bench, which stops with it
            print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
    smol.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
