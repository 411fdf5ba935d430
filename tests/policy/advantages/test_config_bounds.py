"""The bounds of the advantage configs at their edges: the lowest allowed value passes, a bool or a
fraction where an integer (or a number) belongs is refused with the key's name."""

from __future__ import annotations

import pytest

from policy.advantages.config import AlgoConfig, CounterfactualConfig, FusedConfig


@pytest.mark.parametrize("key", ["siblings", "horizon", "critic_batch_size", "critic_trajectories"])
def test_one_is_the_least_count_allowed(key):
    assert getattr(CounterfactualConfig(**{key: 1}), key) == 1
    with pytest.raises(ValueError, match=f"algo.counterfactual.{key} must be an integer >= 1"):
        CounterfactualConfig(**{key: 0})


@pytest.mark.parametrize("value", [True, 2.5])
def test_counts_must_be_integers(value):
    with pytest.raises(ValueError, match="algo.counterfactual.siblings must be an integer"):
        CounterfactualConfig(siblings=value)


@pytest.mark.parametrize("key", ["fallback_uncertainty", "critic_lr"])
def test_numbers_refuse_bools(key):
    with pytest.raises(ValueError, match=f"algo.counterfactual.{key} must be a number"):
        CounterfactualConfig(**{key: True})


def test_numbers_take_their_edge_values():
    assert CounterfactualConfig(fallback_uncertainty=0.0).fallback_uncertainty == 0.0
    assert CounterfactualConfig(critic_lr=1e-9).critic_lr == 1e-9
    assert AlgoConfig(invalid_action_penalty=0.0).invalid_action_penalty == 0.0


def test_more_edges_of_the_counterfactual_and_fused_configs():
    assert CounterfactualConfig(critic_fit_steps=0).critic_fit_steps == 0  # 0 fit steps: keep the critic as is
    assert FusedConfig(evpo_threshold=1.0).evpo_threshold == 1.0
    for key, value in (("fallback_uncertainty", -1.0), ("critic_lr", -1.0), ("critic_lr", 0.0)):
        with pytest.raises(ValueError, match=f"algo.counterfactual.{key} must be a number"):
            CounterfactualConfig(**{key: value})
    with pytest.raises(ValueError, match="algo.counterfactual.siblings_in_gradient"):
        CounterfactualConfig(siblings_in_gradient="yes")
