"""Recorded trajectories as world-model batches: a seeded ``DataLoader`` and a held-out loss.

A dataset item is one trajectory's token rows (``WorldModelBatch`` has one row per trajectory),
tokenised once when the loader is built (``trajectory_rows``); the collate only pads them, into
the batch ``build_training_batch`` gives for the same trajectories. Only real trajectories with at
least one played turn (``num_turns > branch_turn``) carry a training signal, so ``trainable``
keeps those and the loader never builds a batch that ``build_training_batch`` would refuse. Shuffling draws from the loader's
own ``torch.Generator`` seeded with ``seed``: same seed, same batches, and the global RNG is not
touched (not even by an unshuffled loader, which would otherwise draw its iterator's base seed from it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import torch
from torch.utils.data import DataLoader, Dataset

from envs.trajectory import Trajectory
from world_model.model import WorldModel
from world_model.trajectory_rows import TrajectoryRows, collate_rows, trajectory_rows
from world_model.turn_tokens import TurnTokenizer

LOSS_PARTS = ("loss", "observation_nll", "reconstruction_nll", "reward_mse", "done_bce")


def is_trainable(trajectory: Trajectory) -> bool:
    """A real trajectory with a played turn (the rest teach the model nothing)."""
    return trajectory.source == "real" and trajectory.num_turns > trajectory.branch_turn


def trainable(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """The trainable trajectories (``is_trainable``), in order."""
    return [t for t in trajectories if is_trainable(t)]


class RowsDataset(Dataset):
    """Trainable trajectories as their token rows, tokenised once when the dataset is built."""

    def __init__(self, trajectories: Sequence[Trajectory], tokenizer: TurnTokenizer) -> None:
        self.rows = trajectory_rows(trainable(trajectories), tokenizer)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> TrajectoryRows:
        return self.rows[index]


def trajectory_loader(
    trajectories: Sequence[Trajectory],
    tokenizer: TurnTokenizer,
    *,
    batch_size: int,
    shuffle: bool = False,
    seed: int = 0,
    drop_last: bool = False,
) -> DataLoader:
    """Batches of ``batch_size`` trajectories as ``WorldModelBatch``es (single process).

    ValueError when no trajectory is trainable or ``batch_size < 1``.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    items = trainable(trajectories)
    if not items:
        raise ValueError(f"none of the {len(trajectories)} trajectories is real with a played turn")
    # Always a generator: without one, every iterator draws its base seed from the global RNG.
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        RowsDataset(items, tokenizer),
        batch_size=batch_size,
        shuffle=shuffle,
        generator=generator,
        collate_fn=partial(collate_rows, pad_id=tokenizer.pad_id),
        drop_last=drop_last and len(items) > batch_size,
        num_workers=0,
    )


@torch.no_grad()
def evaluate_loss(
    model: WorldModel, trajectories: Sequence[Trajectory], *, batch_size: int = 64
) -> dict[str, float]:
    """``model.loss`` parts on ``trajectories`` (no gradients, eval mode restored after).

    Each batch's parts are weighted by its scored turns, so the result does not depend much on how
    the trajectories were cut into batches. NaN for every part when nothing is trainable.
    """
    items = trainable(trajectories)
    if not items:
        return {part: math.nan for part in LOSS_PARTS}
    was_training = model.training
    model.eval()
    totals = dict.fromkeys(LOSS_PARTS, 0.0)
    weight = 0
    try:
        for batch in trajectory_loader(items, model.tokenizer, batch_size=batch_size):
            n = batch.num_outcomes
            parts = model.loss(batch)
            for part in LOSS_PARTS:
                totals[part] += float(parts[part]) * n
            weight += n
    finally:
        model.train(was_training)
    return {part: total / weight for part, total in totals.items()}
