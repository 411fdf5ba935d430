"""Extending a run's budget: ``resume=RUN_DIR trainer.max_env_steps=N2`` continues a run to a larger budget.

A budget key (``BUDGET_KEYS``) may be raised on resume, never lowered. The extended run must end as
one launched with the larger budget would have, so it may only go on from a checkpoint that the old
budget did not shape. The old budget shapes a run in three places besides the stop rule:

- the iteration that stopped it (time or real steps) evaluated after it, off the schedule;
- the last iteration (``trainer.iterations``) always evaluates, off the schedule;
- an iteration that could reach ``trainer.max_env_steps`` plays its groups one by one
  (``experiments/step_budget.py``), which samples in other batches than playing them all at once.

So the extension goes on from the newest checkpoint before all three (``first_shaped_iteration``),
and the run folder is rewound to it as a kill-and-resume rewinds past its checkpoint; the loop keeps
that checkpoint when it writes later ones (``pinned_checkpoint``). Where a number depends on the budget
itself (``imagination.ratio_end`` spreads the ratio over it) the extension is refused.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from envs import make
from experiments.checkpoint import LoopState, checkpoint_iteration, list_checkpoints

BUDGET_KEYS = ("trainer.iterations", "trainer.max_env_steps", "trainer.time_budget_s")
SCHEDULED_OVER_BUDGET = ("trainer.iterations", "trainer.max_env_steps")  # what ``budget_spent`` reads


def budget_value(record: dict[str, Any], key: str) -> float:
    """A budget key's value in a config record; None (no such budget) is unlimited."""
    value = record
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return math.inf if value is None else float(value)


def extended_keys(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The budget keys whose value ``current`` changes from ``saved``."""
    return [key for key in BUDGET_KEYS if budget_value(saved, key) != budget_value(current, key)]


def budget_refusal(saved: dict[str, Any], current: dict[str, Any]) -> str | None:
    """Why ``current``'s budget can not continue ``saved``'s run (one line), or None if it can."""
    for key in extended_keys(saved, current):
        old, new = budget_value(saved, key), budget_value(current, key)
        if new < old:
            return f"{key} can not be lowered on resume: saved {_shown(old)}, now {_shown(new)} (a budget only extends)"
        ratio_end = current.get("imagination", {}).get("ratio_end")
        if key in SCHEDULED_OVER_BUDGET and ratio_end is not None:
            return (f"{key} can not be extended with imagination.ratio_end set: the ratio schedule is "
                    "spread over the budget")
    return None


def _shown(value: float) -> str:
    return "null" if value == math.inf else f"{value:g}"


def most_iteration_steps(run: Any) -> int:
    """The most real steps one iteration's collection may take (every group at its turn cap, every
    resampling round played): what ``real_collection.step_budget`` weighs against the steps left."""
    trainer, algo = run.trainer, run.algo
    turn_cap = trainer.max_turns if trainer.max_turns is not None else make(run.env.name, **dict(run.env.kwargs)).max_turns
    rounds = 1 + algo.max_resample_rounds if algo.dynamic_sampling else 1
    return trainer.groups_per_iteration * rounds * trainer.group_size * turn_cap


def first_shaped_iteration(history: list[dict[str, Any]], iterations: int, max_env_steps: int | None,
                           most_steps: int) -> int:
    """The first iteration the budget shaped: the last one (it evaluates), or the first that could reach
    ``max_env_steps`` from the real steps logged before it (``history``: one row per iteration, from 0)."""
    if max_env_steps is not None:
        for row in history:
            if row.get("charts/real_env_steps", math.inf) + most_steps >= max_env_steps:
                return min(row["iteration"] + 1, iterations)
    return iterations


def usable_for_extension(loop: LoopState, iterations: int, max_env_steps: int | None, most_steps: int) -> bool:
    """Whether a checkpoint's state is one the run would have reached with any larger budget."""
    return not loop.stopped and loop.iteration < first_shaped_iteration(loop.history, iterations, max_env_steps,
                                                                        most_steps)


def pinned_checkpoint(root: Path, iteration: int, stopped: bool, history: list[dict[str, Any]], run: Any) -> Path | None:
    """The checkpoint under ``root`` to keep beside the newest ones while writing ``iteration``'s:
    the newest one the budget did not shape, when ``iteration``'s is shaped (None otherwise)."""
    trainer = run.trainer
    limit = first_shaped_iteration(history, trainer.iterations, trainer.max_env_steps, most_iteration_steps(run))
    if stopped:
        limit = min(limit, iteration)
    if iteration < limit:
        return None
    earlier = [path for path in list_checkpoints(root) if checkpoint_iteration(path) < limit]
    return earlier[-1] if earlier else None
