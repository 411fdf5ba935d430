"""A step that hangs past ``step_timeout_s`` is handled like one that raises: with ``on_env_error`` the
episode is dropped and reported, the others go on; without it the timeout propagates."""

from __future__ import annotations

import time

import pytest

from envs.collect import EnvFailure, collect
from envs.step_timeout import EnvStepTimeout
from tests.envs.fake_env import ScriptedAgent, count_up
from tests.envs.hanging_env import RELEASE, HangingGuessEnv


@pytest.fixture(autouse=True)
def release_hung_steps():
    RELEASE.clear()
    yield
    RELEASE.set()


def run(**kwargs):
    return collect(ScriptedAgent(count_up), lambda: HangingGuessEnv(max_turns=6), group_seeds=[10, 11, 12],
                   group_size=1, progress=False, step_timeout_s=0.3, **kwargs)


def test_a_hung_step_drops_its_episode_and_the_others_go_on():
    failures: list[EnvFailure] = []
    start = time.monotonic()
    trajectories = run(on_env_error=failures.append)
    assert time.monotonic() - start < 10  # the hang is 60 s
    assert [t.seed for t in trajectories] == [10, 12] and all(t.success for t in trajectories)
    (failure,) = failures
    assert (failure.trajectory.seed, failure.turn, failure.action) == (11, 2, "guess 3")
    assert isinstance(failure.error, EnvStepTimeout) and "did not return within 0.3 s" in failure.describe()


def test_without_an_error_handler_the_timeout_propagates():
    with pytest.raises(EnvStepTimeout, match="trainer.env_step_timeout_s"):
        run()


def test_an_exception_inside_a_timed_step_is_the_envs_own():
    class Broken(HangingGuessEnv):
        def step(self, action):
            raise KeyError("simulator bug")

    with pytest.raises(KeyError, match="simulator bug"):
        collect(ScriptedAgent(count_up), lambda: Broken(), group_seeds=[1], group_size=1, progress=False,
                step_timeout_s=5.0)
