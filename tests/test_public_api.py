"""Each package's public names are importable from the package itself, and are the definitions."""

import importlib

import pytest

PUBLIC = {
    "policy": ["LMPolicy", "PPOLearner", "PPOConfig", "AlgoConfig", "RolloutBatch", "build_rollout_batch",
               "ValueTargets", "behaviour_clone", "build_tiny_lm"],
    "critic": ["CriticStates", "TurnCritic", "TokenCritic", "TokenCriticConfig", "gae"],
    "policy.advantages": ["grpo_advantages", "gigpo_advantages", "hgpo_advantages", "sppo_advantages",
                          "whiten", "broadcast_to_tokens", "normalise_in_groups", "gae"],
    "imagination": ["CounterfactualGiGPO", "CounterfactualGroups", "imagine_counterfactual_groups"],
    "envs": ["make", "collect", "Trajectory", "Turn", "TrajectoryStore", "SampledAction", "split_seeds",
             "NoisyExpertAgent", "collect_mix"],
}


@pytest.mark.parametrize(("package", "name"), [(p, n) for p, names in PUBLIC.items() for n in names])
def test_public_name_is_exported(package, name):
    module = importlib.import_module(package)
    assert name in module.__all__
    value = getattr(module, name)
    assert getattr(importlib.import_module(value.__module__), name) is value
