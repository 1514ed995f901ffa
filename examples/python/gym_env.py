"""A Gymnasium-style environment over an episode (the same reset/step/close shape, without importing gymnasium):
an observation is the output of the last command, an action is a shell command, the reward comes from a check run
in the guest. ``reset()`` goes back to the Smolfile's base snapshot: a clean machine in the time of a restore.

    python3 examples/python/gym_env.py [SMOLFILE]        # default: smolfiles/shell.smolfile (needs the agent)
"""

from typing import Any, Dict, Optional, Tuple

import _checkout
import smol_studio


class SmolShellEnv:
    """Task: make /work/answer.txt say 42. Reward 1 when it does (and the episode ends), else 0."""

    max_steps = 8

    def __init__(self, smolfile: str, smol: Optional[smol_studio.Smol] = None) -> None:
        self.smol = smol or smol_studio.connect()
        self._up = self.smol.up(smolfile, name="gym-env")
        self.vm = self._up.vm.id
        self.steps = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[str, Dict[str, Any]]:
        vm = self.smol.reset(self.vm)  # the Smolfile's base: nothing the last episode did is left
        self.steps = 0
        observation = self.smol.exec(self.vm, ["sh", "-c", "ls /work"]).stdout.decode()
        return observation, {"vm": vm.id, "snapshot": vm.snapshot}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        self.steps += 1
        result = self.smol.exec(self.vm, ["sh", "-c", action], timeout=30)
        check = self.smol.exec(self.vm, ["sh", "-c", "test \"$(cat /work/answer.txt 2>/dev/null)\" = 42"])
        reward = 1.0 if check.ok else 0.0
        terminated = check.ok
        truncated = self.steps >= self.max_steps and not terminated
        observation = (result.stdout + result.stderr).decode(errors="replace")
        return observation, reward, terminated, truncated, {"status": result.status}

    def close(self) -> None:
        self.smol.destroy(self._up.episode.id)


def main() -> None:
    env = SmolShellEnv(_checkout.smolfile_arg())
    try:
        for episode, actions in enumerate([["echo 41 > /work/answer.txt", "echo 42 > /work/answer.txt"], ["ls /"]]):
            observation, info = env.reset(seed=episode)
            print(f"episode {episode} starts at {info['snapshot']}: /work has {observation.split()}")
            for action in actions:
                observation, reward, terminated, truncated, info = env.step(action)
                print(f"  {action!r}: reward {reward}, terminated {terminated}, truncated {truncated}")
                if terminated or truncated:
                    break
    finally:
        env.close()


if __name__ == "__main__":
    main()
