"""The real-branch oracle: counterfactual step groups played in the real env, cloned by replay."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

import envs
from critic.config import LatentCriticSection
from envs.collect import BranchReplayError
from envs.hidden_number import HiddenNumberEnv
from imagination.config import ImaginationConfig
from imagination.step_groups.advantages import counterfactual_step_advantages
from imagination.step_groups.counterfactual_gigpo import CounterfactualGiGPO
from imagination.step_groups.real_branch import RealEnvBrancher, replay_snapshots
from policy.advantages.config import AlgoConfig, CounterfactualConfig
from tests.imagination.step_groups.test_groups import ConstantCritic

NOISY = {"n": 8, "max_turns": 5, "noise": 0.4, "observation": "transcript"}  # a lying oracle
SIBLING = "guess(1)"


class Siblings:
    """A text policy answering ``SIBLING`` that records the history and observation it was shown."""

    def __init__(self) -> None:
        self.views: list[tuple[list[str], str]] = []

    def act(self, views):
        self.views.extend(([t.action for t in v.turns], v.observation) for v in views)
        return [SIBLING for _ in views]


class SnapshotRecorder:
    """A random agent that takes the live env's snapshot before every action it answers."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.live: dict[tuple[int, int], envs.EnvSnapshot] = {}

    def act(self, views):
        for view in views:
            self.live[(id(view.env), len(view.turns))] = view.env.snapshot()
        return [view.env.random_action(self.rng) for view in views]


def brancher(env_name: str, kwargs: dict, *, siblings: int, horizon: int) -> RealEnvBrancher:
    algo = AlgoConfig(
        name="real_branch_gigpo",
        gamma=0.9,
        counterfactual=CounterfactualConfig(siblings=siblings, horizon=horizon),
    )
    return RealEnvBrancher(env_name, kwargs, algo)


def noisy_states() -> list[tuple[envs.Trajectory, int]]:
    """Mid-episode states of random lying-oracle episodes whose real action is not ``SIBLING``."""
    real = envs.collect(
        envs.RandomAgent(5),
        "hidden_number",
        env_kwargs=NOISY,
        group_size=1,
        n_groups=8,
        seed=3,
        progress=False,
    )
    states = [(t, k) for t in real for k in range(t.num_turns) if t.turns[k].action != SIBLING]
    assert len({id(t) for t, _ in states}) >= 3 and max(k for _, k in states) >= 2
    return states[:6]


def test_a_group_is_the_real_action_and_g_siblings_from_the_same_real_state():
    states, policy = noisy_states(), Siblings()
    groups = brancher("hidden_number", NOISY, siblings=3, horizon=1)(
        policy, ConstantCritic(0.5), states, seed=0
    )
    assert groups.values.shape == (len(states), 4) and all(len(m) == 4 for m in groups.members)
    for (trajectory, t), members in zip(states, groups.members, strict=True):
        for i, member in enumerate(members):
            assert member.branch_turn == t and member.num_turns == t + 1  # horizon 1: one real turn each
            assert member.seed == trajectory.seed
            assert [x.action for x in member.turns[:t]] == [x.action for x in trajectory.turns[:t]]
            assert member.turns[t].observation == trajectory.turns[t].observation
            assert member.turns[t].action == (trajectory.turns[t].action if i == 0 else SIBLING)
        # The clone holds the real RNG state: the real action meets exactly the outcome (lie or not) it met.
        real, replayed = trajectory.turns[t], members[0].turns[t]
        assert (replayed.next_observation, replayed.reward, replayed.done) == (
            real.next_observation,
            real.reward,
            real.done,
        )
    # The siblings were drawn on the real history, three per state, the real action never asked for.
    assert policy.views == [
        ([x.action for x in tr.turns[:t]], tr.turns[t].observation) for tr, t in states for _ in range(3)
    ]


@pytest.mark.parametrize(
    ("env_name", "kwargs"), [("hidden_number", NOISY), ("frozen_lake", {"is_slippery": True})]
)
def test_the_replay_reaches_the_live_state_rng_included(env_name, kwargs):
    recorder = SnapshotRecorder(7)
    real = envs.collect(
        recorder, env_name, env_kwargs=kwargs, group_size=2, n_groups=3, seed=5, progress=False
    )
    # collect builds the envs in trajectory order; map each trajectory to its live env's snapshots.
    env_ids = list(dict.fromkeys(key[0] for key in recorder.live))
    states = [(t, k) for t in real for k in range(t.num_turns)]
    snapshots, steps = replay_snapshots(env_name, kwargs, states)
    assert steps == sum(t.num_turns - 1 for t in real)  # each trajectory replayed once, to its last state
    for trajectory, env_id in zip(real, env_ids, strict=True):
        for k in range(trajectory.num_turns):
            snapshot, observation = snapshots[(id(trajectory), k)]
            assert snapshot == recorder.live[(env_id, k)]  # the RNG's state (slips, lies) included
            assert observation == trajectory.turns[k].observation


def test_a_replay_that_departs_from_the_recording_is_refused(monkeypatch):
    real = envs.collect(
        envs.RandomAgent(1),
        "hidden_number",
        env_kwargs=NOISY,
        group_size=1,
        n_groups=6,
        seed=2,
        progress=False,
    )
    deep = [t for t in real if t.num_turns >= 2]
    trajectory = deep[0]
    tampered = dataclasses.replace(trajectory, turns=list(trajectory.turns))
    tampered.turns[0] = dataclasses.replace(tampered.turns[0], next_observation="guess 9 : lower")
    with pytest.raises(BranchReplayError, match="replaying turn 0"):
        replay_snapshots("hidden_number", NOISY, [(tampered, 1)])
    # An env not determined by its seed and actions (here its RNG reseeded on the side) is caught too.
    reset = HiddenNumberEnv.reset
    monkeypatch.setattr(HiddenNumberEnv, "reset", lambda self, seed: reset(self, seed + 1))
    with pytest.raises(BranchReplayError, match="not determined|replaying"):
        replay_snapshots("hidden_number", NOISY, [(t, t.num_turns - 1) for t in deep])


def test_the_step_advantage_is_zero_when_every_member_has_the_same_value():
    """Siblings that copy the real action meet the same lies from the cloned RNG: equal values, zero step."""
    states = noisy_states()

    class CopyReal:  # horizon 1: one call, G views per state in state order (collect's order)
        def act(self, views):
            assert len(views) == 4 * len(states)
            return [states[i // 4][0].turns[states[i // 4][1]].action for i in range(len(views))]

    groups = brancher("hidden_number", NOISY, siblings=4, horizon=1)(
        CopyReal(), ConstantCritic(0.3), states, seed=0
    )
    assert torch.equal(groups.values, groups.values[:, :1].expand_as(groups.values))
    assert torch.count_nonzero(counterfactual_step_advantages(groups.values)) == 0


def test_extra_real_steps_are_counted_exactly():
    """By hand: hidden number 5 of 1 .. 8, 4 guesses; the real episode guesses 1, 2, 3, 5 (correct at turn 3).

    G = 2 siblings always guessing 1, h = 2, one group at each turn t = 0 .. 3:
    t = 0, 1, 2: every member plays 2 turns (t + 2 <= 4): 3 states x 3 members x 2 = 18;
    t = 3: the real action 5 ends the episode (correct), a sibling's guess 1 uses the last guess: 3 x 1 = 3.
    Branch steps 21; replay: one trajectory to its deepest state t = 3, 3 steps (not 0 + 1 + 2 + 3 = 6).
    """
    kwargs = {"n": 8, "max_turns": 4}
    env = envs.make("hidden_number", **kwargs)
    seed = next(s for s in range(100) if env.reset(s) and env.snapshot().state["hidden"] == 5)
    actions = iter(["guess(1)", "guess(2)", "guess(3)", "guess(5)"])

    class Script:
        def act(self, views):
            return [next(actions) for _ in views]

    real = envs.collect(
        Script(), "hidden_number", env_kwargs=kwargs, group_size=1, group_seeds=[seed], progress=False
    )[0]
    assert [t.reward for t in real.turns] == [0, 0, 0, 1] and real.success
    oracle = brancher("hidden_number", kwargs, siblings=2, horizon=2)
    groups = oracle(Siblings(), ConstantCritic(0.0), [(real, t) for t in range(4)], seed=0)
    assert [[m.num_turns - m.branch_turn for m in members] for members in groups.members] == [
        [2, 2, 2],
        [2, 2, 2],
        [2, 2, 2],
        [1, 1, 1],
    ]
    assert oracle.metrics() == {
        "oracle/branch_env_steps": 21.0,
        "oracle/replay_env_steps": 3.0,
        "oracle/env_steps": 24.0,
    }
    # Values: at t = 3 the real action's return is 1 (done, no bootstrap), a sibling's 0.
    assert groups.values[3].tolist() == [1.0, 0.0, 0.0]


def test_fallback_uncertainty_is_refused_without_a_world_model():
    algo = AlgoConfig(name="real_branch_gigpo", counterfactual=CounterfactualConfig(fallback_uncertainty=1.0))
    oracle = RealEnvBrancher("hidden_number", {}, algo)
    with pytest.raises(ValueError, match="algo.counterfactual.fallback_uncertainty"):
        CounterfactualGiGPO(
            algo, ImaginationConfig(), None, "hidden_number", {}, critic_options=LatentCriticSection(), seed=0, brancher=oracle
        )


def test_an_env_without_snapshots_is_refused(monkeypatch):
    class Bare:  # the Env core only
        name, max_turns = "hidden_number", 6

        def reset(self, seed):
            return "start"

        def step(self, action):
            raise AssertionError("never stepped")

    real = envs.collect(
        envs.RandomAgent(0), "hidden_number", group_size=1, n_groups=1, seed=0, progress=False
    )
    monkeypatch.setattr("imagination.step_groups.real_branch.make", lambda name, **kwargs: Bare())
    with pytest.raises(ValueError, match="snapshot"):
        replay_snapshots("hidden_number", {}, [(real[0], 0)])
