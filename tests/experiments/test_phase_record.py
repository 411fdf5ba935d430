"""What a phase of the loop did lands on the loop's counters through ``LoopProgress.apply`` alone.

Each expected value is worked out by hand from the starting counters and the record; and the
structure is checked: the x-axis advances in one function, and only ``train_on_rank`` applies."""

from __future__ import annotations

import ast
import pathlib

from experiments.loop_progress import LoopProgress
from experiments.phase_record import PhaseRecord
from imagination.config import ImaginationConfig
from tests.experiments.test_resume import trajectories

EXPERIMENTS = pathlib.Path(__file__).resolve().parents[2] / "experiments"


def progress_at(real_env_steps: int = 0) -> LoopProgress:
    progress = LoopProgress.fresh(ImaginationConfig(gate_threshold=0.5, recent_trajectories=3, warmup_iterations=2),
                                  branch_seed=0, warm_start_env_steps=0)
    progress.real_env_steps = real_env_steps
    return progress


def counters(progress: LoopProgress) -> dict:
    return {
        "real_env_steps": progress.real_env_steps, "next_ids": dict(progress.next_ids),
        "recent": [t.trajectory_id for t in progress.recent], "warmup_left": progress.warmup_left,
        "real_credit": progress.real_credit, "gate_open": progress.gate.is_open,
        "world_model_fitted": progress.world_model_fitted, "imagined_groups_total": progress.imagined_groups_total,
        "groups_total": progress.groups_total, "ledger": progress.ledger.as_record(),
        "history": [dict(row) for row in progress.history],
    }


def test_a_record_of_n_steps_advances_the_x_axis_by_n_and_the_ids_by_its_counts():
    progress = progress_at(real_env_steps=5)
    progress.next_ids = {"group": 2, "trajectory": 8}
    progress.apply(PhaseRecord(real_env_steps=7, groups=3, trajectories=12))
    assert progress.real_env_steps == 12  # 5 + 7
    assert progress.next_ids == {"group": 5, "trajectory": 20}  # 2 + 3, 8 + 12
    progress.apply(PhaseRecord(real_env_steps=4, trajectories=1))  # e.g. the oracle's branch steps
    assert progress.real_env_steps == 16 and progress.next_ids == {"group": 5, "trajectory": 21}


def test_an_empty_record_changes_nothing():
    progress = progress_at(real_env_steps=9)
    progress.history = [{"iteration": 0, "charts/real_env_steps": 0}]
    progress.real_credit, progress.gate.is_open, progress.world_model_fitted = 0.25, True, True
    before = counters(progress)
    progress.apply(PhaseRecord())
    assert counters(progress) == before


def test_recent_episodes_are_kept_up_to_the_configured_number():
    progress = progress_at()
    progress.apply(PhaseRecord(recent=trajectories(0, 2)))
    progress.apply(PhaseRecord(recent=trajectories(2, 2)))
    assert [t.trajectory_id for t in progress.recent] == [1, 2, 3]  # the newest 3 of ids 0-3


def test_the_split_s_warm_up_and_credit():
    progress = progress_at()
    progress.apply(PhaseRecord(warmup_iterations=1))
    assert progress.warmup_left == 1  # 2 configured, one spent
    progress.apply(PhaseRecord(real_credit=0.25))
    progress.apply(PhaseRecord())  # None: the credit stays
    assert progress.real_credit == 0.25
    progress.apply(PhaseRecord(real_credit=0.0))
    assert progress.real_credit == 0.0


def test_the_gate_moves_only_when_a_record_says_where():
    progress = progress_at()
    progress.apply(PhaseRecord(gate_open=True))
    progress.apply(PhaseRecord())
    assert progress.gate.is_open is True
    progress.apply(PhaseRecord(gate_open=False))
    assert progress.gate.is_open is False


def test_a_fit_counts_every_real_step_so_far_including_the_record_s_own():
    progress = progress_at(real_env_steps=10)
    progress.apply(PhaseRecord(world_model_fitted=True, world_model_refit=True))
    assert (progress.ledger.world_model_real_steps, progress.ledger.steps_at_refit) == (10, 10)
    progress.apply(PhaseRecord(real_env_steps=4, world_model_refit=True))
    assert (progress.ledger.world_model_real_steps, progress.ledger.steps_at_refit) == (14, 14)  # 10 + 4
    progress.apply(PhaseRecord(real_env_steps=6))  # no fit: the fitted steps stay at 14
    assert (progress.ledger.world_model_real_steps, progress.real_env_steps) == (14, 20)
    assert progress.world_model_fitted  # a later record without a fit never unsets it


def test_ledger_entries_add_up():
    progress = progress_at()
    progress.apply(PhaseRecord(world_model_expert_steps=30, critic_real_steps=6, evaluations=[3, 5]))
    progress.apply(PhaseRecord(critic_real_steps=10, evaluations=[4]))
    ledger = progress.ledger
    assert ledger.world_model_expert_steps == 30
    assert ledger.critic_real_steps == 16  # 6 + 10
    assert (ledger.evaluations, ledger.eval_env_steps) == (3, 12)  # 3 evaluations of 3 + 5 + 4 steps
    assert ledger.world_model_real_steps == 0  # no fit


def test_group_totals_and_history_rows():
    progress = progress_at()
    progress.imagined_groups_total, progress.groups_total = 2, 5
    progress.apply(PhaseRecord(imagined_groups=3, update_groups=4))
    assert (progress.imagined_groups_total, progress.groups_total) == (5, 9)
    progress.apply(PhaseRecord(history_row={"iteration": 0, "eval/success_rate": 0.1}))
    progress.apply(PhaseRecord(history_row={"iteration": 1, "charts/success_rate": 0.3}))
    progress.apply(PhaseRecord(final_figures={"eval/success_rate": 0.5}))  # added to the last row only
    assert progress.history == [{"iteration": 0, "eval/success_rate": 0.1},
                                {"iteration": 1, "charts/success_rate": 0.3, "eval/success_rate": 0.5}]


def functions_doing(predicate) -> set[str]:
    """``file::function`` of every function in experiments/ (benchmarks aside) holding a node that
    satisfies ``predicate``; nested functions count as their outermost one."""
    found = set()
    for path in sorted(EXPERIMENTS.rglob("*.py")):
        if "benchmarks" in path.parts:
            continue
        for top in ast.parse(path.read_text()).body:
            defs = [top] if isinstance(top, ast.FunctionDef) else [
                node for node in getattr(top, "body", []) if isinstance(node, ast.FunctionDef)]
            for function in defs:
                if any(predicate(node) for node in ast.walk(function)):
                    found.add(f"{path.name}::{function.name}")
    return found


def root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def test_the_x_axis_advances_in_one_function():
    def advances(node):
        return (isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute)
                and node.target.attr == "real_env_steps")

    assert functions_doing(advances) == {"loop_progress.py::apply"}


# Methods that change what they are called on, as the loop's counters and their containers have them.
MUTATORS = {"apply", "restore", "start_clocks", "take_ids", "extend", "append", "update", "count_fit",
            "count_evaluation"}


def test_only_train_on_rank_changes_progress():
    def applies(node):
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "apply"
                and root_name(node.func.value) == "progress")

    def changes_progress(node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in MUTATORS and root_name(node.func.value) == "progress"
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign) else []
        flat = [t for target in targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
        return any(isinstance(t, (ast.Attribute, ast.Subscript)) and root_name(t) == "progress" for t in flat)

    assert functions_doing(applies) == {"train.py::train_on_rank"}
    assert functions_doing(changes_progress) == {"train.py::train_on_rank"}  # apply, start_clocks, restore
