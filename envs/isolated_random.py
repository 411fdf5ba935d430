"""A private state for Python's global ``random`` module, for third-party code that draws from it.

Some environments (TextArena's games among them) call ``random.seed(seed)`` on reset and draw
from the module-level functions. Run unguarded, they would reseed everyone else's draws and be
reseeded by them, so two envs stepped in turn would not replay. ``IsolatedRandom.active()`` swaps
the env's own state in for the duration of a call and puts the caller's back afterwards.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager


class IsolatedRandom:
    """The global-``random`` state one env sees; the rest of the process never sees it (not thread-safe)."""

    def __init__(self, seed: int = 0) -> None:
        self.state = random.Random(seed).getstate()

    @contextmanager
    def active(self) -> Iterator[None]:
        """Inside: the global ``random`` module draws from this env's state; outside, as before."""
        outer = random.getstate()
        random.setstate(self.state)
        try:
            yield
        finally:
            self.state = random.getstate()
            random.setstate(outer)
