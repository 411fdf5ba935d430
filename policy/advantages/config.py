"""``AlgoConfig``: the options of the ``algo`` group (``algo.*``), with its sections ``algo.fused.*``
(``FusedConfig``, the critic-group fused advantage) and ``algo.counterfactual.*``
(``CounterfactualConfig``, step groups imagined by the world model or played in the real env).

Only the choices live here; the math is in the estimator modules beside this one
(``policy.advantages.fused`` for ``algo=fused``), and the counterfactual groups are played in
``imagination.step_groups`` (the world model and the latent critic sit there). The imagined rollouts
use the run's ``imagination.reward_penalty`` and ``imagination.halt_uncertainty``, and sibling rows
that enter the policy gradient weigh ``imagination.imagined_weight``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from envs.checks import check_bool
from policy.config import PPOConfig

FUSED_GROUP_PARENTS = ("grpo", "drgrpo", "gigpo", "hgpo")
FUSED_WEIGHTINGS = ("inverse_variance", "evpo", "fixed")


@dataclass
class FusedConfig:
    group: str = "grpo"
    """The group parent: grpo, drgrpo, gigpo or hgpo, computed exactly as ``algo=<group>`` with the same
    ``algo.*`` options (gamma, omega, mode, episode_stats, ...). The critic parent is ``ppo_turn``'s
    turn-level GAE (``algo.gamma``, ``algo.lam``, ``algo.whiten_advantages``)."""
    weighting: str = "inverse_variance"
    """How the critic's weight w is chosen (the group gets 1 - w): ``inverse_variance`` (per turn index,
    from each baseline's estimated error variance on the batch), ``evpo`` (w = 1 when the critic's
    explained variance on the batch exceeds ``evpo_threshold``, else 0) or ``fixed`` (w = critic_weight)."""
    critic_weight: float = 0.5
    """``weighting=fixed``: w in [0, 1]. 0 is the group parent exactly, 1 the critic parent exactly."""
    evpo_threshold: float = 0.0
    """``weighting=evpo``: the explained variance above which the critic's advantage is used."""

    def __post_init__(self) -> None:
        if self.group not in FUSED_GROUP_PARENTS:
            raise ValueError(f"algo.fused.group must be one of {FUSED_GROUP_PARENTS}, got {self.group!r}")
        if self.weighting not in FUSED_WEIGHTINGS:
            raise ValueError(
                f"algo.fused.weighting must be one of {FUSED_WEIGHTINGS}, got {self.weighting!r}"
            )
        if isinstance(self.critic_weight, bool) or not 0.0 <= self.critic_weight <= 1.0:
            raise ValueError(f"algo.fused.critic_weight must be in [0, 1], got {self.critic_weight!r}")
        if isinstance(self.evpo_threshold, bool) or not self.evpo_threshold <= 1.0:
            raise ValueError(
                f"algo.fused.evpo_threshold must be <= 1 (explained variance never exceeds 1), "
                f"got {self.evpo_threshold!r}"
            )


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
    finds more uncertain than this (the ensemble's mutual information on the real outcome's tokens,
    pooled by ``world_model.disagreement``, by default their sum: the unit of
    ``imagination.halt_uncertainty``). None: never."""
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
        check_bool("algo.counterfactual.siblings_in_gradient", self.siblings_in_gradient)
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


ALGORITHMS = ("ppo_token", "ppo_turn", "sppo", "grpo", "drgrpo", "gigpo", "hgpo", "counterfactual_gigpo",
              "real_branch_gigpo", "fused")
VALUE_LEVEL = {"ppo_token": "token", "ppo_turn": "turn", "sppo": "sequence", "fused": "turn"}  # the critic-based ones


@dataclass
class AlgoConfig:
    name: str = "gigpo"
    """One of ppo_token, ppo_turn, sppo, grpo, drgrpo, gigpo, hgpo, counterfactual_gigpo, real_branch_gigpo, fused."""
    gamma: float = 0.95
    """Discount: of step returns (GiGPO/HGPO) or of GAE (PPO)."""
    lam: float = 1.0
    """GAE lambda (PPO only)."""
    whiten_advantages: bool = True
    """PPO only: whiten advantages over the batch's action tokens (verl's GAE default)."""
    norm_by_std: bool = True
    """GRPO: divide by the group std (False is Dr. GRPO)."""
    episode_stats: str = "rows"
    """Group statistics over step rows (verl-agent default; longer episodes weigh more) or 'trajectories'."""
    omega: float = 1.0
    """GiGPO: weight of the step advantage."""
    mode: str = "mean_std_norm"
    """GiGPO/HGPO: 'mean_std_norm' or 'mean_norm'."""
    history_levels: int = 2
    """HGPO: K, the deepest history context is K + 1 anchors."""
    alpha: float = 1.0
    """HGPO: level weight exponent, (k + 1) ** alpha."""
    base_group: bool = False
    """HGPO: add the episode-level group as level 0."""
    invalid_action_penalty: float = 0.1
    """Subtracted from the reward of every turn whose action did not parse (verl-agent's format
    penalty): without it a malformed action costs only a lost turn, too weak a signal to unlearn."""
    dynamic_sampling: bool = False
    """Drop groups whose env returns are all equal and resample (bounded by max_resample_rounds). The
    decision uses the env's returns, as DAPO does, not the invalid-action-shaped scores."""
    max_resample_rounds: int = 3
    """Dynamic sampling: the most extra collection rounds per iteration."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """The clipped-update settings shared by every algorithm."""
    fused: FusedConfig = field(default_factory=FusedConfig)
    """fused: the group parent and how the critic's weight is chosen (``policy.advantages.config``)."""
    counterfactual: CounterfactualConfig = field(default_factory=CounterfactualConfig)
    """counterfactual_gigpo: step groups imagined by the world model (``imagination.step_groups.counterfactual_gigpo``);
    real_branch_gigpo: the same groups played in the real env (``imagination.step_groups.real_branch``)."""

    def __post_init__(self) -> None:
        if self.name not in ALGORITHMS:
            raise ValueError(f"algo.name must be one of {ALGORITHMS}, got {self.name!r}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"algo.gamma must be in [0, 1], got {self.gamma}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"algo.lam must be in [0, 1], got {self.lam}")
        if self.episode_stats not in ("rows", "trajectories"):
            raise ValueError(f"algo.episode_stats must be 'rows' or 'trajectories', got {self.episode_stats!r}")
        if self.mode not in ("mean_std_norm", "mean_norm"):
            raise ValueError(f"algo.mode must be 'mean_std_norm' or 'mean_norm', got {self.mode!r}")
        if self.history_levels < 0:
            raise ValueError(f"algo.history_levels must be >= 0, got {self.history_levels}")
        if self.invalid_action_penalty < 0:
            raise ValueError(f"algo.invalid_action_penalty must be >= 0, got {self.invalid_action_penalty}")
        if self.max_resample_rounds < 0:
            raise ValueError(f"algo.max_resample_rounds must be >= 0, got {self.max_resample_rounds}")

    @property
    def uses_critic(self) -> bool:
        return self.name in VALUE_LEVEL

    @property
    def value_level(self) -> str | None:
        """What the critic values for this algorithm: ``token``, ``turn``, ``sequence``, or None."""
        return VALUE_LEVEL.get(self.name)
