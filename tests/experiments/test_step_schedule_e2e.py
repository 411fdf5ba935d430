"""A tiny model-based run counted end to end: evaluations at real-step marks, world-model refits after
M new real steps, and the ledger of env steps in ``summary.json`` (the warm start's success checks
included), each recomputed from the run's own per-iteration records or episodes."""

from __future__ import annotations

import json
import time

import pytest

import experiments.build as build_module
from experiments.evaluation import play, summarise
from tests.experiments.in_process import train_in_process
from tests.experiments.test_imagination_e2e import SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import TINY, read_records

pytestmark = pytest.mark.slow

EVAL_EVERY_STEPS = 70
REFIT_EVERY_STEPS = 80
RUN = [*TINY, "algo=grpo", "trainer.iterations=8", "trainer.groups_per_iteration=4", *SMALL_WORLD_MODEL,
       "imagination=dyna", "imagination.ratio=0.5", "imagination.gate_threshold=0",
       f"trainer.eval_every_steps={EVAL_EVERY_STEPS}", f"imagination.refit_every_steps={REFIT_EVERY_STEPS}"]


def test_marks_refits_and_ledger_follow_the_real_steps(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    checks: list[int] = []  # the turns of each warm-start success check, summed from its episodes

    def spy(agent, env_name, env_kwargs=None, *, seeds, max_turns=None, progress=False):
        episodes = play(agent, env_name, env_kwargs, seeds=seeds, max_turns=max_turns)
        checks.append(sum(len(episode.turns) for episode in episodes))
        return summarise(episodes)

    monkeypatch.setattr(build_module, "evaluate", spy)
    cpu_before = time.process_time()
    train_in_process([*RUN, "imagination.fit_on_warm_start=false"], run_dir)
    cpu_spent = time.process_time() - cpu_before
    records = read_records(run_dir)
    steps = [r["charts/real_env_steps"] for r in records]  # iteration 0 at 0 steps, then one per iteration
    evaluated, refitted, at_refit = [], [], 0
    for i in range(1, len(records)):
        marks = [m for m in range(EVAL_EVERY_STEPS, steps[i] + 1, EVAL_EVERY_STEPS) if m > steps[i - 1]]
        if marks or i == len(records) - 1:  # the last iteration always evaluates
            evaluated.append(i)
        if marks:
            assert (records[i]["eval/mark"], records[i]["eval/marks"]) == (marks[-1], len(marks))
        else:
            assert "eval/mark" not in records[i]
        if i == 1 or steps[i] - at_refit >= REFIT_EVERY_STEPS:  # the first fit, then every M new real steps
            refitted.append(i)
            at_refit = steps[i]
    assert [i for i in range(1, len(records)) if "eval/success_rate" in records[i]] == evaluated
    assert [i for i in range(1, len(records)) if "wm/fit_trajectories" in records[i]] == refitted
    assert 1 < len(refitted) < len(records) - 1  # the step trigger both fired and skipped iterations
    assert len(evaluated) < len(records) - 1  # some iterations reached no mark and were not evaluated

    ledger = json.loads((run_dir / "summary.json").read_text())["ledger"]
    episodes = 8  # trainer.eval_episodes of TINY
    eval_records = [r for r in records if "eval/success_rate" in r]
    assert ledger["real_env_steps"] == steps[-1]
    assert ledger["evaluations"] == len(eval_records)
    assert ledger["eval_env_steps"] == round(sum(r["eval/episode_length"] * episodes for r in eval_records))
    assert ledger["world_model_real_steps"] == at_refit  # the real steps before its last fit
    assert ledger["warm_start_expert_steps"] > 0 and ledger["world_model_expert_steps"] == 0
    assert ledger["critic_real_steps"] == 0  # grpo has no critic
    assert len(checks) == 1  # TINY: 5 cloning steps, a check every 5
    assert ledger["warm_start_check_steps"] == sum(checks) > 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert 0 < summary["cpu_seconds"] < cpu_spent  # RL only: the warm start and building come before it


def test_the_world_model_fitted_on_the_warm_start_carries_its_expert_steps(tmp_path):
    run_dir = tmp_path / "run"
    train_in_process([*RUN, "trainer.iterations=1", "imagination.fit_on_warm_start=true"], run_dir)
    ledger = json.loads((run_dir / "summary.json").read_text())["ledger"]
    assert ledger["world_model_expert_steps"] == ledger["warm_start_expert_steps"] > 0


def test_a_run_without_a_warm_start_has_no_check_steps(tmp_path):
    run_dir = tmp_path / "run"
    train_in_process([*RUN, "trainer.iterations=1", "trainer.warm_start.enabled=false"], run_dir)
    ledger = json.loads((run_dir / "summary.json").read_text())["ledger"]
    assert ledger["warm_start_check_steps"] == 0 and ledger["warm_start_expert_steps"] == 0
