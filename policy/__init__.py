"""The LM policy and everything that trains it: sampling, the rollout batch, advantage estimators,
PPO losses and the Fabric learner.

``import policy`` gives the public names, e.g. ``policy.LMPolicy``, ``policy.build_rollout_batch``,
``policy.PPOLearner``; the estimators and losses are pure functions in ``policy.advantages`` and
``policy.losses``.
"""

from policy.advantages.algorithms import critic_token_advantages, group_baseline_token_advantages, turn_rows
from policy.advantages.config import ALGORITHMS, AlgoConfig
from policy.batch import TokenBatch
from policy.config import PolicyConfig, PPOConfig
from policy.learner import PPOLearner
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer, load_local_pretrained, load_pretrained
from policy.rollout_batch import RolloutBatch, build_rollout_batch
from policy.value_targets import ValueTargets
from policy.warm_start import behaviour_clone, expert_trajectories

__all__ = [
    "ALGORITHMS",
    "AlgoConfig",
    "LMPolicy",
    "PPOConfig",
    "PPOLearner",
    "PolicyConfig",
    "RolloutBatch",
    "TokenBatch",
    "ValueTargets",
    "behaviour_clone",
    "build_rollout_batch",
    "build_tiny_lm",
    "build_tiny_tokenizer",
    "critic_token_advantages",
    "expert_trajectories",
    "group_baseline_token_advantages",
    "load_local_pretrained",
    "load_pretrained",
    "turn_rows",
]
