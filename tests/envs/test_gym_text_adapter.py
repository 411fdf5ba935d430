"""The gymnasium-style adapter: terminated is done, truncated is Reverie's truncation, the wrapped
env comes from a ``module:callable`` path, and snapshots replay seed plus actions."""

from __future__ import annotations

import random

import pytest

from envs import collect
from envs.gym_toy import GuessNumberText
from envs.registry import make
from envs.replay import ReplayDivergedError
from tests.envs.fake_env import ScriptedAgent

TOY = "envs.gym_toy:GuessNumberText"


def target(seed: int, n: int = 16) -> int:
    return random.Random(seed).randint(1, n)  # the toy's draw, modelled independently


def test_a_time_limit_truncates_and_a_solved_episode_is_done():
    # Always guessing a miss: the toy's time limit of 3 cuts the episode, which is truncated, not done.
    miss = lambda view: "[1]" if target(view.env._log.seed) != 1 else "[2]"  # noqa: E731
    cut = collect(ScriptedAgent(miss), "gym_text", env_kwargs={"entry_point": TOY, "kwargs": {"time_limit": 3}},
                  group_size=1, group_seeds=list(range(6)), progress=False)
    assert all(t.truncated and t.num_turns == 3 and not t.turns[-1].done and not t.success for t in cut)
    solved = collect(ScriptedAgent(lambda view: f"[{target(view.env._log.seed)}]"), "gym_text",
                     env_kwargs={"entry_point": TOY}, group_size=1, group_seeds=[0, 1], progress=False)
    assert all(t.success and t.turns[-1].done and not t.truncated and t.num_turns == 1 for t in solved)


def test_the_adapters_own_turn_cap_also_truncates():
    env = make("gym_text", entry_point=TOY, kwargs={"time_limit": 99}, max_turns=2)
    env.reset(0)
    first, second = env.step("bad"), env.step("bad")
    assert (first.done, first.info["truncated"], first.info["valid"]) == (False, False, False)
    assert (second.done, second.info["truncated"]) == (False, True)


def test_validity_and_success_pass_through():
    env = make("gym_text", entry_point=TOY)
    env.reset(4)
    assert env.step("[0]").info["valid"] is False  # out of range: the toy says invalid
    result = env.step(f"[{target(4)}]")
    assert result.done and result.reward == 1.0 and result.info["success"] and result.info["valid"]


@pytest.mark.parametrize(("entry_point", "message"), [
    ("envs.gym_toy.GuessNumberText", "module:callable"),
    ("envs.no_such_module:Thing", "cannot import"),
    ("envs.gym_toy:NoSuchThing", "no callable"),
])
def test_a_bad_entry_point_fails_naming_the_key(entry_point, message):
    with pytest.raises(ValueError, match=f"env.kwargs.entry_point.*{message}"):
        make("gym_text", entry_point=entry_point)


def test_an_option_the_wrapped_env_refuses_fails_in_one_line_naming_the_key():
    with pytest.raises(ValueError, match=r"^env.kwargs.kwargs: envs.gym_toy:GuessNumberText refused \{'size': 3\} "
                                         r"\(TypeError: .*unexpected keyword argument 'size'\)$") as raised:
        make("gym_text", kwargs={"size": 3})
    assert "\n" not in str(raised.value)


class NotSeeded(GuessNumberText):
    """Ignores the seed: the hidden number comes from an unseeded source."""

    draws = iter(range(1, 10**6))

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed)
        self._target = next(self.draws) % self.n + 1
        return observation, info


def test_restoring_a_not_seed_determined_env_is_refused():
    import tests.envs.test_gym_text_adapter as here

    env = make("gym_text", entry_point=f"{here.__name__}:NotSeeded")
    env.reset(0)
    env.step("[8]")
    snapshot = env.snapshot()
    with pytest.raises(ReplayDivergedError, match="not determined by its reset seed"):
        for _ in range(20):  # the hint after [8] differs for some other hidden number
            env.restore(snapshot)


def test_observations_must_be_text():
    class Numeric(GuessNumberText):
        def reset(self, *, seed=None, options=None):
            return 3, {}

    import tests.envs.test_gym_text_adapter as here

    here.Numeric = Numeric
    env = make("gym_text", entry_point=f"{here.__name__}:Numeric")
    with pytest.raises(TypeError, match="text envs return str"):
        env.reset(0)
