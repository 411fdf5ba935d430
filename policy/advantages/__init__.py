"""Advantage estimators as pure functions on tensors, and the glue that picks one per algorithm.

- ``grpo``: GRPO / Dr. GRPO; ``gigpo`` and ``hgpo``: step-row group estimators (rows in ``step_rows``);
  ``sppo``: sequence-level PPO; ``fused``: the critic-group fused advantage; ``group_norm``: the
  in-group normalisation they share; ``tokens``: spreading and whitening over action tokens. The GAE
  recursion ``gae`` lives in ``critic.targets`` (the critic fits on the same returns).
- ``config``: ``AlgoConfig`` (``algo.*``) with its ``FusedConfig`` and ``CounterfactualConfig``.
- ``algorithms``: which advantage each algorithm name gives each turn of a rollout batch.

The estimators are re-exported here, so ``policy.advantages`` is the one place to import any of them
from. Each reproduces a convention of verl or verl-agent when configured as its docstring says;
``docs/conventions.md`` states those conventions.
"""

from critic.targets import gae
from policy.advantages.gigpo import GiGPOResult, gigpo_advantages
from policy.advantages.group_norm import normalise_in_groups
from policy.advantages.grpo import grpo_advantages, score_from_token_rewards
from policy.advantages.hgpo import HGPOResult, hgpo_advantages
from policy.advantages.sppo import sppo_advantages
from policy.advantages.step_rows import StepRows
from policy.advantages.tokens import broadcast_to_tokens, whiten

__all__ = [
    "GiGPOResult",
    "HGPOResult",
    "StepRows",
    "broadcast_to_tokens",
    "gae",
    "gigpo_advantages",
    "grpo_advantages",
    "hgpo_advantages",
    "normalise_in_groups",
    "score_from_token_rewards",
    "sppo_advantages",
    "whiten",
]
