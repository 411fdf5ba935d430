"""A scheduled ratio follows the budget that ends the run: with a real-step budget far below what
``trainer.iterations`` allows, the schedule still runs its course by the last iteration."""

from __future__ import annotations

import pytest

import experiments.train as train_module
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import BASE, MODEL_BASED
from tests.experiments.test_train_e2e import read_records

pytestmark = pytest.mark.slow


def test_the_ratio_schedule_runs_over_the_real_step_budget(tmp_path, monkeypatch):
    spent_seen = []
    real_scheduled_ratio = train_module.scheduled_ratio

    def recording(start, end, spent):
        spent_seen.append(spent)
        return real_scheduled_ratio(start, end, spent)

    monkeypatch.setattr(train_module, "scheduled_ratio", recording)
    overrides = [*BASE, "algo=grpo", *MODEL_BASED, "imagination.ratio_end=0.1", "trainer.iterations=200",
                 "trainer.max_env_steps=40", "trainer.eval_every=100"]
    train_in_process(overrides, tmp_path / "run")
    iterations = [r for r in read_records(tmp_path / "run") if "time/collect_s" in r]  # not the evaluations
    steps = [r["charts/real_env_steps"] for r in iterations]
    assert len(spent_seen) == len(steps) >= 2  # one schedule reading per iteration, before it collects
    # At the start of each iteration, the share of the 40-step budget already spent (iteration 1: none).
    assert spent_seen == pytest.approx([0.0] + [min(s / 40, 1.0) for s in steps[:-1]])
    assert spent_seen[-1] > 10 * (len(steps) - 1) / 199  # far past the iterations' share
