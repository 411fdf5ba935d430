"""What one phase of the training loop did to the run's bookkeeping, as a record the loop applies.

The phases of ``experiments/train.py`` read ``LoopProgress`` but never change it: each returns a
``PhaseRecord`` (the real env steps it took, the ids it used, its ledger entries, ...) and the loop
applies it with ``LoopProgress.apply``, the one place the counters move. So the x-axis
(``charts/real_env_steps``) advances in one function, and a phase can be read, and tested, apart.
An empty record changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envs import Trajectory


@dataclass
class PhaseRecord:
    real_env_steps: int = 0
    """Real env steps taken (collection, or the real-env branches of ``real_branch_gigpo``): the x-axis."""
    groups: int = 0
    """Group ids used, counted on from ``LoopProgress.next_ids``."""
    trajectories: int = 0
    """Trajectory ids used, likewise (a failed episode's id is used too)."""
    recent: list[Trajectory] = field(default_factory=list)
    """Real episodes to add to those imagination branches from."""
    warmup_iterations: int = 0
    """Fully imagined warm-up iterations spent (``imagination.warmup_iterations``)."""
    real_credit: float | None = None
    """The fractional real group now carried over; None leaves it as it was."""
    gate_open: bool | None = None
    """The imagination gate's state after this phase; None leaves it as it was."""
    world_model_fitted: bool = False
    """The world model has been fitted (never unset)."""
    world_model_refit: bool = False
    """It was (re)fitted on the store: every real step so far, this record's included, is in its data."""
    refit_iteration: int | None = None
    """The iteration of that fit (the ledger's ``iteration_at_refit``); None leaves the ledger's entry."""
    world_model_expert_steps: int | None = None
    """The expert demonstrations' steps the world model was fitted on; None leaves the ledger's entry."""
    imagined_groups: int = 0
    """Imagined groups in this iteration's update."""
    update_groups: int = 0
    """All groups, real and imagined, in this iteration's update."""
    critic_real_steps: int = 0
    """Real steps in the critic's update (the turns of the kept real episodes)."""
    evaluations: list[int] = field(default_factory=list)
    """The env steps of each held-out evaluation this phase ran."""
    history_row: dict[str, Any] | None = None
    """A logged iteration's record, appended to the history."""
    budget_cut: dict[str, int] | None = None
    """``trainer.max_env_steps`` stopped this collection short: where (``step_budget.budget_cut_entry``)."""
    imported_steps: dict[str, int] = field(default_factory=dict)
    """The ledger's ``imported_*`` entries: the steps of the saved models the run started from."""
    final_figures: dict[str, float] = field(default_factory=dict)
    """Figures added to the last history row (the final evaluation of a run stopped early)."""
