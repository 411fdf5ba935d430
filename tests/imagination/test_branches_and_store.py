"""Dream episodes start from real states: a reset's first observation or a real history prefix,
folded without sampling; imagined trajectories are ordinary records that round-trip the store."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from envs import BranchReplayError, ExpertAgent, TrajectoryStore, collect, count_env_steps
from imagination import DreamEnv, DreamEnvFactory
from tests.envs.fake_env import ScriptedAgent


@pytest.fixture(scope="module")
def real():
    return collect(ExpertAgent(), "hidden_number", group_size=1, n_groups=4, seed=1, progress=False)


def folded(model, traj, k):
    state = model.initial_state([traj.turns[0].observation])
    for turn in traj.turns[:k]:
        state = model.observe(state, [turn.action], [turn.next_observation])
    return state


@pytest.mark.parametrize("k", [0, 1, 2])
def test_start_from_a_prefix_is_observing_the_prefix(hn_model, real, k):
    traj = next(t for t in real if t.num_turns > 2)
    env = DreamEnv(hn_model, "hidden_number", seed=0)
    observation = env.start_from(traj, k)
    assert observation == (traj.turns[k - 1].next_observation if k else traj.turns[0].observation)
    expected = folded(hn_model, traj, k)
    assert torch.equal(env.world_state.latent, expected.latent)
    assert env.world_state.observations == (observation,)


def test_reset_is_the_initial_state_of_the_real_first_observation(hn_model, real):
    env = DreamEnv(hn_model, "hidden_number", seed=0)
    observation = env.reset(real[0].seed)
    assert observation == real[0].turns[0].observation
    assert torch.equal(env.world_state.latent, hn_model.initial_state([observation]).latent)


def test_start_from_refuses_impossible_starts(hn_model, real):
    env = DreamEnv(hn_model, "hidden_number", seed=0)
    traj = real[0]
    with pytest.raises(ValueError, match="turn"):
        env.start_from(traj, traj.num_turns)  # the last turn ended the episode
    with pytest.raises(ValueError, match="turn"):
        env.start_from(traj, traj.num_turns + 1)
    with pytest.raises(ValueError, match="recorded on"):
        DreamEnv(hn_model, "hidden_number", {"n": 8}, seed=0).start_from(traj, 0)


def test_collect_starts_dream_branches_without_replaying(hn_model, real):
    # An edited recording: a real env cannot replay it, a dream env just folds it in.
    traj = next(t for t in real if t.num_turns > 2)
    edited = replace(traj, turns=[replace(traj.turns[0], next_observation="guess 8 : lower"), *traj.turns[1:]])
    with pytest.raises(BranchReplayError):
        collect(ExpertAgent(), "hidden_number", branches=[(edited, 2)], group_size=1, progress=False)
    seen = []

    def remember(view):
        seen.append((len(view.turns), view.observation, view.env.world_state.latent))
        return "guess(3)"

    factory = DreamEnvFactory(hn_model, "hidden_number", seed=0, horizon=2)
    trajs = collect(ScriptedAgent(remember), factory, branches=[(edited, 2)], group_size=3, source="imagined",
                    progress=False)
    expected = folded(hn_model, edited, 2).latent
    assert [(n, obs) for n, obs, _ in seen[:3]] == [(2, edited.turns[1].next_observation)] * 3
    assert all(torch.equal(latent, expected) for _, _, latent in seen[:3])
    for t in trajs:
        assert t.source == "imagined" and t.branch_turn == 2 and t.turns[:2] == edited.turns[:2]
        assert t.seed == edited.seed and t.env_name == "hidden_number"
    assert count_env_steps(trajs) == 0  # nothing real was played
    assert count_env_steps(trajs, source="imagined") == sum(t.num_turns - 2 for t in trajs)


def test_an_imagined_trajectory_round_trips_the_store(hn_model, real, tmp_path):
    factory = DreamEnvFactory(hn_model, "hidden_number", seed=0, horizon=3, reward_penalty=0.5)
    trajs = collect(ScriptedAgent(lambda v: "guess(5)"), factory, branches=[(real[1], 1), (real[2], 0)],
                    group_size=2, source="imagined", progress=False)
    trajs[0].iteration, trajs[0].policy_version = 3, 7
    store = TrajectoryStore(tmp_path / "store")
    store.append(trajs)
    loaded = TrajectoryStore(tmp_path / "store").load()
    assert loaded == trajs
    assert TrajectoryStore(tmp_path / "store").filter(source="imagined") == trajs
    assert TrajectoryStore(tmp_path / "store").filter(source="real") == []


def test_a_group_folds_its_shared_prefix_once(hn_model, real, monkeypatch):
    traj = next(t for t in real if t.num_turns > 2)
    calls = []
    inner = hn_model.observe
    monkeypatch.setattr(hn_model, "observe", lambda *a: calls.append(1) or inner(*a))
    factory = DreamEnvFactory(hn_model, "hidden_number", seed=0, horizon=1)
    trajs = collect(ScriptedAgent(lambda v: "guess(5)"), factory, branches=[(traj, 2), (traj, 1)], group_size=4,
                    source="imagined", progress=False)
    assert len(trajs) == 8 and len(calls) == 2 + 1
