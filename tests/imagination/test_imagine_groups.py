"""``imagine_groups``: one group per branch point, the real prefix kept, halts counted."""

from __future__ import annotations

import envs
from imagination.config import ImaginationConfig
from imagination.imagine import imagine_groups
from tests.imagination.conftest import tiny_model


class GuessThree:
    """A text agent that needs nothing from the env (a dream env has no scripted extras)."""

    def act(self, views):
        return ["guess(3)" for _ in views]


def real_episodes() -> list[envs.Trajectory]:
    return envs.collect(envs.RandomAgent(0), "hidden_number", group_size=1, n_groups=3, seed=5, progress=False)


def test_one_group_per_branch_with_the_real_prefix_and_ids_in_range():
    real = real_episodes()
    branches = [(real[0], 0), (real[1], 2)]
    out = imagine_groups(GuessThree(), tiny_model("hidden_number"), "hidden_number", {}, branches,
                         group_size=3, config=ImaginationConfig(ratio=0.5), seed=0,
                         first_group_id=100, first_trajectory_id=200)
    assert [len(g) for g in out.groups] == [3, 3] and out.branches == branches
    assert [t.trajectory_id for t in out.trajectories] == list(range(200, 206))
    assert {t.group_id for t in out.groups[1]} == {101}
    for trajectory in out.groups[1]:
        assert trajectory.source == "imagined" and trajectory.branch_turn == 2
        assert [t.action for t in trajectory.turns[:2]] == [t.action for t in real[1].turns[:2]]
    assert envs.count_env_steps(out.trajectories, source="real") == 0


def test_every_episode_halts_when_any_uncertainty_is_too_much():
    real = real_episodes()
    config = ImaginationConfig(ratio=0.5, halt_uncertainty=0.0)  # an untrained ensemble always disagrees
    out = imagine_groups(GuessThree(), tiny_model("hidden_number"), "hidden_number", {},
                         [(real[0], 0)], group_size=4, config=config, seed=0)
    assert out.halted == 4 and out.halted_share == 1.0
    assert all(t.truncated and t.num_turns == 1 for t in out.trajectories)
    calm = imagine_groups(GuessThree(), tiny_model("hidden_number"), "hidden_number", {},
                          [(real[0], 0)], group_size=4, config=ImaginationConfig(ratio=0.5), seed=0)
    assert calm.halted == 0


def test_no_branch_points_no_work():
    out = imagine_groups(GuessThree(), tiny_model("hidden_number"), "hidden_number", {}, [],
                         group_size=4, config=ImaginationConfig(ratio=0.5), seed=0)
    assert out.trajectories == [] and out.groups == []
