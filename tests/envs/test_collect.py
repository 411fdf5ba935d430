"""collect(): group seeding, lock-step batching, cut-offs, anchors, validity, samples and ids, on a fake env."""

from __future__ import annotations

import sys
import types

import pytest

from envs.agent import ExpertAgent, SampledAction
from envs.collect import collect, count_env_steps, group_env_seed
from envs.trajectory import Trajectory, Turn, merge_trajectories, next_ids
from tests.envs.fake_env import INVALID, INVALID_REWARD, CoreGuessEnv, GuessEnv, ScriptedAgent, count_up

# With seed=1, group g resets with env seed 1_000_003 + g. 1_000_003 = 9 * 111_111 + 4, so the
# fake env's targets (seed % 9 + 1) are 5 for group 0 and 6 for group 1.
SEED1_GROUP0_ENV_SEED = 1_000_003


def run(agent, *, n_groups=2, group_size=3, seed=1, **kwargs) -> list[Trajectory]:
    return collect(
        agent, GuessEnv, n_groups=n_groups, group_size=group_size, seed=seed, progress=False, **kwargs
    )


def test_group_env_seed_is_stride_plus_group() -> None:
    assert group_env_seed(1, 0) == SEED1_GROUP0_ENV_SEED
    assert group_env_seed(0, 7) == 7
    assert group_env_seed(2, 1) == 2_000_007


def test_ids_and_group_members_share_initial_state() -> None:
    trajs = run(ScriptedAgent(count_up), n_groups=3, group_size=2, seed=0)
    assert [t.trajectory_id for t in trajs] == [0, 1, 2, 3, 4, 5]
    assert [t.group_id for t in trajs] == [0, 0, 1, 1, 2, 2]
    assert [t.seed for t in trajs] == [0, 0, 1, 1, 2, 2]
    assert [t.turns[0].observation for t in trajs] == [
        f"episode {s}: guess a number from 1 to 9" for s in (0, 0, 1, 1, 2, 2)
    ]
    # seed 0: group g's target is g + 1, so counting up takes g + 1 turns and succeeds.
    assert [t.num_turns for t in trajs] == [1, 1, 2, 2, 3, 3]
    assert all(t.success and t.episode_return == 1.0 and not t.truncated for t in trajs)
    assert all(t.env_name == "fake_guess" and t.source == "real" and t.env_kwargs == {} for t in trajs)
    assert all(t.branch_turn == 0 and t.iteration is None and t.policy_version is None for t in trajs)


def test_turns_are_recorded_exactly() -> None:
    trajs = run(ScriptedAgent(count_up), n_groups=1, group_size=1)
    hints = ["higher"] * 4 + ["correct"]
    expected = [
        Turn(
            observation=f"episode {SEED1_GROUP0_ENV_SEED}: guess a number from 1 to 9"
            if k == 0
            else "higher",
            action=f"guess {k + 1}",
            next_observation=hints[k],
            reward=1.0 if k == 4 else 0.0,
            done=k == 4,
            valid=True,
            anchor_observation="t=0 hint=none" if k == 0 else f"t={k} hint=higher",  # read before acting
        )
        for k in range(5)
    ]
    assert trajs[0].turns == expected
    assert trajs[0].success is True


def test_same_seed_same_trajectories_different_seed_differs() -> None:
    first = run(ScriptedAgent(count_up))
    assert run(ScriptedAgent(count_up)) == first
    other = run(ScriptedAgent(count_up), seed=2)
    assert [t.seed for t in other] != [t.seed for t in first]
    assert [t.turns for t in other] != [t.turns for t in first]


def test_act_is_called_once_per_step_with_every_active_episode() -> None:
    agent = ScriptedAgent(count_up)
    trajs = run(agent, n_groups=2, group_size=3)
    # targets 5 and 6: all six episodes act for five steps, then group 1's three once more.
    assert agent.batch_sizes == [6, 6, 6, 6, 6, 3]
    assert [t.num_turns for t in trajs] == [5, 5, 5, 6, 6, 6]


def test_max_turns_truncates_episodes_without_marking_them_done() -> None:
    trajs = run(ScriptedAgent(count_up), max_turns=3)
    assert [t.num_turns for t in trajs] == [3] * 6
    assert all(not t.turns[-1].done and not t.success and t.truncated for t in trajs)


def test_an_episode_ending_at_the_cap_is_done_not_truncated() -> None:
    # seed=1: targets 5 and 6, so with a cap of 5 group 0 finds its target on the last allowed turn.
    trajs = run(ScriptedAgent(count_up), max_turns=5)
    assert [t.num_turns for t in trajs] == [5] * 6
    assert [t.truncated for t in trajs] == [False] * 3 + [True] * 3
    assert [t.success for t in trajs] == [True] * 3 + [False] * 3


def test_default_max_turns_comes_from_the_env() -> None:
    agent = ScriptedAgent(count_up)
    trajs = collect(agent, lambda: GuessEnv(max_turns=2), n_groups=2, group_size=1, seed=1, progress=False)
    assert [t.num_turns for t in trajs] == [2, 2]
    assert all(t.turns[-1].done and not t.success for t in trajs)  # the env itself ended them
    assert not any(t.truncated for t in trajs)
    assert agent.batch_sizes == [2, 2]


def test_invalid_actions_are_recorded_and_counted() -> None:
    def oops_then_count(view) -> str:
        return "oops" if not view.turns else f"guess {len(view.turns)}"

    trajs = run(ScriptedAgent(oops_then_count), n_groups=2, group_size=1, seed=0)  # targets 1 and 2
    first, second = trajs
    assert [t.valid for t in first.turns] == [False, True]
    assert [t.valid for t in second.turns] == [False, True, True]
    assert first.turns[0].next_observation == INVALID
    assert first.turns[0].reward == INVALID_REWARD
    assert first.episode_return == INVALID_REWARD + 1.0
    assert [t.anchor_observation for t in second.turns] == [
        "t=0 hint=none",
        "t=1 hint=invalid",
        "t=2 hint=higher",
    ]


def test_expert_agent_solves_in_one_turn() -> None:
    trajs = run(ExpertAgent(), n_groups=3, group_size=2)
    assert all(t.num_turns == 1 and t.success for t in trajs)


def test_env_name_is_resolved_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def make(name, **kwargs):
        calls.append((name, kwargs))
        return GuessEnv(**kwargs)

    registry = types.ModuleType("envs.registry")
    registry.make = make
    monkeypatch.setitem(sys.modules, "envs.registry", registry)
    trajs = collect(
        ScriptedAgent(count_up),
        "fake_guess",
        n_groups=2,
        group_size=2,
        seed=1,
        env_kwargs={"max_turns": 2},
        progress=False,
    )
    assert calls == [("fake_guess", {"max_turns": 2})] * 4
    assert all(t.env_kwargs == {"max_turns": 2} and t.num_turns == 2 for t in trajs)


def test_source_is_recorded_and_env_steps_are_counted() -> None:
    real = run(ScriptedAgent(count_up), n_groups=1, group_size=2)  # 5 turns each
    dreamed = run(ScriptedAgent(count_up), n_groups=1, group_size=1, source="imagined")
    assert all(t.source == "imagined" for t in dreamed)
    assert count_env_steps(real + dreamed) == 10
    assert count_env_steps(real + dreamed, source=None) == 15


def test_bad_agent_output_and_arguments_raise() -> None:
    class Short:
        def act(self, views):
            return ["guess 1"] * (len(views) - 1)

    with pytest.raises(ValueError, match="2 actions for 3 views"):
        run(Short(), n_groups=1)
    with pytest.raises(TypeError, match="str or SampledAction, got int"):
        run(ScriptedAgent(lambda view: 3), n_groups=1)
    with pytest.raises(ValueError, match="max_turns"):
        run(ScriptedAgent(count_up), max_turns=0)
    assert run(ScriptedAgent(count_up), n_groups=0) == []


def test_sampled_actions_are_kept_on_their_turns() -> None:
    def sample_on_even_turns(view) -> str | SampledAction:
        k = len(view.turns)
        text = f"guess {k + 1}"
        if k % 2:
            return text
        return SampledAction(
            text, prompt_ids=(100 + k,), action_ids=(k, 2), logprobs=(-0.5, -0.25), ended=True
        )

    (traj,) = run(ScriptedAgent(sample_on_even_turns), n_groups=1, group_size=1)  # target 5: 5 turns
    assert [t.action for t in traj.turns] == ["guess 1", "guess 2", "guess 3", "guess 4", "guess 5"]
    assert [t.sample.prompt_ids if t.sample else None for t in traj.turns] == [
        (100,),
        None,
        (102,),
        None,
        (104,),
    ]
    assert traj.turns[2].sample == SampledAction("guess 3", (102,), (2, 2), (-0.5, -0.25), True)
    assert traj.success


def test_core_only_env_anchors_on_the_observation() -> None:
    agent = ScriptedAgent(count_up)
    (traj,) = collect(agent, CoreGuessEnv, group_seeds=[1], group_size=1, progress=False)  # target 2
    assert [t.anchor_observation for t in traj.turns] == ["episode 1: guess a number from 1 to 9", "higher"]
    assert traj.success


def test_first_ids_offset_groups_and_trajectories() -> None:
    trajs = run(ScriptedAgent(count_up), n_groups=2, group_size=2, first_group_id=10, first_trajectory_id=40)
    assert [t.group_id for t in trajs] == [10, 10, 11, 11]
    assert [t.trajectory_id for t in trajs] == [40, 41, 42, 43]
    assert [t.seed for t in trajs] == [SEED1_GROUP0_ENV_SEED] * 2 + [SEED1_GROUP0_ENV_SEED + 1] * 2
    with pytest.raises(ValueError, match="first ids"):
        run(ScriptedAgent(count_up), first_trajectory_id=-1)


def test_merging_collections_needs_disjoint_id_ranges() -> None:
    first = run(ScriptedAgent(count_up), n_groups=2, group_size=2, seed=1)
    second = run(ScriptedAgent(count_up), n_groups=2, group_size=2, seed=2)
    with pytest.raises(ValueError, match=r"trajectory_id\(s\) \[0, 1, 2, 3\]"):
        merge_trajectories(first, second)
    only_groups_collide = run(
        ScriptedAgent(count_up), n_groups=2, group_size=2, seed=2, first_trajectory_id=4
    )
    with pytest.raises(ValueError, match=r"group_id\(s\) \[0, 1\] occur in more than one"):
        merge_trajectories(first, only_groups_collide)
    assert next_ids(first) == (2, 4)
    group, trajectory = next_ids(first)
    third = run(
        ScriptedAgent(count_up),
        n_groups=2,
        group_size=2,
        seed=2,
        first_group_id=group,
        first_trajectory_id=trajectory,
    )
    merged = merge_trajectories(first, third)
    assert [t.trajectory_id for t in merged] == list(range(8))
    assert [t.group_id for t in merged] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_group_seeds_choose_each_groups_start() -> None:
    # targets seed % 9 + 1: 3, 1 and 9 turns of counting up (9 is cut by the env's 6-turn cap).
    trajs = collect(ScriptedAgent(count_up), GuessEnv, group_seeds=[11, 9, 17], group_size=2, progress=False)
    assert [t.seed for t in trajs] == [11, 11, 9, 9, 17, 17]
    assert [t.group_id for t in trajs] == [0, 0, 1, 1, 2, 2]
    assert [t.num_turns for t in trajs] == [3, 3, 1, 1, 6, 6]
    assert [t.success for t in trajs] == [True] * 4 + [False] * 2
    assert collect(ScriptedAgent(count_up), GuessEnv, group_seeds=[], group_size=2, progress=False) == []


@pytest.mark.parametrize(
    ("starts", "what"),
    [
        ({}, "exactly one of.*got none"),
        ({"n_groups": 1, "seed": 0, "group_seeds": [3]}, r"exactly one of.*\['n_groups', 'group_seeds'\]"),
        ({"n_groups": 1}, "n_groups needs seed"),
        ({"group_seeds": [3], "seed": 0}, "seed is only used with n_groups"),
        ({"n_groups": -1, "seed": 0}, "n_groups >= 0"),
    ],
)
def test_start_states_are_given_exactly_one_way(starts: dict, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        collect(ScriptedAgent(count_up), GuessEnv, group_size=1, progress=False, **starts)
