"""Imagined episodes that were cut off, and why the group estimators leave them out.

An imagined episode can stop before the task decided it: the world model grew too unsure
(``halt_uncertainty``), or the imagination horizon or a turn cap was reached. Such an episode is a
truncation (``Trajectory.truncated``), not a failure: nothing in it says the agent would have
failed. Its score, the rewards up to the cut, is a lower bound that a group estimator would read
as a terminal outcome and compare against the episodes that did finish, pulling the group's
baseline down and handing every finished member a spurious advantage, while the cut member gets
a spurious negative one.

GRPO, GiGPO and HGPO are critic-free by design: their baseline is the group's own Monte Carlo
returns. Two repairs exist: bootstrap the cut with a critic's value of the state where it stopped,
or leave the episode out. We leave it out. Bootstrapping would put a learned critic into an
estimator whose point is to need none, and would read that critic exactly where the world model
was most unsure (a halt happens where the ensemble disagrees), so its error would land in the
baseline of every member of the group. Left out, the episode adds nothing to the group's mean and
std nor to GiGPO's / HGPO's step groups, and its own rows get advantage 0 (the training loop also
keeps them out of the policy loss). The cost is fewer samples, and the finished episodes are those
the model was sure enough to finish, a selection the reader should know about. Critic-based
estimators (PPO's GAE) keep bootstrapping at a truncation, as everywhere.

Real episodes keep the estimators' usual rule: a real episode ends at the env's own turn budget,
which is ``done``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from envs.trajectory import Trajectory


def is_cut_imagined(trajectory: Trajectory) -> bool:
    """Whether ``trajectory`` is an imagined episode that stopped before the task decided it."""
    return trajectory.source == "imagined" and trajectory.truncated


def scored_mask(trajectories: Sequence[Trajectory], trajectory_index: Sequence[int]) -> torch.Tensor:
    """``(N,)`` bool per row (its trajectory's index): False on the rows of cut imagined episodes."""
    return torch.tensor([not is_cut_imagined(trajectories[i]) for i in trajectory_index], dtype=torch.bool)


def take_rows(rows, index: torch.Tensor):
    """The ``TurnRows`` of ``(M,)`` long ``index``, in that order (every per-row field)."""
    picked = index.tolist()
    changes = {}
    for f in dataclasses.fields(rows):
        value = getattr(rows, f.name)
        if isinstance(value, torch.Tensor):
            changes[f.name] = value[index]
        elif isinstance(value, list):
            changes[f.name] = [value[i] for i in picked]
    return dataclasses.replace(rows, **changes)


def on_scored_rows(estimate, rows, cfg) -> torch.Tensor:
    """``estimate(rows, cfg) -> (N,)`` run on the scored rows only; 0 on the others. ``(N,)``"""
    scored = getattr(rows, "scored", None)
    if scored is None or bool(scored.all()):
        return estimate(rows, cfg)
    out = torch.zeros(len(rows), dtype=torch.float32)  # (N,)
    index = scored.nonzero().squeeze(1)  # (M,)
    if index.numel():
        out[index] = estimate(take_rows(rows, index), cfg).float()
    return out
