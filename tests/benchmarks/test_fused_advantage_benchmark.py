"""The fused-advantage benchmark: its Monte-Carlo reference is exact where the answer is known, its
scores are the textbook ones, and a tiny run prints every estimator (no quality claims)."""

import math

import pytest
import torch

from benchmarks import fused_advantage as bench
from envs.agent import ExpertAgent
from envs.collect import collect
from envs.trajectory import Trajectory, Turn


def test_reference_advantages_of_a_deterministic_expert_are_zero():
    # With expert probability 1 the agent is the expert, which always finds the number in 1 .. 16
    # within its 6 guesses: V = 1 in every state before the end, so r_t + V(s_{t+1}) - V(s_t) = 0
    # (the last turn: 1 + 0 - 1), with no Monte-Carlo noise.
    trajectories = collect(
        ExpertAgent(),
        bench.ENV,
        group_size=1,
        group_seeds=[3, 11, 40],
        env_kwargs=bench.ENV_KWARGS,
        progress=False,
    )
    reference, stderr = bench.reference_advantages(
        trajectories, bench.MonteCarloValues(1.0, rollouts=3, seed=0)
    )
    assert reference.shape == (sum(t.num_turns for t in trajectories),)
    assert reference.abs().max() == 0.0 and stderr == 0.0


def test_reference_of_a_losing_last_guess_is_minus_its_state_value():
    # The random agent's value before its last allowed guess, with the number not yet pinned down,
    # is the chance of a hit; a wrong final guess then has advantage 0 + 0 - V. Replayed from the seed.
    values = bench.MonteCarloValues(0.0, rollouts=256, seed=0)
    actions = ("guess(1)",) * 5
    v, _ = values(7, actions)
    env = bench.make(bench.ENV, **bench.ENV_KWARGS)

    def hits(k: int) -> bool:
        env.reset(7)
        return env.step(f"guess({k})").reward == 1.0

    hidden = next(k for k in range(1, 17) if hits(k))
    assert hidden != 1
    assert v == pytest.approx(1 / 16, abs=0.04)  # a uniformly random guess in 1 .. 16 hits with 1/16
    wrong = "guess(2)" if hidden != 2 else "guess(3)"
    turns = [
        Turn(
            observation="o",
            action=a,
            next_observation="n",
            reward=0.0,
            done=i == 5,
            valid=True,
            anchor_observation="o",
        )
        for i, a in enumerate([*actions, wrong])
    ]
    trajectory = Trajectory(
        env_name=bench.ENV, env_kwargs=bench.ENV_KWARGS, seed=7, group_id=0, trajectory_id=0, turns=turns
    )
    reference, _ = bench.reference_advantages([trajectory], values)
    assert float(reference[-1]) == pytest.approx(-v)


def test_scores_against_hand_values():
    reference = torch.tensor([1.0, -1.0, 0.02, 2.0], dtype=torch.float64)
    estimate = torch.tensor([0.5, 0.5, -3.0, 0.0])
    # signs scored where |A| >= 0.05: rows 0 (agree), 1 (disagree), 3 (a zero estimate is no sign)
    assert bench.sign_agreement(estimate, reference, 0.05) == pytest.approx(1 / 3)
    assert bench.correlation(2 * reference + 1, reference) == pytest.approx(1.0)
    assert bench.correlation(-reference, reference) == pytest.approx(-1.0)
    assert bench.correlation(torch.ones(4), reference) == 0.0


@pytest.mark.slow
def test_tiny_run_prints_every_estimator(capsys, tmp_path):
    cells = bench.main(
        [
            "--plot",
            str(tmp_path / "plot.png"),
            "--group-sizes",
            "2",
            "--critic-steps",
            "0,3",
            "--batches",
            "1",
            "--groups",
            "3",
            "--critic-episodes",
            "12",
            "--rollouts",
            "2",
        ]
    )
    assert [(c.critic_steps, c.group_size) for c in cells] == [(0, 2), (3, 2)]
    out = capsys.readouterr().out
    assert all(name in out for name in bench.ESTIMATORS) and "fused - evpo on corr: ahead in" in out
    assert (tmp_path / "plot.png").stat().st_size > 0
    for cell in cells:
        assert set(cell.corr) == set(bench.ESTIMATORS)
        assert all(math.isfinite(v) for values in cell.corr.values() for v in values)
        assert 0.0 <= cell.weights[0] <= 1.0 or math.isnan(cell.weights[0])
