"""Between iterations: score the world model on fresh real data, move the gate, refit on the store."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

from envs.store import TrajectoryStore
from envs.trajectory import Trajectory
from imagination.config import ImaginationConfig
from imagination.gate import ImaginationGate
from world_model.fitting import refit_any_on_store
from world_model.metrics import one_step_accuracy
from world_model.plain_fit import refit_plain_on_store
from world_model.protocol import WorldModelLike


def refit_and_gate(
    world_model: WorldModelLike, gate: ImaginationGate, store: TrajectoryStore, new_real: list[Trajectory],
    config: ImaginationConfig, iteration: int, *, first_fit: bool, fit_seed: int,
    log: Callable[[str], None], new_real_steps: int = 0,
    phase: Callable[[str], AbstractContextManager[None]] = lambda name: contextlib.nullcontext(),
) -> dict[str, float]:
    """Score the world model on ``new_real`` (not yet fitted on), update the gate, refit on the store.

    The first fit of a model that saw no warm-start data runs ``first_fit_steps`` (its score is
    then that of an untrained model, so the gate opens at the next iteration's score at the
    earliest); later refits run ``fit_steps`` when ``refit_due`` says so (``new_real_steps``: real env
    steps since the last fit), seeded by ``fit_seed``, on the store's newest ``fit_trajectories`` real
    episodes. ``log`` gets a line when the gate moves. ``phase(name)``: a context the scoring
    (``wm_score``) and the fit (``wm_fit``) each run in, for a caller timing them.
    """
    metrics: dict[str, float] = {}
    if new_real:
        with phase("wm_score"):
            score = one_step_accuracy(world_model, new_real)
        metrics.update(score.as_metrics("wm/"))
        change = gate.update(score.exact_match)
        if change:
            log(f"gate {change} at iteration {iteration}: one-step exact match {score.exact_match:.3f} "
                f"(threshold {config.gate_threshold})")
    if first_fit or refit_due(config, iteration, new_real_steps):
        settings = config.world_model_fit(first_fit)
        refit = refit_plain_on_store if config.fit_loop == "plain" else refit_any_on_store
        with phase("wm_fit"):  # either loop gets the same settings, weight decay included
            fit = refit(world_model, store, steps=settings.steps, batch_size=settings.batch_size, lr=settings.lr,
                        weight_decay=settings.weight_decay, last=config.fit_trajectories, seed=fit_seed)
        metrics["wm/train_loss"] = fit.get("wm/loss", float("nan"))  # the last step's batch loss
        metrics["wm/fit_trajectories"] = float(fit["trajectories"])
    return metrics


def refit_due(config: ImaginationConfig, iteration: int, new_real_steps: int) -> bool:
    """Whether the world model is refitted after ``iteration``: once ``refit_every_steps`` new real
    env steps arrived since its last fit when that is set (a high imagined ratio brings few real
    steps per iteration, and a refit on nearly the same data buys nothing), else every ``fit_every``
    iterations."""
    if config.refit_every_steps is not None:
        return new_real_steps >= config.refit_every_steps
    return iteration % config.fit_every == 0
