"""The step-group measures against hand-counted groups, and the benchmark's CLI on a tiny budget."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks.step_group_measures import (
    exact_match_group_sizes,
    hgpo_group_sizes,
    share,
    sign_agreement,
    spearman,
    wilson_interval,
)


def test_exact_match_groups_are_per_episode_group_and_anchor():
    sizes = exact_match_group_sizes([0, 0, 0, 1, 1], ["a", "a", "b", "a", "c"])
    assert sizes.tolist() == [2, 2, 1, 1, 1]  # group 1's "a" never meets group 0's


def test_hgpo_group_sizes_by_hand():
    # Two trajectories of one episode group: anchors x y z and x y w; a third, alone, in group 1.
    group_ids = [0, 0, 0, 0, 0, 0, 1]
    traj_ids = [10, 10, 10, 11, 11, 11, 12]
    steps = [0, 1, 2, 0, 1, 2, 0]
    anchors = ["x", "y", "z", "x", "y", "w", "x"]
    # Level 1 (the anchor): x and y shared (2), z and w alone; level 2 (x,y) shared by the second
    # rows; the third rows' histories (x,y,z) and (x,y,w) differ. The lone trajectory has only 1s.
    assert hgpo_group_sizes(group_ids, traj_ids, steps, anchors).tolist() == [2, 2, 1, 2, 2, 1, 1]
    # The base group (the episode group) holds 6 and 1 rows.
    assert hgpo_group_sizes(group_ids, traj_ids, steps, anchors, base_group=True).tolist() == [6] * 6 + [1]


def test_share_wilson_sign_agreement_and_spearman():
    assert share(torch.tensor([True, False, True, True])) == 0.75 and math.isnan(share(torch.tensor([])))
    low, high = wilson_interval(8, 10)
    # Wilson 95% for 8/10, worked from the formula: centre 0.7167, half-width 0.2266.
    assert (low, high) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    predicted = torch.tensor([1.0, -2.0, 0.0, 3.0, -1.0])
    measured = torch.tensor([0.5, 1.0, 2.0, 0.0, -3.0])
    assert sign_agreement(predicted, measured) == (2, 3)  # entries 0 and 4 agree, 1 does not; 2, 3 skipped
    assert spearman(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([10.0, 30.0, 20.0])) == pytest.approx(0.5)
    assert spearman(torch.tensor([1.0, 1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])) == pytest.approx(
        math.sqrt(3) / 2
    )
    assert math.isnan(spearman(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 2.0])))


@pytest.mark.slow
def test_the_benchmark_prints_every_grouping_and_the_sign_agreement(capsys):
    from benchmarks.step_groups import main

    main(
        [
            "--envs",
            "hidden_number",
            "--groups",
            "2",
            "--group-size",
            "4",
            "--experts",
            "16",
            "--bc-steps",
            "5",
            "--wm-steps",
            "5",
            "--critic-steps",
            "5",
            "--siblings",
            "2",
            "--sign-states",
            "3",
            "--sign-rollouts",
            "4",
        ]
    )
    out = capsys.readouterr().out
    for name in (
        "gigpo (exact anchor)",
        "hgpo (recipe default)",
        "hgpo (base_group)",
        "counterfactual (G=2)",
        "real-branch oracle (G=2)",
    ):
        assert name in out
    assert "Monte-Carlo oracle: 4 real rollouts per member" in out and "sign agreement" in out
    assert "real-branch oracle h=2" in out and "extra real steps/step" in out
