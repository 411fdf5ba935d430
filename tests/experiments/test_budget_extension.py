"""Extending a run's budget on resume: the comparison rule on hand-made configs, which checkpoint the
old budget did not shape, which one the loop keeps, and ``resume_config`` on a hand-made run folder."""

from __future__ import annotations

import math

import pytest
import yaml

from envs import TrajectoryStore
from experiments.budget_extension import (
    budget_refusal,
    extended_keys,
    first_shaped_iteration,
    pinned_checkpoint,
    usable_for_extension,
)
from experiments.checkpoint import Checkpoint, LoopState, list_checkpoints, save_checkpoint


def record(iterations=10, max_env_steps=None, time_budget_s=None, ratio_end=None) -> dict:
    return {"seed": 0, "trainer": {"iterations": iterations, "max_env_steps": max_env_steps,
                                   "time_budget_s": time_budget_s, "group_size": 4},
            "imagination": {"ratio": 0.5, "ratio_end": ratio_end}}


def test_a_budget_may_grow_and_never_shrink():
    assert extended_keys(record(), record()) == [] and budget_refusal(record(), record()) is None
    assert extended_keys(record(max_env_steps=100), record(max_env_steps=200)) == ["trainer.max_env_steps"]
    assert budget_refusal(record(max_env_steps=100), record(max_env_steps=200)) is None
    assert budget_refusal(record(max_env_steps=100), record(max_env_steps=None)) is None  # unlimited is larger
    assert budget_refusal(record(iterations=10), record(iterations=11)) is None
    assert budget_refusal(record(time_budget_s=60.0), record(time_budget_s=90.0)) is None
    assert budget_refusal(record(max_env_steps=100), record(max_env_steps=99)) == (
        "trainer.max_env_steps can not be lowered on resume: saved 100, now 99 (a budget only extends)")
    assert budget_refusal(record(max_env_steps=None), record(max_env_steps=5)) == (
        "trainer.max_env_steps can not be lowered on resume: saved null, now 5 (a budget only extends)")
    assert budget_refusal(record(iterations=10), record(iterations=9)).startswith("trainer.iterations can not be")
    # other keys are not this rule's: the config comparison names them
    assert extended_keys(record(), {**record(), "seed": 1}) == []


def test_a_schedule_spread_over_the_budget_refuses_extending_it():
    refusal = ("trainer.max_env_steps can not be extended with imagination.ratio_end set: the ratio schedule "
               "is spread over the budget")
    assert budget_refusal(record(max_env_steps=100, ratio_end=0.9), record(max_env_steps=200, ratio_end=0.9)) == refusal
    assert budget_refusal(record(ratio_end=0.9), record(iterations=20, ratio_end=0.9)).startswith(
        "trainer.iterations can not be extended with imagination.ratio_end set")
    # the schedule reads iterations and real steps, never the clock
    assert budget_refusal(record(time_budget_s=60.0, ratio_end=0.9), record(time_budget_s=90.0, ratio_end=0.9)) is None
    assert budget_refusal(record(ratio_end=0.9), record(ratio_end=0.9)) is None  # a plain resume


def rows(*steps: int) -> list[dict]:
    return [{"iteration": i, "charts/real_env_steps": s} for i, s in enumerate(steps)]


def test_the_first_shaped_iteration_by_hand():
    # no step budget: only the last iteration (it always evaluates)
    assert first_shaped_iteration(rows(0, 30, 60), iterations=10, max_env_steps=None, most_steps=48) == 10
    # 100 steps, 48 at most per iteration: iteration 3 starts at 60 and could reach 108 >= 100
    assert first_shaped_iteration(rows(0, 30, 60, 90), iterations=10, max_env_steps=100, most_steps=48) == 3
    # exactly reaching the budget counts (may_reach_budget's >=): iteration 2 starts at 52, 52 + 48 = 100
    assert first_shaped_iteration(rows(0, 52, 90), iterations=10, max_env_steps=100, most_steps=48) == 2
    assert first_shaped_iteration(rows(0), iterations=10, max_env_steps=40, most_steps=48) == 1
    assert first_shaped_iteration(rows(0, 1, 2), iterations=2, max_env_steps=100, most_steps=48) == 2


def loop(iteration: int, history: list[dict], stopped: bool = False) -> LoopState:
    return LoopState(iteration=iteration, real_env_steps=history[-1]["charts/real_env_steps"], warm_start_env_steps=0,
                     next_ids={}, history=history, metrics_lines=0, store_trajectories=0, elapsed_s=0.0,
                     stopped=stopped)


def test_which_checkpoints_an_extension_may_start_from():
    history = rows(0, 30, 60, 90)
    assert usable_for_extension(loop(2, history[:3]), 10, 100, 48)  # iteration 3 is the first shaped
    assert not usable_for_extension(loop(3, history), 10, 100, 48)
    assert not usable_for_extension(loop(2, history[:3], stopped=True), 10, None, 48)  # its stop evaluated
    assert not usable_for_extension(loop(3, history), 3, None, 48)  # the last iteration evaluated
    assert usable_for_extension(loop(3, history), 4, math.inf, 48)


class Run:  # the keys pinned_checkpoint reads
    class trainer:  # noqa: N801 - mirrors the config's attribute path
        iterations, max_env_steps, max_turns, groups_per_iteration, group_size = 10, 100, 6, 2, 4

    class algo:  # noqa: N801
        dynamic_sampling, max_resample_rounds = False, 0


def test_the_loop_keeps_the_newest_unshaped_checkpoint(tmp_path):
    history = rows(0, 30, 60, 90, 120)  # 2 groups x 4 episodes x 6 turns: 48 steps at most; iteration 3 shaped
    for iteration in (1, 2):
        save_checkpoint(tmp_path, Checkpoint({}, loop(iteration, history[:iteration + 1]), {}))
    assert pinned_checkpoint(tmp_path, 2, False, history[:3], Run) is None  # unshaped itself: nothing to pin
    assert pinned_checkpoint(tmp_path, 2, True, history[:3], Run) == tmp_path / "iteration_00001"  # stopped
    save_checkpoint(tmp_path, Checkpoint({}, loop(3, history[:4]), {}))  # keep=2: iteration 1 goes
    assert pinned_checkpoint(tmp_path, 4, False, history, Run) == tmp_path / "iteration_00002"
    pinned = pinned_checkpoint(tmp_path, 4, True, history, Run)
    save_checkpoint(tmp_path, Checkpoint({}, loop(4, history), {}), pinned=pinned)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["iteration_00002", "iteration_00003", "iteration_00004"]


def test_resume_config_extends_a_finished_run_and_refuses_a_schedule(tmp_path):
    from experiments.config import validate
    from experiments.resume import config_record, resume_config
    from tests.experiments.in_process import compose_config

    def saved_run(folder, *original):
        saved = config_record(validate(compose_config(list(original))))
        for iteration in (2, 3):
            save_checkpoint(folder / "checkpoints", Checkpoint(saved, loop(iteration, rows(*range(iteration + 1))), {}))
        TrajectoryStore(folder / "trajectories")
        (folder / ".hydra").mkdir()
        (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(original)))
        for name in ("done", "summary.json"):
            (folder / name).write_text("{}")

    def resumed(folder, *overrides):
        given = [f"resume={folder}", *overrides]
        return validate(resume_config(compose_config(given), given, validate))

    original = ["experiment=learning_check", "algo=grpo", "seed=3", "trainer.iterations=3"]
    saved_run(tmp_path / "plain", *original)
    with pytest.raises(SystemExit, match="has finished"):
        resumed(tmp_path / "plain")
    with pytest.raises(SystemExit, match="trainer.iterations can not be lowered on resume: saved 3, now 2"):
        resumed(tmp_path / "plain", "trainer.iterations=2")
    run = resumed(tmp_path / "plain", "trainer.iterations=5")
    assert run.trainer.iterations == 5 and run.seed == 3 and run.algo.name == "grpo"
    plain = tmp_path / "plain"
    # iteration 3 was the last (it evaluated): the extension goes on from iteration 2, the run unfinished
    assert [p.name for p in list_checkpoints(plain / "checkpoints")] == ["iteration_00002"]
    assert not (plain / "done").exists() and not (plain / "summary.json").exists()
    assert yaml.safe_load((plain / ".hydra" / "overrides.yaml").read_text()) == [*original[:-1], "trainer.iterations=5"]
    assert yaml.safe_load((plain / ".hydra" / "overrides.original.yaml").read_text()) == original
    # the full original command with the larger budget is the same extension
    assert resumed(plain, *original[:-1], "trainer.iterations=6").trainer.iterations == 6

    scheduled = [*original, "imagination=dyna", "imagination.ratio_end=0.9"]
    saved_run(tmp_path / "scheduled", *scheduled)
    with pytest.raises(SystemExit, match=r"^resume=\S+: trainer.iterations can not be extended with "
                                         "imagination.ratio_end set: the ratio schedule is spread over the budget$"):
        resumed(tmp_path / "scheduled", "trainer.iterations=5")
    assert len(list_checkpoints(tmp_path / "scheduled" / "checkpoints")) == 2  # nothing touched
