"""The bias controls: reward penalty r - lambda * u, halting on uncertainty, and the horizon.

A wrapped ``model.step`` fixes the uncertainty, reward and done the model reports, so each control is
checked against known numbers; the sampled text stays the model's.
"""

from __future__ import annotations

import pytest
import torch

from envs import collect, count_env_steps
from imagination import DreamEnv, DreamEnvFactory
from tests.envs.fake_env import ScriptedAgent

GUESS = ScriptedAgent(lambda view: "guess(8)")


def test_the_reward_is_the_model_reward_minus_lambda_times_the_uncertainty(hn_model, patch_steps):
    rewards = iter([0.75, -0.5, 0.125])
    uncertainties = iter([0.2, 0.0, 1.5])
    patch_steps(
        hn_model,
        reward=lambda b: torch.full((b,), next(rewards)),
        uncertainty=lambda b: torch.full((b,), next(uncertainties)),
        done=False,
    )
    env = DreamEnv(hn_model, "hidden_number", seed=0, reward_penalty=0.4, outcome="model")
    env.reset(0)
    for r, u in [(0.75, 0.2), (-0.5, 0.0), (0.125, 1.5)]:
        result = env.step("guess(8)")
        assert result.info["model_reward"] == pytest.approx(r)
        assert result.info["uncertainty"] == pytest.approx(u)
        assert result.reward == pytest.approx(r - 0.4 * u)


def test_no_penalty_leaves_the_outcomes_reward(hn_model):
    for outcome, key in (("text", "text_reward"), ("model", "model_reward")):
        env = DreamEnv(hn_model, "hidden_number", seed=0, outcome=outcome)
        env.reset(0)
        result = env.step("guess(8)")
        assert result.reward == result.info[key] and result.info["uncertainty"] > 0
        assert result.info["outcome_from"] == outcome


def test_halting_fires_when_the_uncertainty_exceeds_the_threshold(hn_model, patch_steps):
    patch_steps(hn_model, uncertainty=0.3, done=False)
    env = DreamEnv(hn_model, "hidden_number", seed=0, halt_uncertainty=0.2)
    env.reset(0)
    result = env.step("guess(8)")
    assert not result.done
    assert result.info["truncated"] and result.info["halted"] and not result.info["horizon_reached"]
    assert env.last_info["halted"] and env.done
    (traj,) = collect(GUESS, DreamEnvFactory(hn_model, "hidden_number", halt_uncertainty=0.2), group_size=1,
                      group_seeds=[0], source="imagined", progress=False)
    assert traj.num_turns == 1 and traj.truncated and not traj.turns[-1].done and not traj.success


def test_halting_does_not_fire_below_the_threshold(hn_model, patch_steps):
    patch_steps(hn_model, uncertainty=0.3, done=False)
    env = DreamEnv(hn_model, "hidden_number", {"max_turns": 3}, seed=0, halt_uncertainty=0.5)
    env.reset(0)
    results = [env.step("guess(8)") for _ in range(3)]
    assert [r.done for r in results] == [False, False, True]  # ran into the turn budget
    assert not any(r.info["halted"] or r.info["truncated"] for r in results)


def test_halting_overrides_the_models_done_but_not_the_turn_budget(hn_model, patch_steps):
    patch_steps(hn_model, uncertainty=0.3, done=True, reward=1.0)
    env = DreamEnv(hn_model, "hidden_number", {"max_turns": 2}, seed=0, halt_uncertainty=0.2)
    env.reset(0)
    halted = env.step("guess(8)")
    assert not halted.done and halted.info["halted"] and halted.info["model_done"]
    assert not halted.info["success"]
    (real,) = collect(GUESS, "hidden_number", env_kwargs={"max_turns": 2}, group_size=1, group_seeds=[0],
                      progress=False)
    assert env.start_from(real, 1) == real.turns[0].next_observation
    last = env.step("guess(8)")  # one turn left: the budget ends the episode, uncertain or not
    assert last.done and not last.info["truncated"] and not last.info["halted"]


def test_the_horizon_truncates_after_h_imagined_steps(hn_model, patch_steps):
    patch_steps(hn_model, uncertainty=0.1, done=False)
    env = DreamEnv(hn_model, "hidden_number", seed=0, horizon=2, halt_uncertainty=1.0)
    env.reset(0)
    first, second = env.step("guess(8)"), env.step("guess(4)")
    assert not first.done and not first.info["truncated"]
    assert not second.done and second.info["truncated"] and second.info["horizon_reached"]
    assert not second.info["halted"]
    factory = DreamEnvFactory(hn_model, "hidden_number", seed=0, horizon=2)
    real = collect(GUESS, "hidden_number", group_size=1, group_seeds=[0], progress=False)
    assert real[0].num_turns > 2  # guessing 8 over and over does not find seed 0's number early
    trajs = collect(GUESS, factory, group_size=2, branches=[(real[0], 0), (real[0], 2)],
                    source="imagined", progress=False)
    # The horizon counts imagined steps from the branch point; the copied prefix is not among them.
    assert [(t.branch_turn, t.num_turns, t.truncated) for t in trajs] == [(0, 2, True)] * 2 + [(2, 4, True)] * 2
    assert count_env_steps(trajs, source="imagined") == 8


def test_a_model_done_before_the_horizon_ends_done(hn_model, patch_steps):
    patch_steps(hn_model, done=True, reward=1.0, uncertainty=0.0)
    env = DreamEnv(hn_model, "hidden_number", seed=0, horizon=1, outcome="model")
    env.reset(0)
    result = env.step("guess(8)")
    assert result.done and result.info["success"] and not result.info["truncated"]


@pytest.mark.parametrize(
    ("option", "value"),
    [("reward_penalty", -1.0), ("horizon", 0), ("horizon", 1.5), ("halt_uncertainty", "high"), ("reward_penalty", True)],
)
def test_bad_control_values_are_refused(hn_model, option, value):
    with pytest.raises(ValueError, match=option):
        DreamEnv(hn_model, "hidden_number", **{option: value})

