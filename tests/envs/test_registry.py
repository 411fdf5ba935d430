import pytest

from envs.agent import AgentView, ExpertAgent
from envs.base import Env, RealEnv, ScriptedEnv, SnapshotEnv, StepResult, TaskEnv
from envs.registry import ENVIRONMENTS, env_options, make


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_every_env_is_made_by_name_and_follows_the_protocol(name):
    env = make(name)
    assert isinstance(env, RealEnv)  # the core and every extra: scripted, snapshots, task keys
    assert env.name == name
    observation = env.reset(seed=3)
    assert isinstance(observation, str) and observation
    action = ExpertAgent().act([AgentView(env=env, turns=[], observation=observation)])[0]
    result = env.step(action)
    assert isinstance(result, StepResult) and result.info["valid"] is True


def test_unknown_name_lists_the_valid_names():
    with pytest.raises(ValueError, match="hidden_nmber.*frozen_lake, hidden_number, minishop, sokoban"):
        make("hidden_nmber")


def test_unknown_option_lists_the_valid_options():
    with pytest.raises(ValueError, match=r"\['N'\].*valid options: n, max_turns, noise, observation"):
        make("hidden_number", N=16)
    assert "is_slippery" in env_options("frozen_lake")


def test_options_reach_the_env():
    env = make("hidden_number", n=4, max_turns=2)
    assert env.n == 4 and env.max_turns == 2


class CoreOnly:
    """Only reset and step, as a learned world model offers."""

    name = "core"
    max_turns = 3

    def reset(self, seed: int) -> str:
        return "start"

    def step(self, action: str) -> StepResult:
        return StepResult("next", 0.0, True, {"valid": True})


def test_the_core_protocol_needs_only_reset_and_step():
    env = CoreOnly()
    assert isinstance(env, Env)
    assert not isinstance(env, (ScriptedEnv, SnapshotEnv, TaskEnv, RealEnv))
