import importlib.util
import random

import pytest

from envs.agent import AgentView, ExpertAgent
from envs.base import Env, RealEnv, ScriptedEnv, SnapshotEnv, StepResult, TaskEnv
from envs.registry import (
    ENVIRONMENTS,
    action_is_valid,
    action_validator,
    capabilities,
    env_names,
    env_options,
    make,
    unavailable,
)


def built(name):
    """``make(name)``, or a skip naming the install command where its optional package is absent."""
    if unavailable(name) is not None:
        pytest.skip(unavailable(name))
    return make(name)


@pytest.mark.parametrize("name", env_names())
def test_every_env_is_made_by_name_and_keeps_its_declared_capabilities(name):
    env = built(name)
    declared = capabilities(name)
    assert isinstance(env, Env) and env.name == name
    assert isinstance(env, SnapshotEnv) == declared.snapshots
    assert ("max_turns" in env_options(name)) == declared.max_turns_option
    observation = env.reset(seed=3)
    assert isinstance(observation, str) and observation
    key = env.task_key() if isinstance(env, TaskEnv) else None
    if not declared.task_key:
        assert key is None
    if declared.random_action:
        assert isinstance(env.random_action(random.Random(0)), str)
    if declared.expert:
        action = ExpertAgent().act([AgentView(env=env, turns=[], observation=observation)])[0]
        result = env.step(action)
        assert isinstance(result, StepResult) and result.info["valid"] is True


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_the_hand_written_envs_offer_every_extra(name):
    assert isinstance(make(name), RealEnv)
    declared = capabilities(name)
    assert declared.expert and declared.snapshots and declared.max_turns_option and declared.extra is None


@pytest.mark.parametrize("name", env_names())
def test_a_declared_task_key_names_tasks(name):
    env = built(name)
    if not capabilities(name).task_key:
        pytest.skip(f"{name} declares no task keys")
    kwargs = {"hidden_number": {}, "frozen_lake": {"size": 4}}.get(name, {})  # frozen_lake's default map is fixed
    env = make(name, **kwargs) if kwargs else env
    keys = set()
    for seed in range(5):
        env.reset(seed)
        keys.add(env.task_key())
    assert None not in keys and len(keys) > 1


def test_a_missing_optional_package_gives_the_install_command(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "textarena" else real_find_spec(name, *a))
    assert "pip install -e '.[textarena]'" in unavailable("textarena")
    with pytest.raises(ImportError, match=r"env=textarena.*pip install -e '\.\[textarena\]'"):
        make("textarena")
    assert unavailable("gym_text") is None and unavailable("sokoban") is None


def test_unknown_name_lists_the_valid_names():
    with pytest.raises(ValueError, match="hidden_nmber.*frozen_lake, gym_text, hidden_number, minishop, sokoban, textarena"):
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


# Texts near each env's action format, well formed or not.
NEAR_ACTIONS = [
    "guess(3)", "guess ( 16 )", "GUESS(7)", "guess(0)", "guess(17)", "guess(3).", "guess 3", "please guess(3)",
    "Up", " left ", "RIGHT", "L eft", "Up.", "go left", "north",
    "search[red shirt]", "click[buy now]", "click [ back to search ]", "click[]", "search[", "buy", "",
    "\n", "é", "click[item 3]", "search[!!]",
]


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
@pytest.mark.parametrize("kwargs", [{}, {"max_turns": 30}])
def test_action_validator_agrees_with_the_real_envs_valid_flag(name, kwargs):
    if name == "hidden_number":
        kwargs = {**kwargs, "n": 8}  # guess(16) parses but is out of range
    is_valid = action_validator(name, kwargs)
    env = make(name, **kwargs)
    for text in NEAR_ACTIONS:
        env.reset(0)
        real = env.step(text).info["valid"]
        assert is_valid(text) is action_is_valid(name, kwargs, text)
        if name == "minishop":  # valid in the real env also needs the page to offer the action
            assert is_valid(text) or not real, text
        else:
            assert is_valid(text) is real, text
    if name == "minishop":
        assert action_is_valid(name, kwargs, "click[buy now]") and not action_is_valid(name, kwargs, "click[]")


def test_action_validator_refuses_unknown_names_and_options():
    with pytest.raises(ValueError, match="unknown environment"):
        action_validator("chess")
    with pytest.raises(ValueError, match="unknown option"):
        action_is_valid("sokoban", {"n": 3}, "Up")
