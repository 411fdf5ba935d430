"""An env that raises inside ``step``: by default the error propagates; with ``on_env_error`` the
episode is marked failed (reported with its seed), left out, and the other episodes go on."""

from __future__ import annotations

import pytest

from envs.collect import EnvFailure, collect
from tests.envs.fake_env import GuessEnv, ScriptedAgent, count_up


class BrokenGuessEnv(GuessEnv):
    """``GuessEnv`` whose step raises on its third turn when reset with ``seed`` 11."""

    def reset(self, seed: int) -> str:
        self.seed = seed
        return super().reset(seed)

    def step(self, action: str):
        if self.seed == 11 and self.turns_taken == 2:
            raise ValueError("simulator crashed")
        return super().step(action)


def run(**kwargs):
    # count_up guesses 1, 2, 3, ...: seeds 10 and 11 hide 2 and 3, so unbroken they end on turns 2 and 3.
    return collect(
        ScriptedAgent(count_up),
        lambda: BrokenGuessEnv(max_turns=6),
        group_seeds=[10, 11, 12],
        group_size=2,
        progress=False,
        **kwargs,
    )


def test_by_default_the_error_propagates() -> None:
    with pytest.raises(ValueError, match="simulator crashed"):
        run()


def test_a_failing_episode_is_reported_with_its_seed_and_the_others_go_on() -> None:
    failures: list[EnvFailure] = []
    trajs = run(on_env_error=failures.append, first_trajectory_id=100)
    assert [t.trajectory_id for t in trajs] == [100, 101, 104, 105]  # ids 102 and 103 (seed 11) are used up
    assert [t.seed for t in trajs] == [10, 10, 12, 12]
    assert all(t.success for t in trajs) and [t.num_turns for t in trajs] == [2, 2, 4, 4]  # targets 2 and 4
    assert [(f.trajectory.seed, f.trajectory.trajectory_id, f.turn, f.action) for f in failures] == [
        (11, 102, 2, "guess 3"),
        (11, 103, 2, "guess 3"),
    ]
    assert [t.action for t in failures[0].trajectory.turns] == [
        "guess 1",
        "guess 2",
    ]  # played before the error
    assert "seed 11" in failures[0].describe() and "ValueError: simulator crashed" in failures[0].describe()
