"""The break-even cost of a real env step: how slow the real env must be (or may be) for the
model-based run to reach the target first in wall-clock time too.

A run that needs ``n`` real steps to the target and spends ``w`` seconds of its own compute per real
step (learning, imagining, fitting: its wall time over its real steps) reaches the target after
``n * (w + c)`` seconds when one real env step costs ``c`` seconds more than the offline env it was
measured on. The model-based run (mb) is first, or level, when

    n_mb * (w_mb + c) <= n_mf * (w_mf + c)   <=>   (n_mb - n_mf) * c <= n_mf * w_mf - n_mb * w_mb.

The sign of ``n_mb - n_mf`` decides which way the inequality points, so there are four answers:

- fewer real steps, more compute in total: first once ``c >= (n_mb w_mb - n_mf w_mf) / (n_mf - n_mb)``;
- fewer real steps (or as many), no more compute in total: first whatever a real step costs;
- more real steps, less compute in total: first only while ``c <= (n_mf w_mf - n_mb w_mb) / (n_mb - n_mf)``;
- more real steps (or as many), more compute in total: never first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

AT_LEAST, AT_MOST, ALWAYS, NEVER = "at_least", "at_most", "always", "never"


@dataclass(frozen=True)
class BreakEven:
    """When the model-based run is first in wall-clock time: ``AT_LEAST`` (a real step costs
    ``seconds`` or more), ``AT_MOST`` (it costs ``seconds`` or less), ``ALWAYS`` or ``NEVER``
    (``seconds`` is None for these two)."""

    when: str
    seconds: float | None = None


def break_even_step_cost(mb_steps: float, mb_seconds_per_step: float,
                         mf_steps: float, mf_seconds_per_step: float) -> BreakEven:
    """For which cost of a real env step the model-based run reaches the target no later than the
    model-free one (see the module docstring for the four cases)."""
    for name, value in (("mb_steps", mb_steps), ("mf_steps", mf_steps),
                        ("mb_seconds_per_step", mb_seconds_per_step), ("mf_seconds_per_step", mf_seconds_per_step)):
        if not value >= 0 or math.isinf(value):
            raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    extra_compute = mb_steps * mb_seconds_per_step - mf_steps * mf_seconds_per_step  # seconds at c = 0
    saved_steps = mf_steps - mb_steps  # each real step saved pays back c seconds
    if saved_steps > 0:
        return BreakEven(ALWAYS) if extra_compute <= 0 else BreakEven(AT_LEAST, extra_compute / saved_steps)
    if saved_steps < 0:
        return BreakEven(NEVER) if extra_compute > 0 else BreakEven(AT_MOST, extra_compute / saved_steps)
    return BreakEven(ALWAYS) if extra_compute <= 0 else BreakEven(NEVER)


def format_step_cost(seconds: float) -> str:
    """``0.12 s`` or ``15 ms``."""
    return f"{seconds * 1000:.0f} ms" if seconds < 0.1 else f"{seconds:.2f} s"


def break_even_text(result: BreakEven) -> str:
    """The report's words for ``result``: whether, and for which real step costs, the model-based run is
    first in wall-clock time too."""
    if result.when == ALWAYS:
        return "first in wall-clock too, whatever a real step costs"
    if result.when == NEVER:
        return "never first in wall-clock (more compute in total, and no fewer real steps to pay it back)"
    if result.when == AT_LEAST:
        return f"first in wall-clock too once a real step costs {format_step_cost(result.seconds)} or more"
    return (f"first in wall-clock only while a real step costs {format_step_cost(result.seconds)} or less "
            "(more real steps, less compute in total)")
