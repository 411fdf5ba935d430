"""``ImaginationConfig``: how much imagined experience the learner gets, and the controls on its bias.

Every control is a field here, read by the training loop; ``ratio: 0`` (the ``imagination=model_free``
preset) turns the whole model-based path off, so the run is the model-free one, number for number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envs.checks import check_bool, check_float, check_int
from world_model.fit_settings import FitSettings

MODES = ("policy", "value_expansion")
FIT_LOOPS = ("lightning", "plain")


def _check_number(key: str, value: Any, low: float, high: float | None = None, *, optional: bool = False) -> None:
    check_float(f"imagination.{key}", value, low, high, optional=optional)


def _check_int(key: str, value: Any, low: int, *, optional: bool = False) -> None:
    check_int(f"imagination.{key}", value, low, optional=optional)


@dataclass
class ImaginationConfig:
    ratio: float = 0.0
    """Share of each update's groups that are imagined, in [0, 1). 0: the model-free run. At a fixed
    batch the real steps per update shrink by (1 - ratio); fractional real group counts are carried
    over between iterations, so the long-run share of imagined groups is exactly ``ratio``."""
    ratio_end: float | None = None
    """If set, the ratio moves linearly from ``ratio`` (first iteration) to this over the run's
    budget: ``trainer.iterations``, or ``trainer.max_env_steps`` real steps when that ends the run
    sooner (``mixing.budget_spent``); e.g. less imagination as the real data grows. None: constant."""
    warmup_iterations: int = 0
    """Fully imagined iterations once the gate first opens (a synthetic-then-real start): no real
    rollouts in them. The world model is then fitted on the warm start's expert data alone."""
    mode: str = "policy"
    """``policy``: imagined groups enter the policy gradient (with ``imagined_weight``) and the
    critic's targets. ``value_expansion`` (model-based value expansion; needs a turn-level critic,
    ``algo=ppo_turn`` or ``fused``): the update holds real turns only, and the imagined episodes
    (the same budget) continue this iteration's real turns from the real next state, so that the
    critic's target on a real turn is its real reward plus the mean imagined return after it
    (bootstrapped where ``horizon`` cuts it); see ``imagination/value_expansion.py``."""
    imagined_weight: float = 1.0
    """Weight of imagined rows in the policy loss (real rows weigh 1)."""
    horizon: int | None = None
    """Most imagined turns after a branch point; the episode is then truncated and critic-based
    estimators bootstrap there. None: play until the model says done or the env's turn budget."""
    reward_penalty: float = 0.0
    """lambda of the uncertainty penalty: an imagined turn's reward is r - lambda * u, u the step's
    disagreement summed over its observation's tokens (``world_model.disagreement``, nats). The
    ``reward_penalty`` control uses 1 (a median u of about 0.04 on the model_based task)."""
    halt_uncertainty: float | None = None
    """Stop an imagined episode (as a truncation) once a step's uncertainty exceeds this. None: off.
    The ``halt_uncertainty`` control uses 0.25, about the 90th percentile of u on the model_based task."""
    start_share: float = 0.5
    """Share of branch points at the start of a real episode (turn 0); the rest are drawn uniformly
    over the later turns of recent real episodes that had not ended there."""
    recent_trajectories: int = 256
    """Branch points are drawn from the most recent this many real trajectories."""
    gate_threshold: float = 0.0
    """Imagination stays off until the world model's one-step exact match on the newest real data
    (scored before it is fitted on them) reaches this; it closes again when it falls below."""
    open_at_start: bool = False
    """Open the gate before the first iteration, so the first iteration already imagines its share of
    the groups (the scheduled ``ratio``, after any ``warmup_iterations``). For a run that starts from
    a saved world model (needs ``world_model.init``): while no real episode with a turn is there to
    branch from, imagined groups start at the env's training tasks' start states (seeds of the
    training split, derived from the run's seed and the iteration: ``task_start_points``), which cost
    no real step (the env is only reset); from the first real episode on, branch points are drawn
    from recent real episodes as without it. Every later score moves the gate as usual (the warm-start
    fit's too, with ``fit_on_warm_start``). The first fit waits for the first real episode."""
    fit_every: int = 1
    """Iterations between world-model refits (each on the store's newest real trajectories); unused
    when ``refit_every_steps`` is set."""
    refit_every_steps: int | None = None
    """Refit the world model once this many new real env steps (transitions) have arrived since its
    last fit, whatever the number of iterations that took (``imagination.refit.refit_due``). None:
    refit every ``fit_every`` iterations."""
    fit_steps: int = 50
    """Optimiser steps per refit."""
    first_fit_steps: int = 300
    """Optimiser steps of the first fit (the model starts from scratch)."""
    fit_trajectories: int = 2000
    """Refits train on the store's most recent this many real trajectories."""
    refit_below: float | None = None
    """Refit when the model has fallen behind rather than on the clock: after the first fit, the world
    model is refitted only at an iteration whose one-step exact match on its new real turns (the
    gate's score) is below this (``imagination.refit_rules.should_refit``); ``fit_every`` and
    ``refit_every_steps`` are then unused. ``wm/refit_skipped`` says what it decided. None: the clock."""
    fit_replay: float | None = None
    """Refit on the real trajectories collected since the last fit and a random replay of this share
    of the older ones among the newest ``fit_trajectories`` (``imagination.refit_rules.replay_rows``;
    every row when that leaves none). The weights are always continued from the last fit. None: all the
    newest ``fit_trajectories`` (1.0 trains on the same rows in the same order)."""
    fit_holdout: float | None = None
    """Stop a refit early on a held-out split of its new trajectories: this share of them (at least
    one, never all; none with fewer than two) is not trained on, its loss is read every
    ``fit_eval_every`` steps, and the refit stops after ``fit_patience`` readings without an
    improvement of more than ``fit_min_delta``, at ``fit_steps`` at most (``world_model.early_stop``).
    ``wm/fit_steps_used`` says how many it took. Needs ``fit_loop=plain``. None: ``fit_steps`` always."""
    first_fit_holdout: float | None = None
    """Stop the first fit early too, as ``fit_holdout`` stops a refit: this share of the first fit's
    trajectories (at least one, never all) is not trained on, and the fit stops after ``fit_patience``
    readings of its loss without an improvement, at ``first_fit_steps`` at most. On the warm start's
    expert episodes (``fit_on_warm_start``) the held-out share is also what the gate's first score
    reads, in place of a tenth. ``wm/fit_steps_used`` (in the loop) or the run's log (the expert fit)
    says how many steps it took. Needs ``fit_loop=plain``. None: ``first_fit_steps`` always."""
    fit_eval_every: int = 5
    """Optimiser steps between readings of the held-out loss (``fit_holdout``)."""
    fit_patience: int = 2
    """Readings of the held-out loss without an improvement before a refit stops (``fit_holdout``)."""
    fit_min_delta: float = 0.0
    """How far below its best the held-out loss must go to count as an improvement (``fit_holdout``)."""
    fit_batch_size: int = 32
    """Trajectories per world-model batch."""
    fit_lr: float = 1e-3
    """AdamW learning rate of the world model."""
    fit_loop: str = "lightning"
    """How a refit between iterations runs its steps: ``lightning`` (a Lightning ``Trainer``) or
    ``plain`` (a plain PyTorch loop, ``world_model/plain_fit.py``: the same weights bit for bit, about
    a fifth less CPU per refit; the latent world model only)."""
    fit_on_warm_start: bool = True
    """Store the warm start's expert episodes (real steps, reported apart) so the first fit uses them."""
    gap_warning: float | None = 0.25
    """Warn once (console, ``train.log``, TensorBoard) when the absolute imagined-minus-real return gap
    (``imagination/return_gap``) stays above this for ``gap_warning_iterations`` iterations in a row;
    an iteration without imagination breaks the streak. None: never. Changes no trained number."""
    gap_warning_iterations: int = 3
    """Consecutive iterations beyond ``gap_warning`` before the warning."""

    def __post_init__(self) -> None:
        _check_number("ratio", self.ratio, 0.0, 0.999)
        _check_number("ratio_end", self.ratio_end, 0.0, 0.999, optional=True)
        _check_int("warmup_iterations", self.warmup_iterations, 0)
        if self.mode not in MODES:
            raise ValueError(f"imagination.mode must be one of {MODES}, got {self.mode!r}")
        _check_number("imagined_weight", self.imagined_weight, 0.0)
        _check_int("horizon", self.horizon, 1, optional=True)
        _check_number("reward_penalty", self.reward_penalty, 0.0)
        _check_number("halt_uncertainty", self.halt_uncertainty, 0.0, optional=True)
        _check_number("start_share", self.start_share, 0.0, 1.0)
        _check_number("gate_threshold", self.gate_threshold, 0.0, 1.0)
        for key in ("recent_trajectories", "fit_every", "fit_steps", "first_fit_steps", "fit_trajectories",
                    "fit_batch_size", "fit_eval_every", "fit_patience"):
            _check_int(key, getattr(self, key), 1)
        _check_number("fit_lr", self.fit_lr, 1e-12)
        _check_int("refit_every_steps", self.refit_every_steps, 1, optional=True)
        _check_number("gap_warning", self.gap_warning, 0.0, optional=True)
        _check_int("gap_warning_iterations", self.gap_warning_iterations, 1)
        if self.fit_loop not in FIT_LOOPS:
            raise ValueError(f"imagination.fit_loop must be one of {FIT_LOOPS}, got {self.fit_loop!r}")
        check_bool("imagination.open_at_start", self.open_at_start)
        if self.open_at_start and not self.enabled:
            raise ValueError("imagination.open_at_start=true needs imagination on (imagination.ratio > 0, or "
                             "ratio_end or warmup_iterations): with imagination.ratio=0 nothing is imagined")
        self._check_refit_rules()

    def _check_refit_rules(self) -> None:
        _check_number("refit_below", self.refit_below, 0.0, 1.0, optional=True)
        _check_number("fit_replay", self.fit_replay, 0.0, 1.0, optional=True)
        _check_number("fit_min_delta", self.fit_min_delta, 0.0)
        for key in ("fit_holdout", "first_fit_holdout"):
            share = getattr(self, key)
            _check_number(key, share, 0.0, 0.9, optional=True)
            if share == 0:
                raise ValueError(f"imagination.{key} must be > 0 or null (null: no early stop), got 0")
            if share is not None and self.fit_loop != "plain":
                raise ValueError(f"imagination.{key} needs imagination.fit_loop=plain, got {self.fit_loop!r}")

    def world_model_fit(self, first_fit: bool) -> FitSettings:
        """The settings of a world-model fit in the loop: ``first_fit_steps`` for the first (the model
        starts from scratch), ``fit_steps`` for a refit; no progress bars (the loop has its own)."""
        steps = self.first_fit_steps if first_fit else self.fit_steps
        return FitSettings(steps=steps, batch_size=self.fit_batch_size, lr=self.fit_lr, progress=False)

    @property
    def enabled(self) -> bool:
        """Whether any imagination can happen in the run (the model-based path is built at all)."""
        return self.ratio > 0 or (self.ratio_end or 0) > 0 or self.warmup_iterations > 0
