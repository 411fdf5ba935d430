"""Fitting the LM world model with Lightning, with the latent model's options and cadence.

A batch is ``batch_size`` trajectories, as for the latent model; each of their played turns
(``t >= branch_turn``, real trajectories only) is one row: the prompt the model would see before
that turn (first observation, the ``history_turns`` turns before it, the action) and the target
(the real next observation, then EOS), with the real reward and done for the heads.
``fit_lm_world_model`` mirrors ``world_model.lightning_module.fit_world_model``: same keywords, same
determinism (a seeded loader, the fit inside ``torch.random.fork_rng``), the metrics the loop reads.
With ``world_model.bootstrap`` each member's training losses weight the rows of each trajectory by
how often its own resample of the batch's trajectories drew it, as the latent model's do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader

from envs.trajectory import Trajectory
from world_model.data import trainable
from world_model.lightning_fit import check_budget, fit_metrics, run_fit
from world_model.lm.history import LMState
from world_model.lm.model import LMWorldModel

LM_LOSS_PARTS = ("loss", "observation_nll", "reward_mse", "done_bce")


@dataclass(frozen=True)
class LMRows:
    """Training rows of a batch of trajectories."""

    prompts: list[list[int]]
    targets: list[list[int]]
    rewards: torch.Tensor  # (R,)
    dones: torch.Tensor  # (R,)
    owners: torch.Tensor  # (R,) which of the batch's trajectories each row comes from
    trajectories: int
    """How many trajectories the rows come from (what ``world_model.bootstrap`` resamples)."""

    def __len__(self) -> int:
        return len(self.prompts)


def training_rows(model: LMWorldModel, trajectories: Sequence[Trajectory]) -> LMRows:
    """One row per played turn of ``trajectories`` (see the module docstring)."""
    firsts, histories, actions, outcomes, rewards, dones, owners = [], [], [], [], [], [], []
    for b, t in enumerate(trajectories):
        state = LMState.start([t.turns[0].observation])
        for i, turn in enumerate(t.turns):
            if i >= t.branch_turn:
                firsts.append(state.first[0])
                histories.append(state.turns[0])
                actions.append(turn.action)
                outcomes.append(turn.next_observation)
                rewards.append(turn.reward)
                dones.append(float(turn.done))
                owners.append(b)
            state = state.advance([turn.action], [turn.next_observation], model.window)
    return LMRows(model.codec.prompts(firsts, histories, actions), model.codec.targets(outcomes),
                  torch.tensor(rewards, dtype=torch.float32), torch.tensor(dones),
                  torch.tensor(owners, dtype=torch.long), len(trajectories))


def row_loader(model: LMWorldModel, trajectories: Sequence[Trajectory], *, batch_size: int,
               shuffle: bool = False, seed: int = 0) -> DataLoader:
    """Batches of ``batch_size`` trainable trajectories as ``LMRows``, shuffled from its own generator."""
    items = trainable(trajectories)
    if not items:
        raise ValueError(f"none of the {len(trajectories)} trajectories is real with a played turn")
    return DataLoader(items, batch_size=batch_size, shuffle=shuffle, generator=torch.Generator().manual_seed(seed),
                      collate_fn=partial(training_rows, model), num_workers=0)


class LMWorldModelModule(L.LightningModule):
    """``LMWorldModel.loss_on_rows`` as Lightning steps; logs ``wm/<part>`` and ``wm/val_<part>``."""

    def __init__(self, model: LMWorldModel, *, lr: float = 1e-3, weight_decay: float = 0.0) -> None:
        super().__init__()
        if not lr > 0 or not weight_decay >= 0:
            raise ValueError(f"lr must be > 0 and weight_decay >= 0, got {lr!r}, {weight_decay!r}")
        self.model, self.lr, self.weight_decay = model, lr, weight_decay

    def transfer_batch_to_device(self, batch: LMRows, device: torch.device, dataloader_idx: int) -> LMRows:
        return batch  # lists of ids; the model moves its tensors itself

    def _parts(self, batch: LMRows) -> dict[str, torch.Tensor]:
        weights = self.model.bootstrap_weights(batch.owners, batch.trajectories)  # (K, R) or None
        return self.model.loss_on_rows(batch.prompts, batch.targets, batch.rewards, batch.dones, row_weights=weights)

    def training_step(self, batch: LMRows, batch_idx: int) -> torch.Tensor:
        parts = self._parts(batch)
        for name in LM_LOSS_PARTS:
            self.log(f"wm/{name}", parts[name].detach(), batch_size=len(batch), on_step=True, on_epoch=False)
        return parts["loss"]

    def validation_step(self, batch: LMRows, batch_idx: int) -> None:
        parts = self._parts(batch)
        for name in LM_LOSS_PARTS:
            self.log(f"wm/val_{name}", parts[name].detach(), batch_size=len(batch), on_epoch=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        trained = [p for p in self.model.parameters() if p.requires_grad]
        return torch.optim.AdamW(trained, lr=self.lr, weight_decay=self.weight_decay)


@torch.no_grad()
def evaluate_lm_loss(model: LMWorldModel, trajectories: Sequence[Trajectory], *, batch_size: int = 64) -> dict[str, float]:
    """Loss parts on ``trajectories``, weighted by rows per batch; NaN when nothing is trainable."""
    if not trainable(trajectories):
        return dict.fromkeys(LM_LOSS_PARTS, math.nan)
    was_training = model.training
    model.eval()
    totals, weight = dict.fromkeys(LM_LOSS_PARTS, 0.0), 0
    for batch in row_loader(model, trajectories, batch_size=batch_size):
        parts = model.loss_on_rows(batch.prompts, batch.targets, batch.rewards, batch.dones)
        for name in LM_LOSS_PARTS:
            totals[name] += float(parts[name]) * len(batch)
        weight += len(batch)
    model.train(was_training)
    return {name: total / weight for name, total in totals.items()}


def fit_lm_world_model(trajectories_train: Sequence[Trajectory], trajectories_val: Sequence[Trajectory],
                       model: LMWorldModel, *, max_steps: int | None = None, max_epochs: int | None = None,
                       batch_size: int = 32, lr: float = 1e-3, weight_decay: float = 0.0, seed: int = 0,
                       log_dir: str | Path | None = None, progress: bool = False,
                       val_every_steps: int | None = None, score_train: bool = True) -> dict[str, float]:
    """Fit ``model`` in place; the keywords and returned keys of ``fit_world_model`` (``log_dir`` only
    sets Lightning's root folder: no checkpoint is written)."""
    check_budget(max_steps, max_epochs, val_every_steps)
    train_items, val_items = trainable(trajectories_train), trainable(trajectories_val)
    metrics = {f"val_before/{k}": v for k, v in evaluate_lm_loss(model, val_items, batch_size=batch_size).items()}
    device = model.device
    module = LMWorldModelModule(model, lr=lr, weight_decay=weight_decay)
    train_loader = row_loader(model, train_items, batch_size=batch_size, shuffle=True, seed=seed)
    val_loader = row_loader(model, val_items, batch_size=batch_size) if val_items else None
    trainer, fit_s = run_fit(module, train_loader, val_loader, max_steps=max_steps, max_epochs=max_epochs,
                             seed=seed, progress=progress, val_every_steps=val_every_steps, log_dir=log_dir,
                             checkpoints=False, device=device)
    model.to(device).eval()  # Lightning moves a module it fitted on a GPU back to the CPU at teardown
    metrics.update({f"val_after/{k}": v for k, v in evaluate_lm_loss(model, val_items, batch_size=batch_size).items()})
    if score_train:
        metrics.update({f"train_after/{k}": v for k, v in evaluate_lm_loss(model, train_items, batch_size=batch_size).items()})
    metrics.update(fit_metrics(trainer, fit_s))
    return metrics
