"""``task_start_points``: branch points at training tasks' start states (``imagination.open_at_start``),
checked against the split rules written out here (seed range, sha256 of the task key) and against
the env's own reset."""

from __future__ import annotations

import hashlib
import math

import envs
from envs.registry import make
from imagination.bias import imagined_minus_real_return
from imagination.config import ImaginationConfig
from imagination.dream_starts import task_start_points
from imagination.imagine import imagine_groups
from tests.imagination.conftest import tiny_model
from tests.imagination.test_imagine_groups import GuessThree

LAKE = {"size": 4}


def held_out(task_key: str) -> bool:
    """The eval split's rule by hand: sha256 of the key, its first 8 bytes read as a fraction, below 0.2."""
    return int.from_bytes(hashlib.sha256(task_key.encode()).digest()[:8], "big") < 0.2 * 2**64


def test_task_starts_are_turnless_training_tasks_as_many_as_asked():
    points = task_start_points("frozen_lake", LAKE, 12, seed=7)
    assert len(points) == 12 and len({t.seed for t, _ in points}) == 12  # distinct tasks' seeds
    env = make("frozen_lake", **LAKE)
    for trajectory, k in points:
        assert k == 0 and trajectory.turns == [] and trajectory.branch_turn == 0
        assert (trajectory.env_name, trajectory.env_kwargs, trajectory.source) == ("frozen_lake", LAKE, "real")
        assert 0 <= trajectory.seed < 2**31  # the training seed range
        env.reset(trajectory.seed)
        assert not held_out(env.task_key())  # never a task held out for evaluation
    assert task_start_points("frozen_lake", LAKE, 0, seed=7) == []


def test_task_starts_are_a_function_of_the_seed():
    seeds = [t.seed for t, _ in task_start_points("hidden_number", {}, 5, seed=3)]
    assert seeds == [t.seed for t, _ in task_start_points("hidden_number", {}, 5, seed=3)]
    assert seeds != [t.seed for t, _ in task_start_points("hidden_number", {}, 5, seed=4)]


def test_a_dream_from_a_task_start_begins_at_the_real_reset_and_plays_no_real_step():
    points = task_start_points("hidden_number", {}, 2, seed=1)
    out = imagine_groups(GuessThree(), tiny_model("hidden_number"), "hidden_number", {}, points,
                         group_size=2, config=ImaginationConfig(ratio=0.5), seed=0, max_turns=2)
    assert [len(g) for g in out.groups] == [2, 2]
    for (start, _), group in zip(points, out.groups, strict=True):
        first = make("hidden_number").reset(start.seed)
        for trajectory in group:
            assert trajectory.seed == start.seed and trajectory.branch_turn == 0
            assert trajectory.turns[0].observation == first
    assert envs.count_env_steps(out.trajectories, source="real") == 0  # the ledger counts none


def test_the_return_gap_leaves_task_starts_out():
    real = envs.collect(envs.RandomAgent(0), "hidden_number", group_size=1, n_groups=1, seed=5, progress=False)[0]
    start = task_start_points("hidden_number", {}, 1, seed=1)[0]
    out = imagine_groups(GuessThree(), tiny_model("hidden_number"), "hidden_number", {}, [(real, 0), start],
                         group_size=2, config=ImaginationConfig(ratio=0.5), seed=0, max_turns=2)
    from_real = sum(t.episode_return for t in out.groups[0]) / 2 - sum(turn.reward for turn in real.turns)
    assert imagined_minus_real_return(out.branches, out.groups) == from_real  # the task start has no real return
    assert math.isnan(imagined_minus_real_return(out.branches[1:], out.groups[1:]))  # nothing left
