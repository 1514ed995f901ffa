"""Best-of-N rollout: fork the episode N ways at the decision point, let a policy attempt the task in every fork at
once, score each attempt, and continue the episode from the best one.

    python3 examples/python/best_of_n.py [SMOLFILE]      # default: smolfiles/shell.smolfile (needs the agent)
"""

from typing import Tuple

import _checkout
import smol_studio

N = 4


def main() -> None:
    smol = smol_studio.connect()
    with smol.episode_scope(_checkout.smolfile_arg(), name="best-of-n") as ep:
        # The task, set up once in the parent: every fork starts from exactly this state.
        smol.write_file(ep.vm, "/work/task.txt", "guess a number close to 73\n")

        def attempt(child: smol_studio.Vm, i: int) -> Tuple[int, str]:
            # A stand-in for a policy: each fork answers differently (seeded by its index).
            guess = smol.exec(child, ["awk", f"BEGIN {{ srand({i + 1}); print int(rand() * 100) }}"])
            answer = guess.stdout.decode().strip()
            smol.write_file(child, "/work/answer.txt", answer + "\n")
            # Keep the attempt's final state as a snapshot, so the episode can go on from it.
            snap = smol.checkpoint(child, name=f"attempt-{i}", note=f"answered {answer}")
            return -abs(int(answer) - 73), snap.id

        results = smol.fork_map(ep.vm, N, attempt)  # the forks are removed afterwards; their snapshots stay
        for i, (score, snap) in enumerate(results):
            print(f"attempt {i}: score {score} ({snap})")
        best_score, best_snap = max(results)
        restored = smol.restore(ep.vm, best_snap)
        saved = restored.saved_as.id if restored.saved_as else "nothing (it was not running)"
        print(f"the episode goes on from {best_snap} (score {best_score}); where it was is saved as {saved}")
        print("answer in the episode now:", smol.read_file(ep.vm, "/work/answer.txt").decode().strip())


if __name__ == "__main__":
    main()
