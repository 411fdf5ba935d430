"""``CounterfactualConfig``: the options of ``algo=counterfactual_gigpo`` (``algo.counterfactual.*``).

Only numbers and flags live here, next to ``AlgoConfig``; the groups themselves are imagined in
``imagination.counterfactual_*`` (the world model and the latent critic sit there). The imagined
rollouts use the run's ``imagination.reward_penalty`` and ``imagination.halt_uncertainty``, and sibling
rows that enter the policy gradient weigh ``imagination.imagined_weight``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class CounterfactualConfig:
    siblings: int = 4
    """G: alternative first actions sampled from the policy at each real state; with the real action
    they make a comparison group of G + 1."""
    horizon: int = 2
    """h: imagined turns per group member, its first (real or alternative) action included; the
    member is then valued by the latent critic (h = 1 is a one-step lookahead r + gamma * V)."""
    siblings_in_gradient: bool = False
    """False: siblings only form the baseline of the real action. True: each sibling's first action
    is also a policy-gradient row with its own step advantage (no episode term), weighted by
    ``imagination.imagined_weight``."""
    fallback_uncertainty: Optional[float] = None  # noqa: UP045 (OmegaConf structured configs want Optional)
    """Use GiGPO's exact-match step group instead at a real step whose transition the world model
    finds more uncertain than this (the ensemble's mean mutual information per token of the real
    outcome, the unit of ``imagination.halt_uncertainty``). None: never."""
    critic_fit_steps: int = 20
    """Optimiser steps per iteration of the latent critic on recent real episodes' returns."""
    critic_batch_size: int = 64
    """States per critic step."""
    critic_lr: float = 1e-3
    """AdamW learning rate of the latent critic."""
    critic_trajectories: int = 512
    """The critic fits on the most recent this many real episodes."""

    def __post_init__(self) -> None:
        for name, low in (
            ("siblings", 1),
            ("horizon", 1),
            ("critic_fit_steps", 0),
            ("critic_batch_size", 1),
            ("critic_trajectories", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"algo.counterfactual.{name} must be an integer >= {low}, got {value!r}")
        if not isinstance(self.siblings_in_gradient, bool):
            raise ValueError(
                f"algo.counterfactual.siblings_in_gradient must be true or false, got "
                f"{self.siblings_in_gradient!r}"
            )
        threshold = self.fallback_uncertainty
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not threshold >= 0
        ):
            raise ValueError(
                f"algo.counterfactual.fallback_uncertainty must be a number >= 0 or null, got {threshold!r}"
            )
        if (
            isinstance(self.critic_lr, bool)
            or not isinstance(self.critic_lr, (int, float))
            or not self.critic_lr > 0
        ):
            raise ValueError(f"algo.counterfactual.critic_lr must be a number > 0, got {self.critic_lr!r}")
