"""What the training loop's progress bar counts: real env steps when the run has a real-step budget.

A run budgeted in real env steps (``trainer.max_env_steps``) ends when it has collected them, long
before its cap on iterations (``experiment=quick``: 1,000 iterations, about a hundred played). A bar
over iterations would then read "22/1000" with an estimate many times the run's length; a bar over
real env steps reads the budget the run is spending. Without a budget the bar counts iterations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm


@dataclass(frozen=True)
class BarPlan:
    total: int
    initial: int  # where a resumed run starts the bar
    unit: str  # tqdm's unit: "step" (real env steps) or "it" (iterations)

    @property
    def counts_steps(self) -> bool:
        return self.unit == "step"


def bar_plan(iterations: int, max_env_steps: int | None, first_iteration: int, real_env_steps: int) -> BarPlan:
    """The bar's total, start and unit: the step budget and the steps collected so far when there is a
    budget; otherwise ``iterations`` and the iterations done before ``first_iteration``."""
    if max_env_steps is not None:
        return BarPlan(total=max_env_steps, initial=min(real_env_steps, max_env_steps), unit="step")
    return BarPlan(total=iterations, initial=first_iteration - 1, unit="it")


def bar_advance(plan: BarPlan, steps_before: int, steps_after: int) -> int:
    """How far one iteration moves the bar: the real env steps it collected (any overshoot of the
    budget's last group left out, so the bar ends at its total), or one iteration."""
    if not plan.counts_steps:
        return 1
    return min(steps_after, plan.total) - min(steps_before, plan.total)


class LoopBar:
    """The loop's tqdm bar on ``bar_plan``: ``advance`` once per iteration with the run's real env steps."""

    def __init__(self, desc: str, plan: BarPlan, *, real_env_steps: int, enabled: bool) -> None:
        self.plan = plan
        self.steps = real_env_steps  # the real env steps the bar last saw
        self.bar = tqdm(desc=desc, total=plan.total, initial=plan.initial, unit=plan.unit, disable=not enabled)

    def advance(self, real_env_steps: int, **postfix: Any) -> None:
        self.bar.set_postfix(**postfix, steps=real_env_steps, refresh=False)  # drawn with the update, not before
        self.bar.update(bar_advance(self.plan, self.steps, real_env_steps))
        self.steps = real_env_steps

    def close(self) -> None:
        self.bar.close()
