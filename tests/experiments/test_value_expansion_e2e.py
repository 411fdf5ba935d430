"""``imagination.mode=value_expansion`` in the training loop: the update's rows are real turns only, the
imagined episodes continue this iteration's real turns within the episode budget, and the critic's
targets on those turns become the MVE targets; settings it cannot serve are refused up front."""

from __future__ import annotations

import pytest
import torch

import experiments.advantage_estimation as advantage_module
import experiments.imagining as imagining_module
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import BASE, MODEL_BASED

pytestmark = pytest.mark.slow

VALUE_EXPANSION = [
    *BASE,
    "algo=ppo_turn",
    *MODEL_BASED,
    "imagination.ratio=0.75",
    "trainer.groups_per_iteration=4",
    "imagination.mode=value_expansion",
]


def test_policy_rows_are_real_and_real_targets_are_expanded(tmp_path, monkeypatch):
    sources, expansions, imagined_sizes = [], [], []
    build, expand, imagine = (
        advantage_module.build_rollout_batch,
        advantage_module.expanded_returns,
        imagining_module.imagine_groups,
    )

    def spy_build(trajectories, **kwargs):
        sources.append({t.source for t in trajectories})
        return build(trajectories, **kwargs)

    def spy_expand(returns, row_keys, trajectories, imagined, **kwargs):
        out = expand(returns, row_keys, trajectories, imagined, **kwargs)
        expansions.append(
            (returns.clone(), out, {id(t) for t, _ in imagined.branches} <= {id(t) for t in trajectories})
        )
        return out

    def spy_imagine(*args, **kwargs):
        out = imagine(*args, **kwargs)
        imagined_sizes.append(len(out.trajectories))
        return out

    monkeypatch.setattr(advantage_module, "build_rollout_batch", spy_build)
    monkeypatch.setattr(advantage_module, "expanded_returns", spy_expand)
    monkeypatch.setattr(imagining_module, "imagine_groups", spy_imagine)
    train_in_process(VALUE_EXPANSION, tmp_path / "run")
    assert sources == [{"real"}, {"real"}]  # two iterations, no imagined row in either update
    assert imagined_sizes and all(
        0 < n <= 3 * 4 for n in imagined_sizes
    )  # 3 imagined groups of 4: the budget
    assert expansions, "the critic's targets were never expanded"
    for before, after, branched_from_the_batch in expansions:
        assert branched_from_the_batch  # continuations start from this update's real episodes
        assert before.shape == after.shape and not torch.equal(before, after)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["algo=grpo"], "has no critic"),
        (["algo=ppo_turn", "imagination.warmup_iterations=1"], "warmup_iterations"),
    ],
)
def test_refused_before_any_work(tmp_path, extra, message):
    overrides = [*BASE, *MODEL_BASED, "imagination.mode=value_expansion", *extra]
    with pytest.raises(ValueError, match=message):
        train_in_process(overrides, tmp_path / "run")
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
