"""The training loop's refit of the latent world model as a plain PyTorch loop, without Lightning.

A refit between iterations writes nothing and validates nothing, so Lightning's ``Trainer`` only
adds its per-step bookkeeping (about a fifth of a refit's CPU time on the headline's small model).
``fit_plain`` takes the same steps: the same seeded shuffling loader, a fresh AdamW, the same
``torch.manual_seed(seed)`` inside ``torch.random.fork_rng``, epochs one after another until
``max_steps``; so it leaves the same weights, bit for bit, and the same last-step ``wm/loss``
(``imagination.fit_loop=plain``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence, Sized
from typing import Any

import torch

from envs.store import TrajectoryStore
from envs.trajectory import Trajectory
from world_model.data import evaluate_loss, trainable, trajectory_loader
from world_model.early_stop import EarlyStop, early_stop
from world_model.lightning_module import refit_on_store
from world_model.model import WorldModel


def plain_steps(
    batches: Sized, loss_of: Callable[[Any], torch.Tensor], optimizer: torch.optim.Optimizer, max_steps: int,
    stop: Callable[[int], bool] | None = None,
) -> tuple[float, int, int]:
    """``max_steps`` optimiser steps, one per batch, passing over ``batches`` again and again (it must
    be iterable anew, as a DataLoader is), or fewer when ``stop(steps)``, asked after each step, says
    so. Returns the last step's loss, the steps and the epochs begun."""
    steps, epochs, loss = 0, 0, torch.tensor(float("nan"))
    stopped = False
    while steps < max_steps and not stopped:
        epochs += 1
        seen = 0
        # Take len(batches) and never ask for one more, as Lightning does: a shuffling sampler asked
        # past its end draws once more from the loader's generator, which would move the next
        # epoch's order (when the last batch is full).
        for batch in itertools.islice(batches, len(batches)):
            optimizer.zero_grad()
            loss = loss_of(batch)
            loss.backward()
            optimizer.step()
            steps, seen = steps + 1, seen + 1
            stopped = stop is not None and stop(steps)
            if steps == max_steps or stopped:
                break
        if seen == 0:
            raise ValueError("no batch to fit on")
    return float(loss.detach()), steps, epochs


def fit_plain(
    trajectories_train: Sequence[Trajectory], trajectories_val: Sequence[Trajectory], model: WorldModel, *,
    max_steps: int, batch_size: int = 32, lr: float = 1e-3, weight_decay: float = 0.0, seed: int = 0,
    score_train: bool = False, early_stop: EarlyStop | None = None,
) -> dict[str, float]:
    """``fit_world_model``'s fit for ``refit_on_store`` (no training-set score): the same weights
    after; returns ``wm/loss`` (the last step's), ``steps``, ``epochs``, ``fit_s``. Validation only
    to stop early: with ``early_stop`` the loss on ``trajectories_val`` is read before the first step
    and every ``early_stop.every`` steps, the fit stops when ``world_model.early_stop.early_stop``
    says so (the weights are those of the last step), and ``wm/val_losses`` counts the readings."""
    if type(model) is not WorldModel:
        raise ValueError(f"imagination.fit_loop=plain fits the latent world model only, got {type(model).__name__}; "
                         "set imagination.fit_loop=lightning")
    if (trajectories_val and early_stop is None) or score_train:
        raise ValueError("fit_plain is the refit between iterations: no validation (but to stop early) "
                         "and no training-set score")
    loader = trajectory_loader(trainable(trajectories_train), model.tokenizer, batch_size=batch_size, shuffle=True,
                               seed=seed)
    start = time.monotonic()
    losses: list[float] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        stop = None if early_stop is None else held_out_stop(model, trajectories_val, early_stop, losses, batch_size)
        loss, steps, epochs = plain_steps(loader, lambda batch: model.loss(batch.to(model.device))["loss"], optimizer,
                                          max_steps, stop)
    model.eval()
    metrics = {"wm/loss": loss, "steps": steps, "epochs": epochs, "fit_s": time.monotonic() - start}
    if early_stop is not None:
        metrics["wm/val_losses"] = len(losses)
        metrics["wm/val_loss"] = losses[-1] if losses else float("nan")
    return metrics


def held_out_stop(
    model: WorldModel, held_out: Sequence[Trajectory], settings: EarlyStop, losses: list[float], batch_size: int
) -> Callable[[int], bool] | None:
    """``plain_steps``'s ``stop``: reads the held-out loss into ``losses`` (now, then every
    ``settings.every`` steps) and says whether to stop. None when nothing is held out."""
    if not trainable(held_out):
        return None
    def read() -> None:
        with torch.random.fork_rng(devices=[]):  # a loader draws its base seed: the fit's draws stay as they were
            losses.append(evaluate_loss(model, held_out, batch_size=batch_size)["loss"])

    read()

    def stop(steps: int) -> bool:
        if steps % settings.every:
            return False
        read()
        return early_stop(losses, settings.patience, settings.min_delta) is not None

    return stop


def refit_plain_on_store(model: WorldModel, store: TrajectoryStore, **options: Any) -> dict[str, float]:
    """``refit_on_store`` with ``fit_plain`` in place of the Lightning fit."""
    return refit_on_store(model, store, fit=fit_plain, **options)
