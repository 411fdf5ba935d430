"""Fitting the world model with Lightning: ``WorldModelModule`` and ``fit_world_model`` / ``refit_on_store``.

``WorldModelModule`` wraps a ``WorldModel``: each training and validation step is ``model.loss``
on a ``WorldModelBatch`` (``world_model.data.trajectory_loader``); it logs ``wm/loss``,
``wm/observation_nll``, ``wm/reconstruction_nll``, ``wm/reward_mse``, ``wm/done_bce`` and the
same names with ``wm/val_`` for validation (``wm/val_loss``, ...); the optimiser is AdamW.

``fit_world_model`` runs a Lightning ``Trainer`` on CPU. Determinism without side effects: the
loader shuffles from its own generator seeded with ``seed``, and the fit runs inside
``torch.random.fork_rng`` seeded with ``seed``, so the caller's global RNG is the same afterwards
and two fits with the same seed give the same weights. With a ``log_dir`` it writes TensorBoard
events to ``<log_dir>/tensorboard/version_0`` and the last checkpoint to
``<log_dir>/checkpoints/last.ckpt`` (a Lightning checkpoint, for resuming, not for sharing: the
model itself is saved with ``save_pretrained``). Without one it writes nothing, which is what
``refit_on_store`` uses between iterations of a training loop. Each call starts a fresh AdamW.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch

from envs.store import TrajectoryStore
from envs.trajectory import Trajectory
from world_model.batch import WorldModelBatch
from world_model.data import LOSS_PARTS, evaluate_loss, is_trainable, trainable, trajectory_loader
from world_model.lightning_fit import check_budget, fit_metrics, run_fit
from world_model.model import WorldModel


class WorldModelModule(L.LightningModule):
    """``WorldModel.loss`` as Lightning steps (see the module docstring)."""

    def __init__(self, model: WorldModel, *, lr: float = 1e-3, weight_decay: float = 0.0) -> None:
        super().__init__()
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
        self.model = model
        self.lr = lr
        self.weight_decay = weight_decay

    def transfer_batch_to_device(self, batch: WorldModelBatch, device: torch.device, dataloader_idx: int):
        return batch.to(device)  # a frozen dataclass: Lightning's generic mover cannot rebuild it

    def _log_parts(self, parts: dict[str, torch.Tensor], prefix: str, batch: WorldModelBatch, **kw) -> None:
        for part in LOSS_PARTS:
            self.log(f"{prefix}{part}", parts[part].detach(), batch_size=batch.num_outcomes, **kw)

    def training_step(self, batch: WorldModelBatch, batch_idx: int) -> torch.Tensor:
        parts = self.model.loss(batch)
        self._log_parts(parts, "wm/", batch, on_step=True, on_epoch=False, prog_bar=False)
        self.log("loss", parts["loss"].detach(), prog_bar=True, logger=False, batch_size=batch.num_outcomes)
        return parts["loss"]

    def validation_step(self, batch: WorldModelBatch, batch_idx: int) -> None:
        parts = self.model.loss(batch)
        self._log_parts(parts, "wm/val_", batch, on_step=False, on_epoch=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=self.weight_decay)


def fit_world_model(
    trajectories_train: Sequence[Trajectory],
    trajectories_val: Sequence[Trajectory],
    model: WorldModel,
    *,
    max_steps: int | None = None,
    max_epochs: int | None = None,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
    log_dir: str | Path | None = None,
    progress: bool = False,
    val_every_steps: int | None = None,
    score_train: bool = True,
) -> dict[str, float]:
    """Fit ``model`` in place on ``trajectories_train``; return its metrics.

    Stops after ``max_steps`` optimiser steps or ``max_epochs`` passes, whichever comes first (at
    least one must be set). ``trajectories_val`` (may be empty) is checked at the end of every epoch,
    or every ``val_every_steps`` steps, and scored before and after the fit with ``evaluate_loss``.
    Returned keys: ``val_before/<part>``, ``val_after/<part>`` (NaN without validation data),
    ``train_after/<part>`` (a loss pass over the whole training set, skipped with
    ``score_train=False``), the last logged ``wm/*`` values (``wm/loss`` of the last step,
    ``wm/val_loss`` of the last validation pass, ...), ``steps``, ``epochs``, ``fit_s``. The model
    is left in eval mode.
    """
    check_budget(max_steps, max_epochs, val_every_steps)
    train_items, val_items = trainable(trajectories_train), trainable(trajectories_val)
    metrics = {f"val_before/{k}": v for k, v in evaluate_loss(model, val_items, batch_size=batch_size).items()}
    module = WorldModelModule(model, lr=lr, weight_decay=weight_decay)
    train_loader = trajectory_loader(train_items, model.tokenizer, batch_size=batch_size, shuffle=True, seed=seed)
    val_loader = (
        trajectory_loader(val_items, model.tokenizer, batch_size=batch_size) if val_items else None
    )
    device = model.device  # the fit runs where the model lives: the trainer's accelerator in a run
    trainer, fit_s = run_fit(module, train_loader, val_loader, max_steps=max_steps, max_epochs=max_epochs,
                             seed=seed, progress=progress, val_every_steps=val_every_steps, log_dir=log_dir,
                             checkpoints=True, device=device)
    model.to(device).eval()  # Lightning moves a module it fitted on a GPU back to the CPU at teardown
    metrics.update({f"val_after/{k}": v for k, v in evaluate_loss(model, val_items, batch_size=batch_size).items()})
    if score_train:
        metrics.update(
            {f"train_after/{k}": v for k, v in evaluate_loss(model, train_items, batch_size=batch_size).items()}
        )
    metrics.update(fit_metrics(trainer, fit_s))
    return metrics


def refit_on_store(
    model: WorldModel,
    store: TrajectoryStore,
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
    last: int | None = None,
    env_name: str | None = None,
    fit: Callable[..., dict[str, float]] = fit_world_model,
    choose: Callable[[list[Trajectory]], tuple[list[Trajectory], list[Trajectory]]] | None = None,
    **fit_options: Any,
) -> dict[str, float]:
    """Fit ``model`` in place for ``steps`` steps on the real trajectories of ``store``.

    For a training loop between iterations: no validation, no logger, no checkpoint, no files, and
    no loss pass over the training set afterwards (``wm/loss`` is the last step's loss).
    ``last`` keeps only the most recent ``last`` trajectories (the store's append order);
    ``env_name`` keeps one env's. Returns ``fit_world_model``'s metrics (``train_after/*``,
    ``steps``, ...), with ``trajectories``, how many were trained on. ValueError when none is
    trainable. ``fit``: the fit function (``world_model.fitting.fit_any`` fits either model kind).
    ``choose`` (None: every selected trajectory is trained on) splits the selection into the rows to
    train on and those to hand ``fit`` as validation (``held_out`` in the metrics counts them);
    ``fit_options`` go to ``fit`` as they are.
    """
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
        raise ValueError(f"last must be an integer >= 1 or None, got {last!r}")
    if last is None:
        trajectories = trainable(store.filter(source="real", env_name=env_name))
    else:  # decodes only the newest rows, not the whole store
        trajectories = store.newest(last, source="real", env_name=env_name, where=is_trainable)
    train, held_out = (trajectories, []) if choose is None else choose(trajectories)
    metrics = fit(train, held_out, model, max_steps=steps, batch_size=batch_size, lr=lr,
                  weight_decay=weight_decay, seed=seed, score_train=False, **fit_options)
    metrics["trajectories"] = len(train)
    if choose is not None:
        metrics["held_out"] = len(held_out)
    return metrics
