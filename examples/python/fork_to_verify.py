"""Fork to verify: grade a copy of the episode's state while the episode goes on. Each grading forks the VM at that
moment (a copy-on-write fork, in milliseconds), runs the checks in the copy, where they may break whatever they
like, and removes it; the agent's episode never stops.

    python3 examples/python/fork_to_verify.py [SMOLFILE]   # default: smolfiles/shell.smolfile (needs the agent)
"""

import concurrent.futures
from typing import List, Tuple

import _checkout
import smol_studio

GRADER = "cd /work && test -f solution.sh && sh solution.sh | grep -qx 42 && rm -rf /work"  # destructive on purpose


def main() -> None:
    smol = smol_studio.connect()
    with smol.episode_scope(_checkout.smolfile_arg(), name="verified") as ep:
        verdicts: List[Tuple[int, "concurrent.futures.Future[bool]"]] = []
        drafts = ["echo 41", "echo $((6 * 7))", "echo $((6 * 7)); echo done"]
        for step, draft in enumerate(drafts):
            # The agent's work in the episode: a new draft of its solution.
            smol.write_file(ep.vm, "/work/solution.sh", draft + "\n")
            verdicts.append((step, smol.fork_verify(ep.vm, lambda copy: smol.exec(copy, ["sh", "-c", GRADER]).ok)))
        for step, verdict in verdicts:
            print(f"draft {step} ({drafts[step]!r}): {'passes' if verdict.result() else 'fails'}")
        # The grader deleted /work in its copies only.
        print("the episode still has:", smol.read_file(ep.vm, "/work/solution.sh").decode().strip())


if __name__ == "__main__":
    main()
