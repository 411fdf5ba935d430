"""Recorded transcripts as warm-start data: chat JSONL (the format ``envs.chat`` exports) in,
trajectories to behaviour-clone out.

Only the agent's turns are learned: each ``assistant`` message is one action, and the ``user`` /
``tool`` messages before it are the observation and history it is conditioned on (the prompt, never
a target; see ``policy.encode``). A user's own SFT data works as long as its messages alternate
observation and action; rewards and metadata are optional.
"""

from __future__ import annotations

import os

from envs.chat import import_chat_jsonl
from envs.trajectory import Trajectory

KEY = "trainer.warm_start.transcripts"
UNKNOWN_ENV = "unknown"  # what envs.chat fills in when a line does not name its env


def transcript_trajectories(path: str | os.PathLike[str], env_name: str) -> list[Trajectory]:
    """The episodes of ``path``; a clear error naming the key when the file is missing, empty, or
    recorded on another env (a line without ``env_name`` is taken to be of this one)."""
    if not os.path.isfile(path):
        raise ValueError(f"{KEY}: no file {os.fspath(path)!r}")
    trajectories = import_chat_jsonl(path)
    if not any(t.turns for t in trajectories):
        raise ValueError(f"{KEY}: {os.fspath(path)!r} holds no agent turns to clone")
    others = sorted({t.env_name for t in trajectories} - {env_name, UNKNOWN_ENV})
    if others:
        raise ValueError(f"{KEY}: {os.fspath(path)!r} was recorded on {others}, this run's env is {env_name!r}")
    return [t for t in trajectories if t.turns]
