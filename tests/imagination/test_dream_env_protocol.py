"""DreamEnv keeps the Env core contract of the real envs, with an untrained tiny world model.

The truncation contract is checked with the same stalling actions and agent as the real envs'
tests (``tests/envs/test_truncation.py``), through ``collect``.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs import collect
from envs.base import Env, EpisodeDoneError, RealEnv, ScriptedEnv, SnapshotEnv, StepResult, TaskEnv
from envs.registry import ENVIRONMENTS, action_is_valid, make
from imagination import DreamEnv, DreamEnvFactory
from tests.envs.test_truncation import STALLING, Repeat

from .conftest import tiny_model

NAMES = sorted(ENVIRONMENTS)
MALFORMED = ["", "hello", "guess(", "Up.", "click[", "\n\n", "guess(999)", "go left", "é"]


@pytest.fixture(scope="module")
def models():
    return {name: tiny_model(name) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_core_protocol_only_with_the_real_name_and_budget(name, models):
    env = DreamEnv(models[name], name, {"max_turns": 4}, seed=0)
    assert isinstance(env, Env)
    assert not isinstance(env, (ScriptedEnv, SnapshotEnv, TaskEnv, RealEnv))
    assert env.name == name and env.max_turns == 4 == make(name, max_turns=4).max_turns


@pytest.mark.parametrize("name", NAMES)
def test_reset_gives_the_real_first_observation_and_steps_answer_like_an_env(name, models):
    env = DreamEnv(models[name], name, seed=0)
    real = make(name)
    assert env.reset(5) == real.reset(5)
    result = env.step(real.expert_action())
    assert isinstance(result, StepResult) and isinstance(result.observation, str)
    assert isinstance(result.reward, float) and isinstance(result.done, bool)
    info = result.info
    assert info["valid"] is True and info["turn"] == 1 and info["imagined_steps"] == 1
    assert math.isfinite(info["uncertainty"]) and info["uncertainty"] >= 0
    assert result.reward == info["text_reward"]  # no penalty by default; the env's rule on the text
    for key in ("success", "model_done", "truncated", "halted", "horizon_reached", "ended"):
        assert isinstance(info[key], bool), key


def test_stepping_before_a_start_or_after_the_end_raises(hn_model):
    env = DreamEnv(hn_model, "hidden_number", {"max_turns": 1}, seed=0)
    with pytest.raises(EpisodeDoneError):
        env.step("guess(3)")
    env.reset(0)
    assert env.step("guess(3)").done  # the budget of one turn
    with pytest.raises(EpisodeDoneError):
        env.step("guess(3)")
    env.reset(0)  # a new episode can start
    env.step("guess(3)")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_actions_are_invalid_as_the_real_env_says_and_never_raise(name, text, models):
    env = DreamEnv(models[name], name, seed=0)
    real = make(name)
    env.reset(1)
    real.reset(1)
    result = env.step(text)
    assert result.info["valid"] is False is real.step(text).info["valid"]
    assert isinstance(result.observation, str)


@settings(max_examples=25, deadline=None)
@given(texts=st.lists(st.text(max_size=30), min_size=1, max_size=6), seed=st.integers(0, 10_000))
def test_fuzz_arbitrary_text_never_raises_and_the_turn_count_holds(hn_model, texts, seed):
    env = DreamEnv(hn_model, "hidden_number", {"max_turns": 5}, seed=seed)
    env.reset(seed)
    for turn, text in enumerate(texts, start=1):
        result = env.step(text)
        assert result.info["valid"] is action_is_valid("hidden_number", {"max_turns": 5}, text)
        assert result.info["turn"] == turn
        if turn == 5:
            assert result.done
        if result.done:
            with pytest.raises(EpisodeDoneError):
                env.step(text)
            break


@pytest.mark.parametrize("name", NAMES)
def test_the_env_budget_ends_the_episode_done(name, models, patch_steps):
    patch_steps(models[name], done=False)  # the model never ends an episode by itself
    factory = DreamEnvFactory(models[name], name, {"max_turns": 2}, seed=0)
    trajectories = collect(Repeat(STALLING[name]), factory, env_kwargs={"max_turns": 2}, group_size=2,
                           group_seeds=[0], source="imagined", progress=False)
    assert all(t.num_turns == 2 and t.turns[-1].done and not t.truncated for t in trajectories)
    assert all(t.source == "imagined" and t.env_name == name for t in trajectories)


@pytest.mark.parametrize("name", NAMES)
def test_a_cap_below_the_env_budget_truncates(name, models, patch_steps):
    patch_steps(models[name], done=False)
    factory = DreamEnvFactory(models[name], name, seed=0)
    trajectories = collect(Repeat(STALLING[name]), factory, group_size=2, group_seeds=[0], max_turns=1,
                           source="imagined", progress=False)
    assert all(t.num_turns == 1 and t.truncated and not t.turns[-1].done for t in trajectories)


def test_a_model_done_ends_the_episode_done_and_success_follows_the_reward(hn_model, patch_steps):
    patch_steps(hn_model, done=True, reward=1.0)
    env = DreamEnv(hn_model, "hidden_number", seed=0, outcome="model")
    env.reset(0)
    result = env.step("guess(8)")
    assert result.done and result.info["success"] and result.reward == 1.0
    patch_steps(hn_model, done=True, reward=0.2)
    env.reset(0)
    result = env.step("guess(8)")
    assert result.done and not result.info["success"]


def test_sokoban_success_needs_the_finishing_reward(patch_steps):
    model = tiny_model("sokoban")
    env = DreamEnv(model, "sokoban", seed=0, outcome="model")
    for reward, success in [(10.9, True), (0.9, False), (-0.1, False)]:
        patch_steps(model, done=True, reward=reward)
        env.reset(0)
        assert env.step("Up").info["success"] is success


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_episode_other_seeds_differ(name, models):
    budget = {"max_turns": 2}

    def episode(env: DreamEnv, reset_seed: int = 3) -> tuple:
        steps = [env.reset(reset_seed)]
        done = False
        while not done:
            result = env.step(STALLING[name])
            steps.append((result.observation, result.reward, result.done))
            done = result.done
        return tuple(steps)

    env = DreamEnv(models[name], name, budget, seed=0)
    first = episode(env)
    assert episode(env) == first  # a reset restarts the env's own randomness: the same episode again
    assert episode(DreamEnv(models[name], name, budget, seed=0)) == first
    others = {episode(DreamEnv(models[name], name, budget, seed=s)) for s in (1, 2)}
    assert others != {first}


ANCHOR_VARIANTS = [("hidden_number", {}), ("hidden_number", {"observation": "transcript"}), ("frozen_lake", {}),
                   ("sokoban", {}), ("minishop", {})]


@pytest.mark.parametrize(("name", "kwargs"), ANCHOR_VARIANTS)
def test_the_anchor_path_gives_the_real_envs_anchors(name, kwargs, models):
    """Real episodes (expert, random and malformed actions) fed through ``start_from``: at every turn
    the dream's anchor is the one the real env recorded."""
    from envs import ExpertAgent

    real = collect(ExpertAgent(), name, env_kwargs=kwargs, group_size=1, n_groups=4, seed=3, progress=False)
    real += collect(Sloppy(5), name, env_kwargs=kwargs, group_size=1, n_groups=4, seed=9, progress=False)
    assert any(not turn.valid for t in real for turn in t.turns)
    env = DreamEnv(models[name], name, kwargs, seed=0)
    checked = 0
    for trajectory in real:
        for k, turn in enumerate(trajectory.turns):
            if any(t.done for t in trajectory.turns[:k]):
                break
            env.start_from(trajectory, k)
            assert env.anchor_observation() == turn.anchor_observation, (name, k)
            checked += 1
    assert checked >= 8
    assert env.reset(4) == make(name, **kwargs).reset(4) and env.anchor_observation() == _real_anchor(name, kwargs, 4)


def _real_anchor(name, kwargs, seed):
    real = make(name, **kwargs)
    real.reset(seed)
    return real.anchor_observation()


def test_imagined_text_moves_the_anchor_by_the_envs_rule(hn_model, patch_steps):
    import itertools

    texts = itertools.chain(["guess 8 : lower", "invalid action . call guess ( k ) with k in 1 . . 16"],
                            itertools.repeat("guess 4 : higher"))
    patch_steps(hn_model, observations=lambda b: [next(texts)] * b, uncertainty=0.0)
    env = DreamEnv(hn_model, "hidden_number", seed=0)
    env.reset(0)
    assert env.anchor_observation() == "find the hidden number in 1 .. 16 . call guess(k)"
    anchors = []
    for action in ("guess(8)", "guess(x)", "guess(4)"):
        env.step(action)
        anchors.append(env.anchor_observation())
    assert anchors == ["guess 8 : lower", "guess 8 : lower", "guess 8 : lower\nguess 4 : higher"]
    collected = collect(GuessFour(), DreamEnvFactory(hn_model, "hidden_number", seed=0, horizon=2), group_size=1,
                        group_seeds=[0], source="imagined", progress=False)
    # collect records the dream's anchors, as it records a real env's
    assert [t.anchor_observation for t in collected[0].turns] == [
        "find the hidden number in 1 .. 16 . call guess(k)", "guess 4 : higher"]


class Sloppy:
    """Random well-formed actions, every third turn a malformed one."""

    def __init__(self, seed: int) -> None:
        import random

        self.rng = random.Random(seed)

    def act(self, views):
        return ["junk" if len(v.turns) % 3 == 1 else v.env.random_action(self.rng) for v in views]


class GuessFour:
    def act(self, views):
        return ["guess(4)" for _ in views]
