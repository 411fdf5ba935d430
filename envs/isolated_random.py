"""A private stream for Python's global ``random`` module, for third-party code that draws from it.

Some environments (TextArena's games among them) call ``random.seed(seed)`` on reset and draw
from the module-level functions. Run unguarded, they would reseed everyone else's draws and be
reseeded by them, so two envs stepped in turn would not replay. ``IsolatedRandom.active()`` routes
the module-level functions to the env's own ``random.Random`` for the duration of a call, in the
calling thread only.

Why per thread: with ``trainer.env_step_timeout_s`` a step runs in a thread of its own and may hang
past its timeout while the caller goes on drawing. Swapping the global state in and out (the first
design) would then hand the caller the env's stream, and the hung step, when it returned, would put
back a stale state over the caller's draws. Here the module-level functions (``random.random``,
``random.seed``, ``random.getstate``, ...) are replaced once, process-wide, by functions that draw
from the ``random.Random`` the current thread has made active, and from the module's own hidden
instance otherwise: outside ``active()`` every draw is exactly what it was. Code that bound a function
before the first ``IsolatedRandom`` was made (``from random import choice``) keeps drawing from the
global stream.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_GLOBAL = random._inst  # the hidden instance behind the module-level functions
_ACTIVE = threading.local()  # .rng: the stream this thread's module-level draws go to, if any
_INSTALL_LOCK = threading.Lock()


def _current() -> random.Random:
    rng = getattr(_ACTIVE, "rng", None)
    return _GLOBAL if rng is None else rng


def _routed(name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(_current(), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = getattr(random.Random, name).__doc__
    return call


def _install_routing() -> None:
    """Replace every module-level function bound to the hidden instance by its routed twin (once)."""
    with _INSTALL_LOCK:
        for name in dir(random):
            if getattr(getattr(random, name), "__self__", None) is _GLOBAL:
                setattr(random, name, _routed(name))


class IsolatedRandom:
    """The global-``random`` stream one env sees; no other thread, and no code outside ``active()``,
    sees it."""

    def __init__(self, seed: int = 0) -> None:
        _install_routing()
        self.rng = random.Random(seed)

    @contextmanager
    def active(self) -> Iterator[None]:
        """Inside, in this thread: the global ``random`` functions draw from this env's stream."""
        outer = getattr(_ACTIVE, "rng", None)
        _ACTIVE.rng = self.rng
        try:
            yield
        finally:
            _ACTIVE.rng = outer
