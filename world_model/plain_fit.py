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
from world_model.data import trainable, trajectory_loader
from world_model.lightning_module import refit_on_store
from world_model.model import WorldModel


def plain_steps(
    batches: Sized, loss_of: Callable[[Any], torch.Tensor], optimizer: torch.optim.Optimizer, max_steps: int
) -> tuple[float, int, int]:
    """``max_steps`` optimiser steps, one per batch, passing over ``batches`` again and again (it must
    be iterable anew, as a DataLoader is). Returns the last step's loss, the steps and the epochs begun."""
    steps, epochs, loss = 0, 0, torch.tensor(float("nan"))
    while steps < max_steps:
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
            if steps == max_steps:
                break
        if seen == 0:
            raise ValueError("no batch to fit on")
    return float(loss.detach()), steps, epochs


def fit_plain(
    trajectories_train: Sequence[Trajectory], trajectories_val: Sequence[Trajectory], model: WorldModel, *,
    max_steps: int, batch_size: int = 32, lr: float = 1e-3, weight_decay: float = 0.0, seed: int = 0,
    score_train: bool = False,
) -> dict[str, float]:
    """``fit_world_model``'s fit for ``refit_on_store`` (no validation, no training-set score): the
    same weights after; returns ``wm/loss`` (the last step's), ``steps``, ``epochs``, ``fit_s``."""
    if type(model) is not WorldModel:
        raise ValueError(f"imagination.fit_loop=plain fits the latent world model only, got {type(model).__name__}; "
                         "set imagination.fit_loop=lightning")
    if trajectories_val or score_train:
        raise ValueError("fit_plain is the refit between iterations: no validation and no training-set score")
    loader = trajectory_loader(trainable(trajectories_train), model.tokenizer, batch_size=batch_size, shuffle=True,
                               seed=seed)
    start = time.monotonic()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        loss, steps, epochs = plain_steps(loader, lambda batch: model.loss(batch.to(model.device))["loss"], optimizer,
                                          max_steps)
    model.eval()
    return {"wm/loss": loss, "steps": steps, "epochs": epochs, "fit_s": time.monotonic() - start}


def refit_plain_on_store(model: WorldModel, store: TrajectoryStore, **options: Any) -> dict[str, float]:
    """``refit_on_store`` with ``fit_plain`` in place of the Lightning fit."""
    return refit_on_store(model, store, fit=fit_plain, **options)
