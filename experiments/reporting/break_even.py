"""The break-even cost of a real env step: how slow the real env must be for the model-based run to
reach the target first in wall-clock time too.

A run that needs ``n`` real steps to the target and spends ``w`` seconds of its own compute per real
step (learning, imagining, fitting: its wall time over its real steps) reaches the target after
``n * (w + c)`` seconds when one real env step costs ``c`` seconds more than the offline env it was
measured on. The model-based run (fewer steps ``n_mb``, more compute ``w_mb``) is first once

    n_mb * (w_mb + c) <= n_mf * (w_mf + c)   <=>   c >= (n_mb * w_mb - n_mf * w_mf) / (n_mf - n_mb).
"""

from __future__ import annotations

import math


def break_even_step_cost(mb_steps: float, mb_seconds_per_step: float,
                         mf_steps: float, mf_seconds_per_step: float) -> float:
    """Seconds a real env step must cost for the model-based run to reach the target no later than the
    model-free one: 0 when it is already first at no step cost, ``inf`` when it needs as many real
    steps or more (then no step cost makes it first)."""
    for name, value in (("mb_steps", mb_steps), ("mf_steps", mf_steps),
                        ("mb_seconds_per_step", mb_seconds_per_step), ("mf_seconds_per_step", mf_seconds_per_step)):
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    extra_compute = mb_steps * mb_seconds_per_step - mf_steps * mf_seconds_per_step
    if extra_compute <= 0:
        return 0.0
    if mf_steps <= mb_steps:
        return math.inf
    return extra_compute / (mf_steps - mb_steps)


def format_step_cost(seconds: float) -> str:
    """``0.12 s``, ``15 ms``, or ``never`` for an infinite break-even."""
    if math.isinf(seconds):
        return "never"
    return f"{seconds * 1000:.0f} ms" if seconds < 0.1 else f"{seconds:.2f} s"
