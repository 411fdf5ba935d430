"""The loop's carried state and its checkpoint record: the record's ``imagination`` keys are a fixed
format (checkpoints written earlier must still resume), and a record read back restores every counter."""

from __future__ import annotations

import dataclasses
import json
import random
import time

from envs import TrajectoryStore
from experiments.checkpoint import LoopState
from experiments.loop_progress import LoopProgress
from imagination.config import ImaginationConfig
from tests.experiments.test_resume import trajectories

# The imagination record as checkpoints have always stored it, written out by hand.
SAVED_IMAGINATION = {
    "gate": {"threshold": 0.5, "is_open": True},
    "real_credit": 0.25,
    "warmup_left": 1,
    "imagined_groups_total": 3,
    "groups_total": 7,
    "world_model_fitted": True,
    "recent_ids": [3, 4],
    "counterfactual_recent_ids": [1],
}


def test_a_fresh_loop_takes_its_settings_and_counts_ids_on():
    progress = LoopProgress.fresh(
        ImaginationConfig(gate_threshold=0.5, recent_trajectories=2, warmup_iterations=3),
        branch_seed=7,
        warm_start_env_steps=11,
    )
    assert (progress.gate.threshold, progress.gate.is_open, progress.recent.maxlen) == (0.5, False, 2)
    assert (progress.warmup_left, progress.warm_start_env_steps, progress.real_env_steps) == (3, 11, 0)
    assert progress.branch_rng.random() == random.Random(7).random()
    progress.take_ids(2, 8)
    progress.take_ids(1, 3)
    assert progress.next_ids == {"group": 3, "trajectory": 11}


def test_the_checkpoint_record_keeps_its_format():
    progress = LoopProgress.fresh(
        ImaginationConfig(gate_threshold=0.5), branch_seed=0, warm_start_env_steps=5
    )
    progress.gate.is_open, progress.real_credit, progress.warmup_left = True, 0.25, 1
    progress.imagined_groups_total, progress.groups_total, progress.world_model_fitted = 3, 7, True
    progress.recent.extend(trajectories(3, 2))
    progress.real_env_steps, progress.next_ids = 40, {"group": 9, "trajectory": 30}
    loop = progress.loop_state(
        2, stopped=False, metrics_lines=3, store_trajectories=5, counterfactual_recent=trajectories(1, 1)
    )
    assert list(loop.imagination.items()) == list(SAVED_IMAGINATION.items())
    assert (loop.iteration, loop.real_env_steps, loop.warm_start_env_steps) == (2, 40, 5)
    assert (loop.metrics_lines, loop.store_trajectories, loop.stopped) == (3, 5, False)
    assert loop.next_ids == {"group": 9, "trajectory": 30} and loop.next_ids is not progress.next_ids
    no_counterfactual = progress.loop_state(
        2, stopped=True, metrics_lines=3, store_trajectories=5, counterfactual_recent=None
    )
    assert no_counterfactual.imagination["counterfactual_recent_ids"] == [] and no_counterfactual.stopped


def test_a_saved_record_restores_every_counter(tmp_path):
    store = TrajectoryStore(tmp_path / "trajectories")
    store.append(trajectories(0, 5))
    saved = LoopState(
        iteration=2,
        real_env_steps=40,
        warm_start_env_steps=5,
        next_ids={"group": 9, "trajectory": 30},
        history=[{"iteration": 0}],
        metrics_lines=3,
        store_trajectories=5,
        elapsed_s=12.0,
        imagination=SAVED_IMAGINATION,
    )
    loop = LoopState(**json.loads(json.dumps(dataclasses.asdict(saved))))  # as a checkpoint reads it back
    progress = LoopProgress.fresh(
        ImaginationConfig(gate_threshold=0.9), branch_seed=0, warm_start_env_steps=0
    )
    progress.restore(loop, store)
    assert (progress.gate.threshold, progress.gate.is_open) == (0.5, True)
    assert (progress.real_credit, progress.warmup_left, progress.world_model_fitted) == (0.25, 1, True)
    assert (progress.imagined_groups_total, progress.groups_total) == (3, 7)
    assert (progress.real_env_steps, progress.warm_start_env_steps, progress.history) == (
        40,
        5,
        [{"iteration": 0}],
    )
    assert progress.next_ids == {"group": 9, "trajectory": 30} and progress.next_ids is not loop.next_ids
    assert [t.trajectory_id for t in progress.recent] == [3, 4]
    resumed = progress.loop_state(
        2, stopped=False, metrics_lines=3, store_trajectories=5, counterfactual_recent=trajectories(1, 1)
    )
    assert resumed.imagination == SAVED_IMAGINATION
    assert 12.0 <= resumed.elapsed_s < 60.0  # the clock goes on from the saved elapsed time


def test_the_ledger_round_trips_through_a_checkpoint_and_an_older_one_starts_it_at_zero(tmp_path):
    from experiments.ledger import Ledger

    store = TrajectoryStore(tmp_path / "trajectories")
    store.append(trajectories(0, 5))
    progress = LoopProgress.fresh(ImaginationConfig(), branch_seed=0, warm_start_env_steps=5)
    progress.ledger = Ledger(world_model_expert_steps=7, world_model_real_steps=40, critic_real_steps=33,
                             eval_env_steps=300, evaluations=3, steps_at_refit=40)
    loop = progress.loop_state(2, stopped=False, metrics_lines=3, store_trajectories=5, counterfactual_recent=None)
    read_back = LoopState(**json.loads(json.dumps(dataclasses.asdict(loop))))
    resumed = LoopProgress.fresh(ImaginationConfig(), branch_seed=0, warm_start_env_steps=0)
    resumed.restore(read_back, store)
    assert resumed.ledger == progress.ledger and resumed.ledger is not progress.ledger
    older = dataclasses.asdict(loop)
    del older["ledger"]  # a checkpoint written before the ledger existed
    resumed.restore(LoopState(**older), store)
    assert resumed.ledger == Ledger()


def burn_cpu(seconds: float) -> None:
    """Spend at least ``seconds`` of this process's CPU time."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        sum(i * i for i in range(1000))


def test_warm_start_check_steps_and_cpu_seconds_survive_a_resume_and_an_older_checkpoint_makes_them_unknown(
    tmp_path,
):
    store = TrajectoryStore(tmp_path / "trajectories")
    store.append(trajectories(0, 5))
    progress = LoopProgress.fresh(ImaginationConfig(), branch_seed=0, warm_start_env_steps=5,
                                  warm_start_check_steps=123)
    progress.start_clocks()
    burn_cpu(0.05)
    loop = progress.loop_state(2, stopped=False, metrics_lines=3, store_trajectories=5, counterfactual_recent=None)
    assert loop.warm_start_check_steps == 123 and loop.cpu_s >= 0.05
    record = json.loads(json.dumps(dataclasses.asdict(loop)))  # as a checkpoint writes and reads it
    before = time.process_time()
    resumed = LoopProgress.fresh(ImaginationConfig(), branch_seed=0, warm_start_env_steps=0)  # a resumed run's
    resumed.start_clocks()
    resumed.restore(LoopState(**record), store)
    burn_cpu(0.05)
    spent = time.process_time() - before  # this part's CPU, an upper bound on what it adds
    assert resumed.warm_start_check_steps == 123
    assert loop.cpu_s + 0.05 <= resumed.cpu_seconds() <= loop.cpu_s + spent
    older = {k: v for k, v in record.items() if k not in ("warm_start_check_steps", "cpu_s")}
    resumed.restore(LoopState(**older), store)  # a checkpoint written before either was recorded
    assert resumed.warm_start_check_steps is None and resumed.cpu_seconds() is None


def test_a_run_without_a_warm_start_has_no_check_steps_and_counts_cpu_from_its_start():
    progress = LoopProgress.fresh(ImaginationConfig(), branch_seed=0, warm_start_env_steps=0)
    assert progress.warm_start_check_steps == 0
    progress.start_clocks()
    before = time.process_time()
    burn_cpu(0.02)
    assert 0.02 <= progress.cpu_seconds() <= time.process_time() - before + 0.01
