"""``env=gym_text`` on a real gymnasium env, made by ``gymnasium.make`` with gymnasium's own wrappers:
``TimeLimit``'s truncation is Reverie's truncation, the expert behind the wrappers is found, and the
episode trains a collect / snapshot round like any built-in env. Skipped without the ``gym`` extra."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("gymnasium", reason="the gym extra is not installed: pip install -e '.[gym]'")

from envs import ExpertAgent, collect  # noqa: E402
from envs.registry import make  # noqa: E402
from tests.envs.fake_env import ScriptedAgent  # noqa: E402

GYM = {"entry_point": "gymnasium:make",
       "kwargs": {"id": "tests.envs.gymnasium_toy:GuessNumberText-v0", "max_episode_steps": 3}}


def target(seed: int, n: int = 16) -> int:
    return random.Random(seed).randint(1, n)  # the toy's draw, modelled independently


def test_gymnasium_time_limit_truncates_and_a_solved_episode_is_done():
    miss = lambda view: "[1]" if target(view.env._log.seed) != 1 else "[2]"  # noqa: E731
    cut = collect(ScriptedAgent(miss), "gym_text", env_kwargs=GYM, group_size=1, group_seeds=list(range(4)),
                  progress=False)
    assert all(t.truncated and t.num_turns == 3 and not t.turns[-1].done and not t.success for t in cut)
    solved = collect(ScriptedAgent(lambda view: f"[{target(view.env._log.seed)}]"), "gym_text", env_kwargs=GYM,
                     group_size=1, group_seeds=[0, 1], progress=False)
    assert all(t.success and t.turns[-1].done and not t.truncated for t in solved)


def test_the_expert_behind_gymnasiums_wrappers_is_used():
    env = make("gym_text", **GYM)
    assert env.capabilities.expert and env.capabilities.random_action
    # Binary search over 1 .. 16 needs up to 5 guesses; with gymnasium's limit of 3 it solves the
    # targets it reaches within 3 (8, 4, 12, 2, 6, 10, 14) and is cut off on the rest.
    episodes = collect(ExpertAgent(), "gym_text", env_kwargs=GYM, group_size=1, group_seeds=list(range(40)),
                       progress=False)
    within_three = {8, 4, 12, 2, 6, 10, 14}
    assert [t.success for t in episodes] == [target(t.seed) in within_three for t in episodes]


def test_a_snapshot_of_a_gymnasium_env_replays_to_the_same_state():
    env = make("gym_text", **GYM)
    env.reset(5)
    env.step("[8]")
    snapshot = env.snapshot()
    after = env.step("[3]")
    other = make("gym_text", **GYM)
    other.restore(snapshot)
    again = other.step("[3]")
    assert (again.observation, again.reward, again.done, again.info["truncated"]) == (
        after.observation, after.reward, after.done, after.info["truncated"])
