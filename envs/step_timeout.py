"""A step that does not return in time is an env failure, like a step that raises.

Third-party environments can hang (a solver that never ends, a socket that never answers). With a
timeout, ``collect`` runs each ``step`` in a daemon thread and waits at most that long; a step still
running then raises :class:`EnvStepTimeout` in the caller, which ``collect``'s ``on_env_error``
handles like any other exception: the episode is dropped and reported, the others go on. Python
cannot stop a thread, so the hung step runs on in the background with its env abandoned (a daemon
thread does not keep the process alive). Without a timeout nothing changes: the step runs inline.
"""

from __future__ import annotations

import threading
from typing import Any

from envs.base import Env, StepResult


class EnvStepTimeout(TimeoutError):
    """An env's ``step`` did not return within the allowed time."""


def step_within(env: Env, action: str, timeout_s: float | None) -> StepResult:
    """``env.step(action)``, raising :class:`EnvStepTimeout` after ``timeout_s`` seconds (None: no limit)."""
    if timeout_s is None:
        return env.step(action)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = env.step(action)
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread as is
            outcome["error"] = error

    thread = threading.Thread(target=run, name=f"{env.name}-step", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise EnvStepTimeout(f"{env.name}: step({action!r}) did not return within {timeout_s} s "
                             "(trainer.env_step_timeout_s)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
