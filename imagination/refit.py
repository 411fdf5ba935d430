"""Between iterations: score the world model on fresh real data, move the gate, refit on the store."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from envs.seeding import derive_seed
from envs.store import TrajectoryStore
from envs.trajectory import Trajectory
from imagination.config import ImaginationConfig
from imagination.gate import ImaginationGate
from imagination.refit_rules import holdout_count, holdout_rows, is_new, replay_rows, should_refit
from world_model.early_stop import EarlyStop
from world_model.fitting import fit_any, refit_any_on_store
from world_model.metrics import one_step_accuracy
from world_model.plain_fit import fit_plain, refit_plain_on_store
from world_model.protocol import WorldModelLike


def refit_and_gate(
    world_model: WorldModelLike, gate: ImaginationGate, store: TrajectoryStore, new_real: list[Trajectory],
    config: ImaginationConfig, iteration: int, *, first_fit: bool, fit_seed: int,
    log: Callable[[str], None], new_real_steps: int = 0, iteration_at_refit: int = 0,
    phase: Callable[[str], AbstractContextManager[None]] = lambda name: contextlib.nullcontext(),
) -> dict[str, float]:
    """Score the world model on ``new_real`` (not yet fitted on), update the gate, refit on the store.

    The first fit of a model that saw no warm-start data runs ``first_fit_steps`` (its score is
    then that of an untrained model, so the gate opens at the next iteration's score at the
    earliest); later refits run ``fit_steps`` when ``refit_due`` says so (``new_real_steps``: real env
    steps since the last fit), seeded by ``fit_seed``, on the store's newest ``fit_trajectories`` real
    episodes. ``log`` gets a line when the gate moves. ``phase(name)``: a context the scoring
    (``wm_score``) and the fit (``wm_fit``) each run in, for a caller timing them.

    The refit rules (``imagination.refit_below``, ``fit_replay``, ``fit_holdout``; all off by
    default) apply to refits, not to the first fit: ``iteration_at_refit``, the iteration of the last
    fit, tells the trajectories collected since (new) from the older ones.
    """
    metrics: dict[str, float] = {}
    exact_match = float("nan")
    if new_real:
        with phase("wm_score"):
            score = one_step_accuracy(world_model, new_real)
        metrics.update(score.as_metrics("wm/"))
        exact_match = score.exact_match
        change = gate.update(score.exact_match)
        if change:
            log(f"gate {change} at iteration {iteration}: one-step exact match {score.exact_match:.3f} "
                f"(threshold {config.gate_threshold})")
    if first_fit:
        due = True
    elif config.refit_below is not None:
        due = should_refit(exact_match, config.refit_below)
        metrics["wm/refit_skipped"] = float(not due)
    else:
        due = refit_due(config, iteration, new_real_steps)
    if due:
        with phase("wm_fit"):
            metrics.update(refit(world_model, store, config, first_fit=first_fit, fit_seed=fit_seed,
                                 iteration_at_refit=iteration_at_refit))
    return metrics


def refit(
    world_model: WorldModelLike, store: TrajectoryStore, config: ImaginationConfig, *, first_fit: bool,
    fit_seed: int, iteration_at_refit: int,
) -> dict[str, float]:
    """One fit on the store's newest ``fit_trajectories`` real episodes, with the refit rules that are
    on (``fit_replay``: which rows; ``fit_holdout``: a held-out split to stop early on). Returns the
    loop's ``wm/*`` figures of it."""
    settings = config.world_model_fit(first_fit)
    fit_on_store = refit_plain_on_store if config.fit_loop == "plain" else refit_any_on_store
    decided: dict[str, float] = {}  # what the rules chose, filled in by the fit's ``choose``
    rules = (first_fit_options(config, fit_seed, decided) if first_fit
             else refit_rule_options(config, fit_seed, iteration_at_refit, decided))
    # either loop gets the same settings, weight decay included
    fit = fit_on_store(world_model, store, steps=settings.steps, batch_size=settings.batch_size, lr=settings.lr,
                       weight_decay=settings.weight_decay, last=config.fit_trajectories, seed=fit_seed, **rules)
    metrics = {"wm/train_loss": fit.get("wm/loss", float("nan")),  # the last step's batch loss
               "wm/fit_trajectories": float(fit["trajectories"])}
    metrics.update(decided)
    if (config.first_fit_holdout if first_fit else config.fit_holdout) is not None:
        metrics["wm/fit_steps_used"] = float(fit["steps"])
        metrics["wm/fit_val_loss"] = fit.get("wm/val_loss", float("nan"))
    return metrics


def refit_rule_options(
    config: ImaginationConfig, fit_seed: int, iteration_at_refit: int, decided: dict[str, float]
) -> dict[str, Any]:
    """``refit_on_store``'s ``choose`` (and ``fit_plain``'s ``early_stop``) for the refit rules that
    are on; nothing when none is. The draws come from their own generator seeded by ``fit_seed``.
    ``choose`` writes its counts into ``decided``: ``wm/fit_new`` (new trajectories trained on),
    ``wm/fit_replayed`` (older ones), ``wm/fit_held_out``."""
    if config.fit_replay is None and config.fit_holdout is None:
        return {}
    rng = random.Random(derive_seed(fit_seed, "refit-rows"))

    def choose(window: list[Trajectory]) -> tuple[list[Trajectory], list[Trajectory]]:
        new = [is_new(t, iteration_at_refit) for t in window]
        keep = list(range(len(window))) if config.fit_replay is None else replay_rows(new, config.fit_replay, rng)
        keep = keep or list(range(len(window)))  # nothing new and no replay: the clock's refit as it was
        new_rows = [i for i in keep if new[i]]
        held = set() if config.fit_holdout is None else {
            new_rows[j] for j in holdout_rows(len(new_rows), config.fit_holdout, rng)}
        train = [i for i in keep if i not in held]
        decided.update({"wm/fit_new": float(sum(new[i] for i in train)),
                        "wm/fit_replayed": float(sum(not new[i] for i in train)), "wm/fit_held_out": float(len(held))})
        return [window[i] for i in train], [window[i] for i in sorted(held)]

    options: dict[str, Any] = {"choose": choose}
    if config.fit_holdout is not None:
        options["early_stop"] = early_stop_settings(config)
    return options


def first_fit_options(config: ImaginationConfig, fit_seed: int, decided: dict[str, float]) -> dict[str, Any]:
    """``refit_on_store``'s ``choose`` and ``early_stop`` for the first fit's early stop
    (``imagination.first_fit_holdout``): a random share of every trajectory it would train on is held
    out (nothing is "new" or "old" yet); nothing when the key is off. ``wm/fit_held_out`` says how many."""
    if config.first_fit_holdout is None:
        return {}
    rng = random.Random(derive_seed(fit_seed, "first-fit-rows"))

    def choose(window: list[Trajectory]) -> tuple[list[Trajectory], list[Trajectory]]:
        held = set(holdout_rows(len(window), config.first_fit_holdout, rng))
        decided["wm/fit_held_out"] = float(len(held))
        return [t for i, t in enumerate(window) if i not in held], [window[i] for i in sorted(held)]

    return {"choose": choose, "early_stop": early_stop_settings(config)}


def early_stop_settings(config: ImaginationConfig) -> EarlyStop:
    """How often the held-out loss is read and when a fit stops on it (``fit_eval_every`` and beside)."""
    return EarlyStop(config.fit_eval_every, config.fit_patience, config.fit_min_delta)


def fit_on_demonstrations(
    world_model: WorldModelLike, experts: list[Trajectory], config: ImaginationConfig, seed: int,
) -> tuple[list[Trajectory], dict[str, float]]:
    """The first fit on the warm start's expert episodes. Returns the episodes held out of it (the
    gate's first score reads them) and the fit's figures (``steps``: how many it took).

    Today's (``first_fit_holdout`` off): the first tenth (at least one) is held out and the fit runs
    ``first_fit_steps`` through the model kind's own fit. With ``first_fit_holdout``: the first
    ``holdout_count`` of them (that share, at least one, never all) are held out, and the plain loop
    stops on their loss (``early_stop_settings``)."""
    settings = config.world_model_fit(first_fit=True)
    if config.first_fit_holdout is None:
        held_out = experts[: max(1, len(experts) // 10)]
        return held_out, fit_any(experts[len(held_out):], [], world_model, **settings.keywords(), seed=seed)
    count = holdout_count(len(experts), config.first_fit_holdout)
    held_out = experts[:count]
    fit = fit_plain(experts[count:], held_out, world_model, max_steps=settings.steps, batch_size=settings.batch_size,
                    lr=settings.lr, weight_decay=settings.weight_decay, seed=seed,
                    early_stop=early_stop_settings(config))
    return held_out, fit


def refit_due(config: ImaginationConfig, iteration: int, new_real_steps: int) -> bool:
    """Whether the world model is refitted after ``iteration``: once ``refit_every_steps`` new real
    env steps arrived since its last fit when that is set (a high imagined ratio brings few real
    steps per iteration, and a refit on nearly the same data buys nothing), else every ``fit_every``
    iterations."""
    if config.refit_every_steps is not None:
        return new_real_steps >= config.refit_every_steps
    return iteration % config.fit_every == 0
