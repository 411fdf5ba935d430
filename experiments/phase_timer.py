"""Where an iteration's time goes: process CPU seconds and wall seconds per named phase.

The training loop wraps its phases in ``timer.phase(name)``; phases nest, and each is charged its
own (self) time only, so a parent's figure leaves out its children's and the phases of an
iteration add up to the iteration. Process CPU time (``time.process_time``: every thread of this
process) is the figure to read on a shared machine, where wall time also counts the waits for a
core. The timer only reads clocks: it draws no random number and changes nothing a run computes.
``TimedAgent`` and ``TimedWorldModel`` charge an agent's ``act`` and a world model's stepping to a
phase of their own without the code that calls them knowing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

METRIC_PREFIX = "time/phase/"


class PhaseTimer:
    """Self time per phase, CPU and wall, since the last ``reset``; clocks injectable for tests."""

    def __init__(self, cpu_clock: Callable[[], float] = time.process_time,
                 wall_clock: Callable[[], float] = time.perf_counter) -> None:
        self.cpu_clock, self.wall_clock = cpu_clock, wall_clock
        self.cpu_s: dict[str, float] = {}
        self.wall_s: dict[str, float] = {}
        self._open: list[str] = []  # the phases entered and not yet left, innermost last
        self._mark = (cpu_clock(), wall_clock())

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time inside the block to ``name``, less that of the phases nested in it."""
        self._charge()
        self._open.append(name)
        try:
            yield
        finally:
            self._charge()
            self._open.pop()

    def _charge(self) -> None:
        """The time since the last mark goes to the innermost open phase (nowhere when none is open)."""
        cpu, wall = self.cpu_clock(), self.wall_clock()
        if self._open:
            name = self._open[-1]
            self.cpu_s[name] = self.cpu_s.get(name, 0.0) + cpu - self._mark[0]
            self.wall_s[name] = self.wall_s.get(name, 0.0) + wall - self._mark[1]
        self._mark = (cpu, wall)

    def reset(self) -> None:
        """Forget the totals (phases still open go on being charged from now)."""
        self._charge()
        self.cpu_s, self.wall_s = {}, {}

    def metrics(self) -> dict[str, float]:
        """The totals so far, open phases charged up to now: ``time/phase/<name>_cpu_s`` and ``_wall_s``."""
        self._charge()
        return {**{f"{METRIC_PREFIX}{name}_cpu_s": s for name, s in self.cpu_s.items()},
                **{f"{METRIC_PREFIX}{name}_wall_s": s for name, s in self.wall_s.items()}}


class TimedAgent:
    """An agent whose ``act`` is charged to ``phase`` of ``timer``; otherwise the agent itself."""

    def __init__(self, agent: Any, timer: PhaseTimer, phase: str) -> None:
        self.agent, self.timer, self.phase_name = agent, timer, phase

    def act(self, views: Sequence[Any]) -> Sequence[Any]:
        with self.timer.phase(self.phase_name):
            return self.agent.act(views)


class TimedWorldModel:
    """A world model whose ``initial_state``, ``observe`` and ``step`` (what imagination asks of it)
    are charged to ``phase`` of ``timer``; every other attribute is the model's own."""

    def __init__(self, model: Any, timer: PhaseTimer, phase: str) -> None:
        self.model, self.timer, self.phase_name = model, timer, phase

    def __getattr__(self, name: str) -> Any:  # only reached for what this class does not define
        return getattr(self.model, name)

    def initial_state(self, *args: Any, **kwargs: Any) -> Any:
        with self.timer.phase(self.phase_name):
            return self.model.initial_state(*args, **kwargs)

    def observe(self, *args: Any, **kwargs: Any) -> Any:
        with self.timer.phase(self.phase_name):
            return self.model.observe(*args, **kwargs)

    def step(self, *args: Any, **kwargs: Any) -> Any:
        with self.timer.phase(self.phase_name):
            return self.model.step(*args, **kwargs)
