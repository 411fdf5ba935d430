"""The agent mix: the noisy expert's coin, and ``collect_mix``'s order, ids and agents."""

from __future__ import annotations

import random

import pytest

from envs.agent import AgentView
from envs.mixed_agents import AGENT_NAMES, NoisyExpertAgent, collect_mix
from envs.splits import split_seeds


class MarkedEnv:
    """Answers ``expert`` or ``random``, so each action says which branch chose it."""

    def expert_action(self) -> str:
        return "expert"

    def random_action(self, rng: random.Random) -> str:
        return "random"


def views(count: int) -> list[AgentView]:
    return [AgentView(env=MarkedEnv(), turns=[], observation="") for _ in range(count)]


@pytest.mark.parametrize("probability", [-0.1, 1.5])
def test_a_probability_outside_zero_one_is_refused_naming_it(probability):
    with pytest.raises(ValueError, match="expert_probability"):
        NoisyExpertAgent(probability)


def test_probability_one_always_plays_the_expert_and_zero_never_does():
    assert NoisyExpertAgent(1.0).act(views(50)) == ["expert"] * 50
    assert NoisyExpertAgent(0.0).act(views(50)) == ["random"] * 50


def test_a_half_plays_the_expert_about_half_the_time():
    actions = NoisyExpertAgent(0.5, seed=3).act(views(2000))
    # Binomial(2000, 1/2): mean 1000, std sqrt(500) = 22.4; 5 std either side.
    assert abs(actions.count("expert") - 1000) < 112


def test_the_same_seed_plays_the_same_choices():
    assert NoisyExpertAgent(0.5, seed=7).act(views(40)) == NoisyExpertAgent(0.5, seed=7).act(views(40))


def test_collect_mix_cycles_the_agents_over_the_split_seeds_in_order():
    kwargs = {"n": 16}
    trajectories = collect_mix("hidden_number", kwargs, "train", 7, seed=0)

    assert [t.trajectory_id for t in trajectories] == [0, 1, 2, 3, 4, 5, 6]
    assert [AGENT_NAMES[t.group_id] for t in trajectories] == [
        "random", "expert", "noisy_expert", "random", "expert", "noisy_expert", "random"]
    assert [t.seed for t in trajectories] == split_seeds("hidden_number", kwargs, "train", seed=0, count=7)
    experts = [t for t in trajectories if t.group_id == 1]
    # Binary search over 1..16 opens on the median 8 and needs at most 5 of the 6 turns.
    assert all(t.success and t.turns[0].action == "guess(8)" and len(t.turns) <= 5 for t in experts)
