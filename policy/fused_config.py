"""``FusedConfig``: the options of ``algo=fused`` (``algo.fused.*``), the critic-group fused advantage.

Only the choices live here, next to ``AlgoConfig``; the math is in ``policy.fused_advantages``.
"""

from __future__ import annotations

from dataclasses import dataclass

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
