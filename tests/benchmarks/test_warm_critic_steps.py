"""The pure figures of the warm-critic steps benchmark against references worked by hand, and (slow) a tiny
run of it end to end."""

import json
from pathlib import Path

import pytest

from benchmarks import warm_critic_steps as bench
from experiments.reporting import load_runs


def test_a_run_folder_names_its_arm_and_seed():
    assert bench.arm_and_seed(Path("x/arm=warm,seed=2")) == ("warm", 2)
    assert bench.arm_and_seed(Path("x/arm=earlier,seed=10")) == ("earlier", 10)
    assert bench.arm_and_seed(Path("x/method=ppo_turn,seed=0")) == (None, None)
    assert bench.arm_and_seed(Path("x/arm=warm")) == (None, None)


def test_the_imported_steps_are_added_and_unknown_stays_unknown():
    assert bench.with_imported(30_000, 50_000) == 80_000
    assert bench.with_imported(30_000, 0) == 30_000
    assert bench.with_imported(None, 50_000) is None  # never held the target
    assert bench.with_imported(30_000, None) is None  # a ledger that does not say


def test_steps_text_is_the_geometric_mean_with_its_log_scale_interval():
    # logs of 1000, 2000, 4000 are ln 2000 -/+ ln 2: geometric mean 2,000, standard deviation ln 2,
    # standard error ln 2 / sqrt 3 = 0.40019, t(0.975, 2) = 4.302653: half width 1.72188 on the log
    # scale, so 2000 * exp(-1.72188) = 357.5 and 2000 * exp(1.72188) = 11,190.0.
    assert bench.steps_text([1000, 2000, 4000]) == "2,000 [357, 11,190]"
    assert bench.steps_text([1000, None, 4000]) == "not reached (2/3)"
    assert bench.steps_text([]) == "not reached (0/0)"


def test_the_ratio_is_fresh_over_warm_seed_by_seed_over_the_seeds_both_held():
    # seed 0: 4000 / 1000 = 4, seed 1: 4000 / 2000 = 2, seed 2: 1000 / 1000 = 1; seed 3 fresh never held it.
    # logs 2 ln 2, ln 2, 0: geometric mean 2, the same spread as above: 2 * exp(-/+1.72188) = 0.36, 11.19.
    fresh = {0: 4000, 1: 4000, 2: 1000, 3: None}
    warm = {0: 1000, 1: 2000, 2: 1000, 3: 500}
    assert bench.ratio_text(fresh, warm) == ("2.00 [0.36, 11.19] over 3 paired seeds "
                                             "(seed 0 4.00, seed 1 2.00, seed 2 1.00)")
    assert bench.ratio_text({0: None}, {0: 1000}) == "no seed where both arms held it: no paired ratio"


def run_folder(path: Path, successes: list[float], budget: int = 5000) -> Path:
    """A finished run folder evaluated every 1,000 real steps with ``successes`` at marks 0, 1000, ..."""
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(f"trainer:\n  eval_every_steps: 1000\n  max_env_steps: {budget}\n")
    rows = [{"charts/real_env_steps": 1000 * i, "eval/success_rate": v} for i, v in enumerate(successes)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (path / "done").write_text("")
    return path


def test_a_crossing_is_decided_only_by_the_marks_before_the_budgets_own_evaluation(tmp_path):
    # held from 1,000: marks 1k, 2k, 3k at 0.8 or above, all before the last mark (5k)
    assert bench.decided(run_folder(tmp_path / "a", [0.5, 0.9, 0.8, 0.9, 0.5, 0.9]))
    # held from 2,000 only with the last mark (4k), which a longer run plays otherwise: not yet decided
    assert not bench.decided(run_folder(tmp_path / "b", [0.5, 0.5, 0.9, 0.9, 0.9]))
    assert not bench.decided(run_folder(tmp_path / "c", [0.5, 0.9, 0.9, 0.7, 0.9, 0.9]))
    assert bench.budget_of(run_folder(tmp_path / "d", [0.5], budget=30_000)) == 30_000


@pytest.mark.slow
def test_tiny_runs_start_the_warm_arm_from_the_earlier_critic(tmp_path, capsys):
    # --stage 3300 of 6600: the compared runs stop at 3,300 (a checkpoint, 10 iterations, before the budget shaped them)
    # undecided and are extended to 6,600 by resume=
    bench.main(["--seeds", "1", "--earlier-steps", "300", "--env-steps", "6600", "--stage", "3300", "--jobs", "1",
                "--out", str(tmp_path)])
    runs = {bench.arm_and_seed(run.path): run for run in load_runs(tmp_path)}
    earlier, fresh, warm = runs[("earlier", 10)], runs[("fresh", 1)], runs[("warm", 1)]
    assert warm.ledger[bench.IMPORTED] == earlier.ledger["critic_real_steps"] > 0
    assert fresh.ledger[bench.IMPORTED] == 0
    assert bench.budget_of(warm.path) == bench.budget_of(fresh.path) == 6600 and warm.real_env_steps >= 6600
    assert (warm.path / bench.FIRST_EV).is_file()
    assert "paired ratio fresh / warm" in capsys.readouterr().out
